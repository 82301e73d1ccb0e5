"""Worker tags in session ids, sibling workers, and what a session of another worker is answered
(zemcp.state.workers); which worker serves a connection, by the loads the workers share
(zemcp.http.workerloads)."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zemcp.http import workerloads
from zemcp.http.workerloads import ABSENT, STALE_MS, WorkerLoads, accept_now, busy_of, hand_to, pack
from zemcp.state import workers
from zemcp.state.registry import SIBLING_SESSION, SIBLING_WARNING_INTERVAL, STOPPED_SESSION, SessionRegistry
from zemcp.state.session import UNKNOWN_SESSION
from zemcp.state.sessionstore import SessionNotFound

REPO = Path(__file__).resolve().parents[2]
#: The largest pid Linux hands out (PID_MAX_LIMIT on 64-bit systems).
LINUX_PID_MAX = 4194304
RANDOM = "x" * 32

#: Run in a child of the test process, next to a sleeping one: what a worker makes of the
#: sessions of its sibling (argv[1]), of a process that has exited (argv[2]) and of its own.
CHECK = """
import json, logging, os, sys
from zemcp.state import workers
from zemcp.state.sessionstore import SessionNotFound
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


# -- the workers' loads (zemcp.http.workerloads) ---------------------------------------------


def test_busy_connections_weigh_before_idle_ones():
    """A load orders workers by busy connections, then idle ones; busy_of reads the busy ones back."""
    assert pack(0, 1000) < pack(1, 0) < pack(1, 1) < pack(2, 0) < ABSENT
    assert busy_of(pack(7, 3)) == 7 and busy_of(ABSENT) > 10**9
    assert pack(0, 10**9) < pack(1, 0), "idle connections beyond the field's range still weigh less"


@pytest.mark.parametrize(
    "mine, lowest, now",
    [
        (pack(0, 0), ABSENT, True),  # no live sibling
        (pack(2, 1), pack(2, 1), True),  # equal loads: each tries, the first takes it
        (pack(1, 5), pack(2, 0), True),
        (pack(2, 0), pack(1, 5), False),  # a sibling has fewer busy connections
        (pack(1, 2), pack(1, 1), False),  # as many busy, fewer idle
    ],
)
def test_a_worker_accepts_at_once_only_when_no_sibling_is_less_loaded(mine, lowest, now):
    """A worker takes a waiting connection at once unless a live sibling has a lower load."""
    assert accept_now(mine, lowest) is now


@pytest.mark.parametrize(
    "busy, lowest, hands",
    [
        (3, pack(0, 0), False),  # room here (budget 4)
        (4, pack(3, 9), True),  # full here, room there
        (6, pack(3, 0), True),
        (4, pack(4, 0), False),  # the whole deployment is full: served here, refused or not
        (4, ABSENT, False),  # no live sibling
    ],
)
def test_a_request_goes_to_a_sibling_only_from_a_full_worker_to_one_with_room(busy, lowest, hands):
    """With a budget of 4, a request is handed over when 4 other busy connections fill this worker
    and the least loaded sibling has fewer than 4."""
    assert hand_to(busy, lowest, 4) is hands


def test_slots_are_given_before_each_fork_and_freed_when_a_worker_exits():
    """Each fork's worker gets a free slot, absent until it publishes; without a free slot it gets
    none; a freed slot goes to the next fork."""
    table = WorkerLoads(2)
    table.assign(1)
    first = table.slot
    table.assign(2)
    second = table.slot
    assert {first, second} == {0, 1}
    table.assign(3)
    assert table.slot is None and table.inbox is None
    table.release(1)
    table.release(99)  # a worker the table never knew: nothing happens
    table.assign(4)
    assert table.slot == first
    assert table.lowest(time.monotonic()) == (ABSENT, None)


def test_the_lowest_load_is_that_of_a_live_sibling():
    """A worker sees the lowest load among the other slots whose heartbeat is fresh; its own,
    absent ones and stale ones do not count."""
    table = WorkerLoads(4)
    now = time.monotonic()
    for key, load, age in [(1, pack(1, 0), 0.0), (2, pack(0, 2), 0.0), (3, pack(0, 0), STALE_MS / 1000 + 1)]:
        table.assign(key)
        table.publish(load, now - age)
    table.assign(4)
    table.publish(ABSENT, now)
    table.slot = 1  # look from the worker of load pack(0, 2)
    assert table.lowest(now) == (pack(1, 0), 0)
    table.slot = 0
    assert table.lowest(now) == (pack(0, 2), 1)


def test_a_forked_worker_publishes_its_load_and_serves_a_connection_handed_to_it():
    """In a process forked after the table was made: its load reaches the parent through the shared
    memory, and a connection the parent hands to its inbox, with the bytes read so far, reaches it
    whole (it answers through it)."""
    table = WorkerLoads(2)
    table.assign(1)
    pid = os.fork()
    if pid == 0:  # the worker
        status = 1
        try:
            table.publish(pack(3, 1), time.monotonic())
            inbox = table.inbox
            assert inbox is not None
            inbox.setblocking(True)
            inbox.settimeout(10)
            data, fds, _, _ = socket.recv_fds(inbox, workerloads.HANDOFF_BYTES, 1)
            with socket.socket(fileno=fds[0]) as handed:
                handed.sendall(b"served: " + data)
            status = 0
        finally:
            os._exit(status)
    table.slot = None  # the parent looks as a sibling would
    client, server = socket.socketpair()
    with client, server:
        deadline = time.monotonic() + 10
        while table.lowest(time.monotonic())[0] == ABSENT and time.monotonic() < deadline:
            time.sleep(0.01)
        assert table.lowest(time.monotonic()) == (pack(3, 1), 0)
        assert table.hand(0, server, b"POST /mcp HTTP/1.1\r\n\r\n")
        server.close()  # the worker holds the connection now
        client.settimeout(10)
        assert client.recv(100) == b"served: POST /mcp HTTP/1.1\r\n\r\n"
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_connections_left_in_the_inbox_of_an_exited_worker_are_closed():
    """The master frees the slot of a worker that exited: what was handed to it too late is closed,
    so that its client sees the end of the connection; data beyond the limit is never handed."""
    table = WorkerLoads(1)
    table.assign(1)
    client, server = socket.socketpair()
    with client, server:
        assert not table.hand(0, server, b"x" * (workerloads.HANDOFF_BYTES + 1))
        assert table.hand(0, server, b"GET / HTTP/1.1\r\n\r\n")
        server.close()
        table.release(1)
        client.settimeout(10)
        assert client.recv(100) == b""


def test_only_a_worker_with_a_slot_reads_the_table(monkeypatch):
    """assign makes the table at the first fork; mine gives it to a worker that got a slot, and
    release frees that slot."""
    monkeypatch.setattr(workerloads, "_table", None)
    assert workerloads.mine() is None
    workerloads.release(1)  # nothing to free yet
    workerloads.assign(2, 1)
    table = workerloads.mine()
    assert table is not None and table.slots == 2 + workerloads.SPARE_SLOTS and table.slot is not None
    workerloads.release(1)
    for key in range(2, 2 + table.slots + 1):
        workerloads.assign(2, key)
    assert workerloads.mine() is None  # every slot held: this worker accepts as gunicorn does
