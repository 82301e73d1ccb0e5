"""Benchmark: tools/call throughput of the reference server under gunicorn, on loopback.

Starts ``gunicorn -c gunicorn.conf.py wsgi:app`` on a free 127.0.0.1 port, then for a fixed
time per figure runs, from several client threads (one client each, on kept-alive
connections):

* handshake-era plain calls: ``ze_execute`` with a command in a session (the
  ``application/json`` hot path);
* handshake-era eliciting calls: ``ze_execute`` without a command, answered from a second
  connection (the in-place SSE upgrade and the correlation table);
* 2026-07-28 plain calls: ``ze_execute`` with a command and the per-request ``_meta``
  envelope and headers, no session;
* 2026-07-28 eliciting calls: ``ze_execute`` without a command, two rounds: the first ends
  ``input_required`` with a sealed ``requestState``, the retry carries the answer in
  ``inputResponses`` and the server replays the handler (one figure = both requests);
* the canned-JSON ceiling: the same gunicorn configuration serving an app that reads the
  body and returns fixed bytes, i.e. what HTTP, gunicorn and this client cost without MCP;
* the elicitation round trip with one client, of zemcp and of the official MCP Python SDK's
  server (benchmarks/sdk_server.py under uvicorn) with the same client (the standard
  library's http.client, so that the client's own work hides little) and tool shape.

Prints requests per second and latency percentiles for each, then the ratios, and stops
the servers. Figures depend on the machine; compare runs on the same one. Usage::

    python benchmarks/calls.py [--seconds 5] [--clients 8]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import requests

ROOT = Path(__file__).resolve().parent.parent
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
MODERN = "2026-07-28"
#: [seconds] bound on one HTTP request of the benchmark.
REQUEST_TIMEOUT = 10
#: [seconds] bound on a server's start and stop.
START_TIMEOUT = 20
STOP_TIMEOUT = 15


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, seconds: float, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and server.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"gunicorn did not listen on 127.0.0.1:{port} within {seconds} s (exit code {server.poll()})")


# -- the canned-JSON ceiling (served by gunicorn as ``benchmarks.calls:canned_app``) --------

CANNED_BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "content": [
                {
                    "type": "text",
                    "text": "help  list the commands\nserver status  version, pid, uptime\n"
                    "session show  this session\nsession list  your sessions (ids as fingerprints)",
                }
            ],
            "isError": False,
        },
    }
).encode()
CANNED_HEADERS = [
    ("Content-Type", "application/json"),
    ("Content-Length", str(len(CANNED_BODY))),
    ("Mcp-Session-Id", "canned"),
]


def canned_app(environ, start_response):
    """WSGI app: read the request body, answer the same fixed tools/call result every time."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length:
        environ["wsgi.input"].read(length)
    start_response("200 OK", CANNED_HEADERS)
    return [CANNED_BODY]


# -- clients ------------------------------------------------------------------------------


class Client:
    """One handshake-era session: a connection for calls and another for elicitation answers."""

    def __init__(self, url: str):
        self.url = url
        self.calls = requests.Session()
        self.answers = requests.Session()
        self.next_id = 0
        r = self.post(
            self.calls,
            {
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "bench", "version": "1"},
                },
            },
        )
        self.headers = {**HEADERS, "Mcp-Session-Id": r.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-06-18"}

    def post(self, session: requests.Session, message: dict, **kw) -> requests.Response:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, **message}
        return session.post(
            self.url, data=json.dumps(body), headers=getattr(self, "headers", HEADERS), timeout=REQUEST_TIMEOUT, **kw
        )

    def plain(self) -> None:
        r = self.post(
            self.calls, {"method": "tools/call", "params": {"name": "ze_execute", "arguments": {"command": "help"}}}
        )
        assert r.status_code == 200 and r.json()["result"]["isError"] is False, r.text

    def eliciting(self) -> None:
        r = self.post(
            self.calls, {"method": "tools/call", "params": {"name": "ze_execute", "arguments": {}}}, stream=True
        )
        lines = r.iter_lines()
        for line in lines:
            if line.startswith(b"data: "):
                ask = json.loads(line[6:])
                break
        answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"command": "help"}}}
        a = self.answers.post(self.url, data=json.dumps(answer), headers=self.headers, timeout=REQUEST_TIMEOUT)
        assert a.status_code == 202, a.text
        for line in lines:
            if line.startswith(b"data: "):
                assert json.loads(line[6:])["result"]["isError"] is False
        r.close()


