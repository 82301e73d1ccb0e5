"""The stdio transport over raw pipes: framing, era rules, a request served while an
elicitation waits, and the end of stdin ending the process (``zemcp run --transport stdio``)."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.clients import MODERN_VERSION
from tests.support.processes import stop_group
from zemcp.eras.handshake.call import INITIALIZED_GRACE

#: [seconds] bound on each read of a line and on the process's exit.
TIMEOUT = 20
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "pipes", "version": "1"},
    },
}
META = {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}


class Pipes:
    """``zemcp run wsgi.py --transport stdio`` with its stdin and stdout; stderr goes to a
    pipe, or to the file ``stderr`` (for a test that reads it while the process runs)."""

    def __init__(self, stderr=None, **settings: str):
        env = {**os.environ, **{f"ZEMCP_{name.upper()}": value for name, value in settings.items()}}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zemcp", "run", "wsgi.py", "--transport", "stdio"],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr is None else stderr.open("wb"),
            start_new_session=True,
        )

    def send(self, message) -> None:
        line = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        # readline blocks; the test's timeout (pytest-timeout) bounds a server that never answers.
        line = self.proc.stdout.readline()
        assert line, (
            f"stdout ended; stderr: {self.proc.stderr.read().decode(errors='replace') if self.proc.stderr else ''}"
        )
        return json.loads(line)

    def stop(self) -> None:
        stop_group(self.proc, TIMEOUT)


@pytest.fixture
def pipes():
    p = Pipes()
    yield p
    p.stop()


def test_handshake_era_over_stdio(pipes):
    """Bad lines get parse errors, requests wait for initialize, a ping is answered while an
    elicitation waits, and the answer on stdin completes the call."""
    pipes.send(b"{not json")
    assert pipes.read()["error"]["code"] == -32700
    pipes.send({"jsonrpc": "2.0", "id": 0, "method": "tools/list"})
    assert "initialize first" in pipes.read()["error"]["message"]
    pipes.send(INIT)
    assert pipes.read()["result"]["serverInfo"]["name"] == "zemcp-reference"
    pipes.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    pipes.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ze_execute", "arguments": {}}})
    ask = pipes.read()
    assert ask["method"] == "elicitation/create"
    pipes.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert pipes.read() == {"jsonrpc": "2.0", "id": 3, "result": {}}
    pipes.send(
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "ze_execute", "arguments": {"command": "help"}, "_meta": META},
        }
    )
    assert "handshake era" in pipes.read()["error"]["message"]
    pipes.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"command": "help"}}})
    final = pipes.read()
    assert final["id"] == 2 and "server status" in final["result"]["content"][0]["text"]


def test_modern_era_over_stdio(pipes):
    """A first request with the envelope opens a 2026-07-28 connection: rounds, no initialize."""
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "ze_execute",
            "arguments": {},
            "_meta": {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}},
        },
    }
    pipes.send(call)
    first = pipes.read()["result"]
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["command"]
    pipes.send(INIT)
    assert pipes.read()["error"]["code"] == -32022
    retry = json.loads(json.dumps(call))
    retry["id"] = 2
    retry["params"].update(
        requestState=first["requestState"],
        inputResponses={"command": {"action": "accept", "content": {"command": "help"}}},
    )
    pipes.send(retry)
    done = pipes.read()
    assert done["id"] == 2 and done["result"]["resultType"] == "complete"
    assert "server status" in done["result"]["content"][0]["text"]


def test_end_of_stdin_ends_the_session_and_the_process(pipes):
    """Closing stdin while a handler waits for an answer wakes it and the process exits 0."""
    pipes.send(INIT)
    pipes.read()
    pipes.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ze_execute", "arguments": {}}})
    ask = pipes.read()
    assert ask["method"] == "elicitation/create"
    pipes.proc.stdin.close()
    assert pipes.proc.wait(TIMEOUT) == 0
    # What follows is the withdrawal of the question and the call's error result, nothing else.
    rest = [json.loads(line) for line in pipes.proc.stdout.read().splitlines()]
    assert [m.get("method") or m.get("id") for m in rest] == ["notifications/cancelled", 2], rest
    assert rest[0]["params"]["requestId"] == ask["id"]
    assert "the client closed stdin" in rest[1]["result"]["content"][0]["text"]


def test_initialized_notification_lets_the_first_question_go_at_once(tmp_path):
    """notifications/initialized is recorded: the first elicitation/create does not wait
    INITIALIZED_GRACE for it, and nothing claims the client broke its MUST."""
    stderr = tmp_path / "stderr.log"
    pipes = Pipes(stderr)
    try:
        pipes.send(INIT)
        pipes.read()
        pipes.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        pipes.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert pipes.read()["id"] == 2  # the notification (read before this) was handled
        started = time.monotonic()
        pipes.send(
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ze_execute", "arguments": {}}}
        )
        ask = pipes.read()
        waited = time.monotonic() - started
        assert ask["method"] == "elicitation/create"
        assert waited < INITIALIZED_GRACE, f"the question waited {waited:.2f} s"
        pipes.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"command": "help"}}})
        assert pipes.read()["id"] == 3
        pipes.proc.stdin.close()
        assert pipes.proc.wait(TIMEOUT) == 0
    finally:
        pipes.stop()
    assert "notifications/initialized" not in stderr.read_text(), stderr.read_text()


def test_a_line_over_max_body_bytes_is_refused_and_reading_goes_on(tmp_path):
    """A line longer than ZEMCP_MAX_BODY_BYTES gets -32600 naming the limit while it is still
    being written; it is dropped, not kept (the process's peak memory stays far below its
    length), and the next line is served."""
    pipes = Pipes(tmp_path / "stderr.log", max_body_bytes="4096")
    try:
        pipes.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META, "pad": "x" * 3500}})
        assert "tools" in pipes.read()["result"]
        chunk = b"x" * (1 << 20)
        for _ in range(256):  # 256 MiB without a newline
            pipes.proc.stdin.write(chunk)
        pipes.proc.stdin.flush()
        refused = pipes.read()
        assert refused["id"] is None and refused["error"]["code"] == -32600, refused
        message = refused["error"]["message"]
        assert "exceeds 4096 bytes" in message and "ZEMCP_MAX_BODY_BYTES" in message, message
        pipes.send(b'x"}')  # the newline that ends the long line
        pipes.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}})
        assert "tools" in pipes.read()["result"]
        status = (Path("/proc") / str(pipes.proc.pid) / "status").read_text()
        peak_kib = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])
        assert peak_kib < 128 * 1024, f"peak resident memory {peak_kib} KiB"
    finally:
        pipes.stop()


def test_cancellations_naming_no_request_id_leave_the_server_serving(pipes):
    """2026-07-28 notifications/cancelled whose requestId is an object, an array or missing
    are ignored; the request after them is answered."""
    pipes.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}})
    assert "tools" in pipes.read()["result"]
    for request_id in ({"a": 1}, [1], None):
        params = {"requestId": request_id} if request_id is not None else {}
        pipes.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
    pipes.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}})
    assert "tools" in pipes.read()["result"]
    assert pipes.proc.poll() is None


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_logs_go_to_stderr_in_the_chosen_format_and_stdout_carries_only_the_protocol(tmp_path, log_format):
    """ZEMCP_LOG_FORMAT=json makes every stderr line one JSON object (a crafted client name
    forges none, the session is a fingerprint); text keeps the lines as they were. stdout
    holds the JSON-RPC messages and nothing else in either."""
    crafted = 'evil\n2026-12-03 12:00:00,000 [1] [CRITICAL] zemcp.forged: {"event": "forged"}"}'
    stderr = tmp_path / "stderr.log"
    pipes = Pipes(stderr, log_format=log_format)
    try:
        init = json.loads(json.dumps(INIT))
        init["params"]["clientInfo"]["name"] = crafted
        pipes.send(init)
        assert pipes.read()["result"]["serverInfo"]["name"] == "zemcp-reference"
        pipes.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        pipes.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "ze_execute", "arguments": {"command": "help"}},
            }
        )
        assert "server status" in pipes.read()["result"]["content"][0]["text"]
        pipes.proc.stdin.close()
        assert pipes.proc.wait(TIMEOUT) == 0
        assert pipes.proc.stdout.read() == b"", "stdout holds the protocol only"
    finally:
        pipes.stop()
    lines = stderr.read_text().splitlines()
    assert lines, "the server logged to stderr"
    if log_format == "text":
        head = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \[\d+\] \[(INFO|WARNING)\] zemcp\.\w+: "
        assert all(re.match(head, line) for line in lines), lines
        assert any(re.match(head + r"session [0-9a-f]{12} initialized: client 'evil\\n", line) for line in lines)
        return
    records = [json.loads(line) for line in lines]
    assert all(r["event"] != "forged" and isinstance(r["pid"], int) for r in records), records
    [initialized] = [r for r in records if r["event"] == "session_initialized"]
    assert re.fullmatch("[0-9a-f]{12}", initialized["session"])
    assert initialized["message"].startswith(f"session {initialized['session']} initialized: client 'evil\\n")
    [ended] = [r for r in records if r["event"] == "session_ended"]
    assert (ended["logger"], ended["session"]) == ("zemcp.server", initialized["session"])


def test_a_log_format_of_neither_kind_stops_the_server_naming_the_variable():
    env = {**os.environ, "ZEMCP_LOG_FORMAT": "yaml"}
    done = subprocess.run(
        [sys.executable, "-m", "zemcp", "run", "wsgi.py", "--transport", "stdio"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 1 and done.stdout == b""
    assert b"log_format (ZEMCP_LOG_FORMAT) must be text or json, got 'yaml'" in done.stderr
    assert b"Traceback" not in done.stderr, done.stderr


def test_stdio_is_never_rate_limited():
    """With ZEMCP_RATE_LIMIT=1/hour (one request an hour over HTTP), a stdio server serves its
    one client every request, in both eras: stdio never reaches the rate limits."""
    for era in ("handshake", "modern"):
        pipes = Pipes(rate_limit="1/hour", rate_limit_tools="ze_execute=1/hour")
        try:
            meta = {}
            if era == "handshake":
                pipes.send(INIT)
                assert pipes.read()["result"]["serverInfo"]["name"] == "zemcp-reference"
                pipes.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            else:
                meta = {"_meta": META}
            for n in range(2, 12):
                pipes.send(
                    {
                        "jsonrpc": "2.0",
                        "id": n,
                        "method": "tools/call",
                        "params": {"name": "ze_execute", "arguments": {"command": "help"}, **meta},
                    }
                )
                reply = pipes.read()
                assert reply["id"] == n and "server status" in reply["result"]["content"][0]["text"], (era, reply)
        finally:
            pipes.stop()
