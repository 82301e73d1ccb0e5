"""Benchmark: many pending elicitations in one gunicorn worker, and what they cost.

Starts ``gunicorn -c gunicorn.conf.py wsgi:app`` on a free 127.0.0.1 port with enough threads
for ``--pending`` waiting calls by the documented formula (pending_budget = threads -
thread_reserve - listen_budget - standalone_budget, thread_reserve = threads // 4), then:

1. measures the worker's threads and resident memory (from /proc) and the latency of plain
   calls while nothing waits;
2. opens ``--pending`` eliciting ``ze_execute`` calls (spread over sessions, each on its own
   connection) and leaves them waiting for their answers;
3. measures threads, memory and plain-call latency again, and prints threads and KiB per
   pending elicitation;
4. answers every elicitation, checks that each call completes with its own answer, and stops
   the server.

Linux only (it reads /proc). Traffic goes to 127.0.0.1 only. Usage::

    python benchmarks/pending.py [--pending 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.calls import free_port, stop_gunicorn, wait_for_port
from zemcp.config import Settings

ROOT = Path(__file__).resolve().parent.parent
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
#: Pending elicitations per session (well under the per-session share at these budgets).
PER_SESSION = 20
#: [seconds] bound on each network wait.
TIMEOUT = 30
#: Plain calls per latency figure.
PLAIN_CALLS = 200


def threads_for(pending: int) -> int:
    """The smallest ``ZEMCP_THREADS`` whose derived pending budget holds ``pending``."""
    threads = 3
    while Settings(threads=threads).pending_budget < pending:
        threads += 1
    return threads


def worker_figures(pid: int) -> tuple[int, int]:
    """(threads, resident KiB) of process ``pid``."""
    threads = len(os.listdir(f"/proc/{pid}/task"))
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return threads, int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc status")


class Session:
    def __init__(self, url: str, name: str):
        self.url = url
        self.http = requests.Session()
        init = self.http.post(
            url,
            headers=HEADERS,
            timeout=TIMEOUT,
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": name, "version": "1"},
                },
            },
        )
        init.raise_for_status()
        self.headers = {**HEADERS, "Mcp-Session-Id": init.headers["Mcp-Session-Id"]}
        self.http.post(
            url, headers=self.headers, timeout=TIMEOUT, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        self.ids = iter(range(1, 1 << 30))

    def call(self, arguments: dict) -> dict:
        r = self.http.post(
            self.url,
            headers=self.headers,
            timeout=TIMEOUT,
            json={
                "jsonrpc": "2.0",
                "id": next(self.ids),
                "method": "tools/call",
                "params": {"name": "ze_execute", "arguments": arguments},
            },
        )
        r.raise_for_status()
        return r.json()

    def pid(self) -> int:
        text = self.call({"command": "server status"})["result"]["content"][0]["text"]
        return int(next(line for line in text.splitlines() if line.startswith("pid: "))[5:])


def open_eliciting(port: int, session: Session, request_id: int) -> tuple[socket.socket, str, bytes]:
    """Send an eliciting call on a raw connection; returns the socket, the elicitation id and unread bytes."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "ze_execute", "arguments": {}}}
    ).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session.headers['Mcp-Session-Id']}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    sock.sendall(head + body)
    data = b""
    while b"\ndata: " not in data or not data.split(b"\ndata: ", 1)[1].split(b"\n", 1)[1:]:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError(f"connection closed before the elicitation arrived: {data[:300]!r}")
        data += chunk
    line = data.split(b"\ndata: ", 1)[1].split(b"\n", 1)[0]
    return sock, json.loads(line)["id"], data


def read_result(sock: socket.socket, already: bytes, request_id: int) -> str:
    """Read the stream until the response to ``request_id``; returns its text."""
    data = already
    while True:
        for line in data.split(b"\n"):
            if line.startswith(b"data: "):
                message = json.loads(line[6:])
                if message.get("id") == request_id and "result" in message:
                    return message["result"]["content"][0]["text"]
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("the stream ended before the result")
        data += chunk


def plain_latency(session: Session) -> float:
    """p50 [ms] of plain tools/call round trips."""
    times = []
    for _ in range(PLAIN_CALLS):
        started = time.perf_counter()
        session.call({"command": "help"})
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