class ModernClient:
    """A 2026-07-28 client: no session, the envelope in every request's ``_meta``, one kept-alive connection."""

    HEADERS = {**HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "ze_execute"}
    META = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    }

    def __init__(self, url: str):
        self.url = url
        self.http = requests.Session()
        self.next_id = 0

    def call(self, params: dict) -> dict:
        self.next_id += 1
        body = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "tools/call",
            "params": {"name": "ze_execute", **params, "_meta": self.META},
        }
        r = self.http.post(self.url, data=json.dumps(body), headers=self.HEADERS, timeout=REQUEST_TIMEOUT)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json"), r.text
        return r.json()["result"]

    def plain(self) -> None:
        result = self.call({"arguments": {"command": "help"}})
        assert result["resultType"] == "complete" and result["isError"] is False, result

    def eliciting(self) -> None:
        first = self.call({"arguments": {}})
        assert first["resultType"] == "input_required", first
        result = self.call(
            {
                "arguments": {},
                "requestState": first["requestState"],
                "inputResponses": {
                    key: {"action": "accept", "content": {"command": "help"}} for key in first["inputRequests"]
                },
            }
        )
        assert result["resultType"] == "complete" and result["isError"] is False, result


class RoundTripClient:
    """One handshake-era session over the standard library's http.client, for the round trip.

    ``requests`` spends about as long per request as either server does, which hides the
    servers' difference; this client does little more than write and read the bytes.
    """

    def __init__(self, url: str):
        parts = urlsplit(url)
        self.path = parts.path
        self.calls = http.client.HTTPConnection(parts.hostname, parts.port, timeout=REQUEST_TIMEOUT)
        self.answers = http.client.HTTPConnection(parts.hostname, parts.port, timeout=REQUEST_TIMEOUT)
        self.next_id = 0
        r = self.post(
            self.calls,
            {
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "bench", "version": "1"},
                },
            },
            HEADERS,
        )
        r.read()
        self.headers = {
            **HEADERS,
            "Mcp-Session-Id": r.getheader("Mcp-Session-Id"),
            "MCP-Protocol-Version": "2025-06-18",
        }
        self.post(self.calls, {"method": "notifications/initialized"}, self.headers, with_id=False).read()

    def post(
        self, connection: http.client.HTTPConnection, message: dict, headers: dict, with_id: bool = True
    ) -> http.client.HTTPResponse:
        body = {"jsonrpc": "2.0", **message}
        if with_id:
            self.next_id += 1
            body["id"] = self.next_id
        connection.request("POST", self.path, json.dumps(body), headers)
        return connection.getresponse()

    def eliciting(self) -> None:
        r = self.post(
            self.calls, {"method": "tools/call", "params": {"name": "ze_execute", "arguments": {}}}, self.headers
        )
        ask = _next_event(r)
        answer = {"id": ask["id"], "result": {"action": "accept", "content": {"command": "help"}}}
        a = self.post(self.answers, answer, self.headers, with_id=False)
        a.read()
        assert a.status == 202, a.status
        assert _next_event(r)["result"]["isError"] is False
        r.read()


def _next_event(response: http.client.HTTPResponse) -> dict:
    """The message of the next SSE ``data:`` line of ``response``."""
    while True:
        line = response.readline()
        if not line:
            raise RuntimeError("the stream ended before the next event")
        if line.startswith(b"data: "):
            return json.loads(line[6:])


# -- measuring ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    label: str
    rate: float  # calls per second
    p50: float  # seconds
    p99: float
    calls: int


def run(label: str, make: Callable[[], Callable[[], None]], clients: int, seconds: float) -> Figure:
    """Run ``make()`` 's step in a loop from ``clients`` threads for ``seconds``; print and return the figure."""
    latencies: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker() -> None:
        mine = []
        try:
            step = make()
            while time.monotonic() < stop:
                started = time.perf_counter()
                step()
                mine.append(time.perf_counter() - started)
        except BaseException as exc:  # reported below; a failed figure must not look fast
            with lock:
                errors.append(exc)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        # Each step is bounded by REQUEST_TIMEOUT per request, so this always ends.
        t.join(seconds + 4 * REQUEST_TIMEOUT)
    elapsed = time.monotonic() - began
    if errors or len(latencies) < 2:
        raise RuntimeError(f"{label}: {len(errors)} client(s) failed, first: {errors[:1]!r}")
    q = statistics.quantiles(latencies, n=100)
    figure = Figure(label, len(latencies) / elapsed, q[49], q[98], len(latencies))
    print(
        f"{label:>34}: {figure.rate:8.0f} calls/s  p50 {figure.p50 * 1000:6.2f} ms  p99 {figure.p99 * 1000:6.2f} ms"
        f"  ({figure.calls} calls, {clients} clients)",
        flush=True,
    )
    return figure


