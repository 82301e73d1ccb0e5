"""``zemcp run`` as a desktop client starts it (``python -m zemcp run``, a pipe on stdin): the hint
for a missing ``--transport stdio``, the endpoint's URL, a taken port, HTTP-only options refused
over stdio, and a server that stops when the program that started it exits."""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.support import REPO
from tests.support.net import HOST, free_port
from tests.support.processes import stop_group

#: [seconds] bound on a start, and on a stop after the parent exited (the watch looks each second).
TIMEOUT = 20
#: A parent that starts its arguments as a child with its own stdin, stdout and stderr, then waits.
PARENT = "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(600)"
RUN = [sys.executable, "-m", "zemcp", "run", "wsgi.py"]


def wait_for(condition, what: str, proc: subprocess.Popen, log) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {TIMEOUT} s:\n{log.read_text()}"
        assert proc.poll() is None or proc.returncode == -signal.SIGKILL, log.read_text()
        time.sleep(0.05)


def listening(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=0.5).close()
    except OSError:
        return False
    return True


def read_to_end(stream) -> bytes:
    """Everything left on ``stream`` until every writer closed it (at most TIMEOUT seconds)."""
    data, deadline = b"", time.monotonic() + TIMEOUT
    while (left := deadline - time.monotonic()) > 0:
        if select.select([stream], [], [], left)[0]:
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                return data
            data += chunk
    pytest.fail(f"still open after {TIMEOUT} s; read so far: {data!r}")


def test_http_with_a_pipe_on_stdin_says_to_add_transport_stdio_and_names_the_endpoint_url(tmp_path):
    port, log = free_port(), tmp_path / "run.log"
    proc = subprocess.Popen(
        [*RUN, "--bind", f"{HOST}:{port}"],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(lambda: "MCP endpoint at" in log.read_text(), "the endpoint's URL logged", proc, log)
        text = log.read_text()
        assert f"zemcp: MCP endpoint at http://{HOST}:{port}/mcp" in text, text
        assert "stdin is a pipe" in text and "needs --transport stdio in its command" in text, text
    finally:
        stop_group(proc, TIMEOUT)


def test_a_taken_port_is_refused_naming_the_option_that_moves_it():
    with socket.create_server((HOST, 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*RUN, "--bind", f"{HOST}:{port}"],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    assert done.returncode == 1, done.stderr
    assert f"{HOST}:{port} is in use by another program: serve on another port with --bind" in done.stderr
    assert "stdin is a pipe" not in done.stderr  # /dev/null is no pipe: no desktop-client hint


@pytest.mark.parametrize(
    "options", [["--bind", f"{HOST}:1"], ["--threads", "4"], ["-w", "2"], ["--reload"]], ids=lambda o: o[0]
)
def test_stdio_refuses_the_options_of_http(options):
    done = subprocess.run(
        [*RUN, "--transport", "stdio", *options],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    name = {"-w": "--workers"}.get(options[0], options[0])
    assert done.returncode == 2, done.stderr
    assert f"{name}: for --transport http only" in done.stderr, done.stderr
    assert done.stdout == ""


def start_under_a_parent(args: list[str], log) -> subprocess.Popen:
    """``args`` as the child of a parent process that the test kills; stdin and stdout are the
    test's pipes, which the child shares, so the test still holds stdin's writing end."""
    return subprocess.Popen(
        [sys.executable, "-c", PARENT, *args],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log.open("wb"),
        start_new_session=True,
    )


def test_stdio_stops_cleanly_when_its_parent_exits(tmp_path):
    """The parent is killed while stdin stays open: the server ends the session (the waiting
    handler's call is answered), then exits, closing stdout."""
    log = tmp_path / "stderr.log"
    parent = start_under_a_parent([*RUN, "--transport", "stdio"], log)
    try:
        for message in (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "desktop", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ze_execute", "arguments": {}}},
        ):
            parent.stdin.write(json.dumps(message).encode() + b"\n")
        parent.stdin.flush()
        assert json.loads(parent.stdout.readline())["id"] == 1
        assert json.loads(parent.stdout.readline())["method"] == "elicitation/create"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(TIMEOUT)
        rest = [json.loads(line) for line in read_to_end(parent.stdout).splitlines()]
        assert [m.get("method") or m.get("id") for m in rest] == ["notifications/cancelled", 2], rest
        assert "stopped by SIGTERM" in rest[1]["result"]["content"][0]["text"], rest
        assert f"the client (the parent process, pid {parent.pid}) exited; stopping" in log.read_text()
    finally:
        stop_group(parent, TIMEOUT)


def test_http_started_with_a_pipe_on_stdin_stops_when_its_parent_exits(tmp_path):
    """gunicorn's master and workers share the test's stdout pipe: it closes once all exited."""
    port, log = free_port(), tmp_path / "stderr.log"
    parent = start_under_a_parent([*RUN, "--bind", f"{HOST}:{port}"], log)
    try:
        wait_for(lambda: "MCP endpoint at" in log.read_text() and listening(port), "listening", parent, log)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(TIMEOUT)
        read_to_end(parent.stdout)
        assert not listening(port)
        text = log.read_text()
        assert f"zemcp: the parent process (pid {parent.pid}) exited; stopping" in text, text
        assert "Shutting down: Master" in text, text
    finally:
        stop_group(parent, TIMEOUT)
