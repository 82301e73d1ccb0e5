"""Threads as a budget, over real gunicorn: the wrong worker type, bounded client input, clipped logs.

The call budget itself (503 with Retry-After once running calls hold it) is in
test_http_limits.py; streams that give their slot back within a second in
test_http_modern_streams.py.
"""

from __future__ import annotations

import re
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clients import ModernClient
from tests.support.gunicorn import GunicornServer


@pytest.fixture
def sync_server(_log_dir: Path) -> Iterator[GunicornServer]:
    """The reference server under plain gunicorn, without gunicorn.conf.py: the sync worker."""
    server = GunicornServer({}, _log_dir, config=False)
    yield server
    server.stop()


def test_a_sync_worker_refuses_to_wait_at_once_and_says_why(sync_server):
    """Under the sync worker a session's eliciting call fails at once naming the fix; plain and 2026-07-28 calls work."""
    client = sync_server.session(name="sync")
    result = client.execute("")
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "wsgi.multithread is false" in text and "gthread" in text, text
    assert "client: sync" in client.command_text("session show")
    modern = ModernClient(sync_server.url, name="modern-on-sync")
    assert "client: modern-on-sync" in modern.run_eliciting("session show")
    # Without gunicorn.conf.py nothing configures zemcp's logger: Python prints warnings bare.
    assert re.search(
        r"serves one request at a time per process \(wsgi.multithread is false\).*gthread", sync_server.log()
    ), sync_server.log()


def test_an_oversized_initialize_is_refused(server):
    """capabilities or clientInfo over ZEMCP_MAX_CLIENT_INFO_BYTES (4096) as JSON get 400 -32602 naming the setting."""
    client = server.client()
    response = client.initialize(capabilities={"experimental": {f"k{n}": [] for n in range(2000)}}, initialized=False)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == -32602 and "ZEMCP_MAX_CLIENT_INFO_BYTES" in error["message"], error
    assert "Mcp-Session-Id" not in response.headers


def test_a_long_client_name_is_clipped_in_the_log(server):
    """A 3,000-character clientInfo.name is logged as its first characters and its length, not whole."""
    client = server.client(name="N" * 3000)
    response = client.initialize(initialized=False)
    assert response.status_code == 200, response.text
    lines = [line for line in server.log().splitlines() if "initialized: client 'NNN" in line]
    assert lines, "the initialize was not logged"
    assert "N" * 200 not in lines[-1] and "(3002 characters)" in lines[-1], lines[-1]


#: Pending elicitations of the thread-count test (from as many sessions).
PENDING = 30


def worker_threads(server: GunicornServer) -> int:
    """How many threads the gunicorn worker of ``server`` runs now."""
    pid = server.session(name="probe").status()["pid"]
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counting threads reads /proc (Linux)")
def test_a_pending_elicitation_costs_one_thread(start_server):
    """30 pending elicitations add about 30 threads to the worker, not 60: the handler waits on the request's thread."""
    server = start_server(threads=64, keepalive_interval=15, elicitation_timeout=60)
    before = worker_threads(server)
    waiting = []
    for n in range(PENDING):
        client = server.session(name=f"waiter-{n}")
        waiting.append((client, *client.start_elicitation()))
    during = worker_threads(server)
    # Idle threads of the requests before (the probe's) are reused: count what runs, and what was added.
    assert during >= PENDING + 1, f"{during} threads in all with {PENDING} pending elicitations and the main thread"
    added = during - before
    assert added <= PENDING + 4, f"{added} threads added for {PENDING} pending elicitations"
    for client, call, _, stream, elicitation in waiting:
        assert client.accept(elicitation["id"], {"command": "help"}).status_code == 202
        assert stream.next_message()["id"] == call["id"]


#: Connections of the head test that send nothing, and that send half a request head.
SILENT = HALF_HEADS = 20


def test_silent_connections_and_half_heads_hold_no_thread(start_server):
    """With 4 threads, 20 silent connections and 20 half-sent heads leave requests served at once; all 40 are cut after head_timeout."""
    server = start_server(threads=4, head_timeout=1)
    attackers = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(SILENT)]
    for _ in range(HALF_HEADS):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        attackers.append(sock)
    try:
        time.sleep(0.2)
        client = ModernClient(server.url)
        for _ in range(5):
            started = time.monotonic()
            response = client.post(client.message("server/discover"), timeout=5)
            assert response.status_code == 200
            assert time.monotonic() - started < 1.0, "a request waited behind the idle connections"
        time.sleep(2.5)
        for sock in attackers:
            assert sock.recv(1) == b"", "the server kept a connection that never sent a whole head"
    finally:
        for sock in attackers:
            sock.close()