@dataclass(frozen=True)
class PendingFigures:
    """What ``pending`` waiting elicitations cost one worker."""

    pending: int
    threads: int  # ZEMCP_THREADS of the server
    threads_idle: int
    threads_busy: int
    rss_idle: int  # [KiB]
    rss_busy: int  # [KiB]
    p50_idle: float  # [ms] plain call
    p50_busy: float  # [ms]
    opened: float  # [s]
    answered: float  # [s]
    wrong: int  # calls completed with another call's answer

    @property
    def kib_each(self) -> float:
        return (self.rss_busy - self.rss_idle) / self.pending

    @property
    def threads_each(self) -> float:
        return (self.threads_busy - self.threads_idle) / self.pending


def measure(pending: int, extra_env: dict[str, str] | None = None) -> PendingFigures:
    """Serve the reference server with room for ``pending`` elicitations, hold them, answer them."""
    threads = threads_for(pending)
    port = free_port()
    env = {
        **os.environ,
        **(extra_env or {}),
        "ZEMCP_BIND": f"127.0.0.1:{port}",
        "ZEMCP_THREADS": str(threads),
        "ZEMCP_MAX_SESSIONS": str(pending // PER_SESSION + 10),
        "ZEMCP_KEEPALIVE_INTERVAL": "15",
        # One process of this script stands for every client: no fair share may hold it back.
        "ZEMCP_CLIENT_SHARE": "1",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"],
        cwd=ROOT,
        env=env,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    held: list[tuple[socket.socket, str, bytes, Session, int]] = []
    try:
        wait_for_port(port, 20, server)
        url = f"http://127.0.0.1:{port}/mcp"
        probe = Session(url, "probe")
        pid = probe.pid()
        plain_latency(probe)  # warm up
        threads_idle, rss_idle = worker_figures(pid)
        p50_idle = plain_latency(probe)
        sessions = [Session(url, f"s{n}") for n in range((pending + PER_SESSION - 1) // PER_SESSION)]
        started = time.monotonic()
        for n in range(pending):
            session = sessions[n // PER_SESSION]
            request_id = 1_000_000 + n
            sock, elicitation_id, data = open_eliciting(port, session, request_id)
            held.append((sock, elicitation_id, data, session, request_id))
        opened = time.monotonic() - started
        threads_busy, rss_busy = worker_figures(pid)
        p50_busy = plain_latency(probe)
        started = time.monotonic()
        for _sock, elicitation_id, _data, session, _request_id in held:
            answer = session.http.post(
                url,
                headers=session.headers,
                timeout=TIMEOUT,
                json={
                    "jsonrpc": "2.0",
                    "id": elicitation_id,
                    "result": {"action": "accept", "content": {"command": "session show"}},
                },
            )
            if answer.status_code != 202:
                raise RuntimeError(f"answer refused: {answer.status_code} {answer.text}")
        wrong = 0
        for index, (sock, _elicitation_id, data, _session, request_id) in enumerate(held):
            text = read_result(sock, data, request_id)
            wrong += f"client: s{index // PER_SESSION} " not in text
        answered = time.monotonic() - started
        return PendingFigures(
            len(held),
            threads,
            threads_idle,
            threads_busy,
            rss_idle,
            rss_busy,
            p50_idle,
            p50_busy,
            opened,
            answered,
            wrong,
        )
    finally:
        for sock, *_ in held:
            sock.close()
        stop_gunicorn(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, default=1000, help="pending elicitations to hold (default %(default)s)")
    args = parser.parse_args()
    f = measure(args.pending)
    print(f"pending elicitations: {f.pending} in one worker, ZEMCP_THREADS={f.threads} (pending budget by the formula)")
    print(
        f"  idle:    {f.threads_idle:5d} threads  {f.rss_idle / 1024:8.1f} MiB RSS  plain call p50 {f.p50_idle:6.2f} ms"
    )
    print(
        f"  pending: {f.threads_busy:5d} threads  {f.rss_busy / 1024:8.1f} MiB RSS  plain call p50 {f.p50_busy:6.2f} ms"
    )
    print(f"  per pending elicitation: {f.threads_each:.2f} threads, {f.kib_each:.1f} KiB")
    print(
        f"  opened in {f.opened:.1f} s, all answered and completed in {f.answered:.1f} s, "
        f"{f.wrong} completed with another call's answer"
    )


if __name__ == "__main__":
    main()