def start_server(
    argv: list[str], port: int, python: str = sys.executable, tree: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """Run ``python -m <argv>`` from the checkout at ``tree`` (the repository by default) in its
    own process group, with ``env`` over this environment; returns once it listens on ``port``."""
    env = {**os.environ, **(env or {}), "ZEMCP_BIND": f"127.0.0.1:{port}"}
    server = subprocess.Popen(
        [python, "-m", *argv], cwd=tree, env=env, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        wait_for_port(port, START_TIMEOUT, server)
    except BaseException:
        stop_gunicorn(server)
        raise
    return server


def start_gunicorn(app: str, port: int) -> subprocess.Popen:
    """``app`` under gunicorn with the repository's gunicorn.conf.py on ``port``."""
    return start_server(["gunicorn", "-c", "gunicorn.conf.py", app], port)


def start_sdk_server(port: int) -> subprocess.Popen:
    """The official SDK's server of benchmarks/sdk_server.py under uvicorn, on ``port``."""
    return start_server(
        ["uvicorn", "benchmarks.sdk_server:app", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        port,
    )


def stop_gunicorn(server: subprocess.Popen) -> None:
    """SIGTERM the master, then SIGKILL whatever is left of its process group."""
    server.terminate()
    try:
        server.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each measurement [s]")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    args = parser.parse_args()
    reference_port, canned_port, sdk_port = free_port(), free_port(), free_port()
    servers = []
    try:
        servers.append(start_gunicorn("wsgi:app", reference_port))
        servers.append(start_gunicorn("benchmarks.calls:canned_app", canned_port))
        servers.append(start_sdk_server(sdk_port))
        url = f"http://127.0.0.1:{reference_port}/mcp"
        canned_url = f"http://127.0.0.1:{canned_port}/mcp"
        sdk_url = f"http://127.0.0.1:{sdk_port}/mcp"
        print(f"{args.clients} clients, {args.seconds:g} s per figure, one gunicorn worker per server", flush=True)
        ceiling = run("canned-JSON ceiling", lambda: Client(canned_url).plain, args.clients, args.seconds)
        plain = run("handshake plain tools/call", lambda: Client(url).plain, args.clients, args.seconds)
        eliciting = run("handshake eliciting tools/call", lambda: Client(url).eliciting, args.clients, args.seconds)
        modern_plain = run("2026-07-28 plain tools/call", lambda: ModernClient(url).plain, args.clients, args.seconds)
        modern_eliciting = run(
            "2026-07-28 eliciting (2 rounds)", lambda: ModernClient(url).eliciting, args.clients, args.seconds
        )
        round_trip = run("zemcp elicitation round trip", lambda: RoundTripClient(url).eliciting, 1, args.seconds)
        sdk_round_trip = run(
            "SDK server elicitation round trip", lambda: RoundTripClient(sdk_url).eliciting, 1, args.seconds
        )
    finally:
        for server in servers:
            stop_gunicorn(server)

    print("\nratios of calls per second:")
    rows = [
        ("2026-07-28 plain / handshake plain", modern_plain.rate / plain.rate),
        ("2026-07-28 eliciting / handshake eliciting", modern_eliciting.rate / eliciting.rate),
        ("2026-07-28 eliciting / 2026-07-28 plain", modern_eliciting.rate / modern_plain.rate),
        ("handshake eliciting / handshake plain", eliciting.rate / plain.rate),
    ]
    for figure in (plain, eliciting, modern_plain, modern_eliciting):
        rows.append((f"{figure.label} / canned-JSON ceiling", figure.rate / ceiling.rate))
    for label, ratio in rows:
        print(f"{label:>58}: {ratio:5.2f}")
    print(
        f"{'elicitation round trip p50, zemcp / official SDK server':>58}: {round_trip.p50 / sdk_round_trip.p50:5.2f}"
    )


if __name__ == "__main__":
    main()