def test_a_trickling_pipelined_head_is_cut_after_head_timeout(start_server):
    """A request pipelined behind another, whose head then trickles in a byte at a time, is cut at head_timeout."""
    server = start_server(threads=4, head_timeout=1)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    try:
        first = (
            b'{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{'
            b'"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
        )
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
            b"Mcp-Method: server/discover\r\nContent-Length: "
            + str(len(first)).encode()
            + b"\r\n\r\n"
            + first
            + b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
        )
        started = time.monotonic()
        closed = False
        received = b""
        while time.monotonic() - started < 6:
            try:
                sock.sendall(b"a")
            except OSError:
                closed = True
                break
            sock.settimeout(0.3)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                closed = True
                break
            received += chunk
        assert b"200 OK" in received, received[:200]
        assert closed and time.monotonic() - started < 3, "the trickling head held its thread past head_timeout"
    finally:
        sock.close()


def test_a_pending_elicitation_keeps_a_short_keepalive_interval(start_server):
    """With ZEMCP_KEEPALIVE_INTERVAL=0.25 a waiting stream carries keep-alive comments about four times a second."""
    server = start_server(keepalive_interval=0.25, elicitation_timeout=30)
    client = server.session(name="ticks")
    call, _, stream, elicitation = client.start_elicitation()
    started = time.monotonic()
    comments = 0
    while comments < 4:
        kind, _ = stream.next_item()
        comments += kind == "comment"
    assert time.monotonic() - started < 2.0
    assert client.accept(elicitation["id"], {"command": "help"}).status_code == 202
    assert stream.next_message()["id"] == call["id"]


def test_a_quick_stop_with_pending_elicitations_ends_them_at_once(start_server):
    """SIGINT (Ctrl-C) with a pending elicitation stops the server in seconds, the call answered, no SIGKILL."""
    server = start_server(keepalive_interval=0.5, elicitation_timeout=60)
    client = server.session(name="interrupted")
    call, _, stream, _ = client.start_elicitation()
    started = time.monotonic()
    server.proc.send_signal(signal.SIGINT)
    final = stream.next_message()
    while final is not None and final.get("method") == "notifications/cancelled":
        final = stream.next_message()
    assert final is not None and final["id"] == call["id"] and "shutting down" in final["result"]["content"][0]["text"]
    server.proc.wait(15)
    assert time.monotonic() - started < 10
    assert "SIGKILL" not in server.log()


def test_a_head_over_64_kib_is_refused_at_once(start_server):
    """A request head past 64 KiB ends the connection at once (431 when the client reads it before the close)."""
    server = start_server(threads=4, head_timeout=5)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        started = time.monotonic()
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + b"".join(f"X-Big-{n}: {'b' * 8000}\r\n".encode() for n in range(9))
        )
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass  # the close may overtake the 431 when the client's bytes were left unread
        assert time.monotonic() - started < 2, "the connection was kept until the head timeout"
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer[:100]


#: Connections of the lingering test that read a ``Connection: close`` response and keep their side open.
LINGERERS = 5


def test_closing_connections_linger_without_stalling_the_worker(start_server):
    """Clients that ask for ``Connection: close`` and then keep their side open do not hold up
    other requests: the closing connections drain on the poller (gunicorn's own gthread lingers
    up to 2 s on its main thread for each), and are closed after at most 2 s."""
    server = start_server()
    body = b'{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
        f"Mcp-Method: server/discover\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    lingering = []
    try:
        client = ModernClient(server.url)
        for _ in range(LINGERERS):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(head + body)
            lingering.append(sock)
            started = time.monotonic()
            response = client.post(client.message("server/discover"), timeout=5)
            assert response.status_code == 200
            assert time.monotonic() - started < 1.0, "a request waited behind a lingering close"
        for sock in lingering:
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
            assert reply.startswith(b"HTTP/1.1 200") and b"Connection: close" in reply, reply[:200]
    finally:
        for sock in lingering:
            sock.close()
