"""Worker tags in session ids, sibling workers, and what a session of another worker is answered (zemcp.state.workers)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zemcp.state import workers
from zemcp.state.interfaces import SessionNotFound
from zemcp.state.registry import SIBLING_SESSION, SIBLING_WARNING_INTERVAL, STOPPED_SESSION, SessionRegistry
from zemcp.state.session import UNKNOWN_SESSION

REPO = Path(__file__).resolve().parents[2]
#: The largest pid Linux hands out (PID_MAX_LIMIT on 64-bit systems).
LINUX_PID_MAX = 4194304
RANDOM = "x" * 32

#: Run in a child of the test process, next to a sleeping one: what a worker makes of the
#: sessions of its sibling (argv[1]), of a process that has exited (argv[2]) and of its own.
CHECK = """
import json, logging, os, sys
from zemcp.state import workers
from zemcp.state.interfaces import SessionNotFound
from zemcp.state.registry import SessionRegistry

sibling, exited = int(sys.argv[1]), int(sys.argv[2])
warnings = []
handler = logging.Handler()
handler.emit = lambda record: warnings.append(record.getMessage())
logging.getLogger("zemcp.session").addHandler(handler)
registry = SessionRegistry(10, 60, lambda s, why: None, instance="a")

def answer(pid):
    try:
        registry.get("a.%s.%s" % (workers.tag(pid), "x" * 32))
    except SessionNotFound as exc:
        return str(exc)

print(json.dumps({
    "sibling": workers.is_sibling(sibling),
    "exited": workers.is_sibling(exited),
    "parent": workers.is_sibling(os.getppid()),
    "itself": workers.is_sibling(os.getpid()),
    "answers": [answer(sibling), answer(sibling), answer(exited), answer(os.getpid())],
    "warnings": warnings,
}))
"""


def registry() -> SessionRegistry:
    return SessionRegistry(10, 60, lambda s, why: None, instance="a")


def not_found(reg: SessionRegistry, session_id: str) -> str:
    """The message ``reg.get(session_id)`` refuses the id with."""
    with pytest.raises(SessionNotFound) as refused:
        reg.get(session_id)
    return str(refused.value)


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "zemcp.session" and r.levelname == "WARNING"]


@pytest.mark.parametrize("pid", [1, 35, 36, 4242, 99999, LINUX_PID_MAX])
def test_a_tag_names_its_pid_in_a_few_base36_characters(pid):
    """The tag is the pid in lowercase base 36, at most 5 characters for a Linux pid, and an id carrying it gives the pid back."""
    tag = workers.tag(pid)
    assert int(tag, 36) == pid and tag == tag.lower() and len(tag) <= 5
    assert workers.creator(f"a.{tag}.{RANDOM}") == pid
    assert workers.tag() == workers.tag(os.getpid())


@pytest.mark.parametrize(
    "session_id",
    [f"a.{RANDOM}", f"a.1K.{RANDOM}", f"a.1_0.{RANDOM}", f"a..{RANDOM}", f"a.1.2.{RANDOM}", "a", "", f"a. 1.{RANDOM}"],
    ids=["no tag", "upper case", "underscore", "empty tag", "four parts", "no dot", "empty", "space"],
)
def test_an_id_of_another_shape_names_no_worker(session_id):
    """Ids without exactly one lowercase base-36 tag between the instance and the random part name no creator."""
    assert workers.creator(session_id) is None


def test_a_worker_tells_a_live_sibling_from_an_exited_process_and_itself():
    """In a child of this process, another (sleeping) child is a sibling worker: its sessions are answered as
    another worker's, with one warning for two requests; an exited process's as stopped, its own as unknown."""
    exited = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.DEVNULL)
    exited.wait()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL)
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        checked = subprocess.run(
            [sys.executable, "-c", CHECK, str(sleeper.pid), str(exited.pid)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        sleeper.kill()
        sleeper.wait()
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    assert (report["sibling"], report["exited"], report["parent"], report["itself"]) == (True, False, False, False)
    assert report["answers"] == [SIBLING_SESSION, SIBLING_SESSION, STOPPED_SESSION, UNKNOWN_SESSION]
    (warning,) = report["warnings"]
    assert f"request for a session of worker {sleeper.pid} reached worker " in warning
    assert "ZEMCP_REDIS_URL" in warning


def test_children_of_this_process_are_no_siblings_of_it():
    """A child's parent is this process, not this process's parent: no sibling; nor is this process itself."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL)
    try:
        assert not workers.is_sibling(child.pid)
    finally:
        child.kill()
        child.wait()
    assert not workers.is_sibling(os.getpid()) and not workers.is_sibling(0) and not workers.is_sibling(-1)


def test_a_session_of_a_sibling_worker_says_what_to_set_and_warns_once_per_interval(monkeypatch, caplog):
    """Requests for a sibling worker's session get the message naming ZEMCP_REDIS_URL; the warning is logged once
    per interval, the next one with the count of those in between."""
    monkeypatch.setattr(workers, "is_sibling", lambda pid: pid == 4242)
    reg = registry()
    sibling = f"a.{workers.tag(4242)}.{RANDOM}"
    assert [not_found(reg, sibling) for _ in range(3)] == [SIBLING_SESSION] * 3
    assert "set ZEMCP_REDIS_URL" in SIBLING_SESSION and "ZEMCP_WORKERS=1" in SIBLING_SESSION
    (warning,) = warnings(caplog)
    assert f"session of worker 4242 reached worker {os.getpid()} of this gunicorn" in warning
    assert (
        "set ZEMCP_REDIS_URL (pip install redis, or '.[redis]' in a zemcp checkout)" in warning
        and "more such" not in warning
    )

    caplog.clear()
    reg._sibling_warned -= SIBLING_WARNING_INTERVAL
    assert not_found(reg, sibling) == SIBLING_SESSION
    (warning,) = warnings(caplog)
    assert "2 more such request(s) since the last one logged" in warning


def test_a_session_of_a_stopped_worker_or_of_this_one_is_gone_without_a_warning(monkeypatch, caplog):
    """A tag naming no live sibling means its worker stopped; this process's own tag, or none, an ended session."""
    monkeypatch.setattr(workers, "is_sibling", lambda pid: False)
    reg = registry()
    stopped = not_found(reg, f"a.{workers.tag(4243)}.{RANDOM}")
    assert stopped == STOPPED_SESSION and "has stopped" in stopped and "send initialize again" in stopped
    assert not_found(reg, f"a.{workers.tag()}.{RANDOM}") == UNKNOWN_SESSION
    assert not_found(reg, f"a.{RANDOM}") == UNKNOWN_SESSION
    assert warnings(caplog) == []


def test_another_instance_keeps_its_routing_warning(monkeypatch, caplog):
    """An id of another instance is a routing mistake, whatever its worker tag says."""
    monkeypatch.setattr(workers, "is_sibling", lambda pid: True)
    assert not_found(registry(), f"b.{workers.tag(4242)}.{RANDOM}") == UNKNOWN_SESSION
    (warning,) = warnings(caplog)
    assert "instance 'b' reached instance 'a'" in warning
