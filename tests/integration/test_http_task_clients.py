"""The client walkthrough of docs/tasks.md ("A client's side"), run as written against gunicorn
serving tests/apps/tasks_app.py: the curl lines of each era, in ``sh``, with the ids a reader
copies from one answer into the next command copied the same way (the ``TASK=`` and ``EID=``
lines), and the two scripts of the official Python SDK in examples/, whose output must be what
the page shows. The curl tests skip, saying so, where curl is not installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.gunicorn import GunicornServer, lend

APP = "tests.apps.tasks_app:app"
#: The URL the page's commands use (the default bind).
DOC_URL = "http://127.0.0.1:8000/mcp"
#: [seconds] bound on one step of the walkthrough.
STEP_TIMEOUT = 30.0


def walkthrough() -> str:
    text = (REPO / "docs/tasks.md").read_text()
    start = text.index("## A client's side")
    return text[start : text.index("\n## ", start + 1)]


def era(name: str) -> str:
    """The part of the walkthrough under the heading that starts with ``name``."""
    text = walkthrough()
    start = text.index(f"### {name}")
    end = text.find("\n### ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


@pytest.fixture(scope="module")
def _clients_server(_log_dir: Path) -> Iterator[GunicornServer]:
    server = GunicornServer({"keepalive_interval": 0.5}, _log_dir, app=APP)
    yield server
    server.stop()


@pytest.fixture
def tasks_server(request: pytest.FixtureRequest, _clients_server: GunicornServer) -> Iterator[GunicornServer]:
    yield from lend(request, _clients_server)


class Shell:
    """Runs the page's ``sh`` lines against ``url``, each step after the ``prelude`` (the era's
    ``URL``, ``SID`` and ``post`` definitions)."""

    def __init__(self, url: str):
        if shutil.which("curl") is None:
            pytest.skip("curl is not installed (Debian: apt-get install curl)")
        self.url = url
        self.prelude = ""

    def script(self, lines: str, **copied: str) -> str:
        # What a reader copies from an answer into a VAR=... line, copied here.
        for name, value in copied.items():
            lines, n = re.subn(rf"^{name}=\S+", f"{name}={value}", lines, flags=re.M)
            assert n == 1, f"the step has no {name}= line to copy the value into:\n{lines}"
        return (self.prelude + lines).replace(DOC_URL, self.url)

    def run(self, lines: str, **copied: str) -> str:
        done = subprocess.run(
            ["sh", "-c", self.script(lines, **copied)], capture_output=True, text=True, timeout=STEP_TIMEOUT
        )
        assert done.returncode == 0, (done.returncode, done.stderr)
        return done.stdout

    def start(self, lines: str, **copied: str) -> subprocess.Popen:
        return subprocess.Popen(["sh", "-c", self.script(lines, **copied)], stdout=subprocess.PIPE, text=True)


def answers(output: str) -> list[dict]:
    """The JSON-RPC messages of a step's output, one a line."""
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_the_curl_walkthrough_of_a_2025_11_25_session(tasks_server):
    shell = Shell(tasks_server.url)
    session, create, get, cancel, ask, answer = sh_blocks(era("2025-11-25 with curl"))
    sid = shell.run(session + 'echo "SID=$SID"\n').splitlines()[-1].removeprefix("SID=")
    assert sid, "initialize gave no session id"
    definitions = session.split("post -d")[0]
    shell.prelude = re.sub(r"^SID=\$\(.*?\)$\n", f"SID={sid}\n", definitions, count=1, flags=re.M | re.S)

    (created,) = answers(shell.run(create))
    task = created["result"]["task"]
    assert task["status"] == "working" and task["ttl"] == 600000, created
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:
        (polled,) = answers(shell.run(get, TASK=task["taskId"]))
        if polled["result"].get("statusMessage", "").startswith("step") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert polled["result"]["status"] == "working" and polled["result"]["statusMessage"].startswith("step"), polled
    (cancelled,) = answers(shell.run(f"TASK={task['taskId']}\n" + cancel))
    assert cancelled["result"]["status"] == "cancelled", cancelled

    create_approve, follow = ask.split("\n", 1)
    (created,) = answers(shell.run(create_approve + "\n"))
    task_id = created["result"]["task"]["taskId"]
    stream = shell.start(follow, TASK=task_id)
    try:
        assert stream.stdout is not None
        head = []
        while not head or '"elicitation/create"' not in head[-1]:
            line = stream.stdout.readline()
            assert line, f"the stream ended before the question:\n{''.join(head)}"
            head.append(line)
        assert head[0].startswith("HTTP/1.1 200") and "Content-Type: text/event-stream\n" in head, head
        question = json.loads(head[-1].removeprefix("data: "))
        assert question["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
        accepted = shell.run(answer, EID=question["id"])
        assert accepted.startswith("HTTP/1.1 202"), accepted
        rest = stream.communicate(timeout=STEP_TIMEOUT)[0]
    finally:
        stream.kill()
        stream.wait()
    messages = [json.loads(line.removeprefix("data: ")) for line in rest.splitlines() if line.startswith("data: ")]
    assert messages[-1]["id"] == 6 and messages[-1]["result"]["content"][0]["text"] == "approved crate", messages


def test_the_curl_walkthrough_of_the_2026_07_28_extension(tasks_server):
    shell = Shell(tasks_server.url)
    definitions, create, get, answer, cancel = sh_blocks(era("2026-07-28 with curl"))
    assert shell.run(definitions) == ""
    shell.prelude = definitions

    (created,) = answers(shell.run(create))
    assert created["result"]["resultType"] == "task", created
    task_id = created["result"]["taskId"]
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:
        (polled,) = answers(shell.run(get, TASK=task_id))
        if polled["result"]["status"] != "working" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert list(polled["result"]["inputRequests"]) == ["approve"], polled
    updated, after = answers(shell.run(f"TASK={task_id}\n" + answer))
    assert updated["result"]["resultType"] == "complete", updated
    while after["result"]["status"] == "working" and time.monotonic() < deadline:
        time.sleep(0.2)
        after = answers(shell.run(f"TASK={task_id}\n" + answer.splitlines()[-1] + "\n"))[0]
    assert after["result"]["status"] == "completed", after
    assert after["result"]["result"]["content"][0]["text"] == "approved crate", after

    create_report, rest = cancel.split("\n", 1)
    (report,) = answers(shell.run(create_report + "\n"))
    acknowledged, cancelled = answers(shell.run(rest, TASK=report["result"]["taskId"]))
    assert acknowledged["result"]["resultType"] == "complete", acknowledged
    assert cancelled["result"]["status"] == "cancelled", cancelled


@pytest.mark.parametrize("script", ["examples/task_client_2026.py", "examples/task_client_2025.py"])
def test_the_sdk_scripts_print_what_the_page_shows(tasks_server, script):
    text = walkthrough()
    shown = re.search(rf"`python {re.escape(script)}` prints:\n\n```text\n(.*?)```", text, flags=re.S)
    assert shown, f"docs/tasks.md shows no output of {script}"
    done = subprocess.run(
        [sys.executable, script, tasks_server.url], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown.group(1), done.stdout
