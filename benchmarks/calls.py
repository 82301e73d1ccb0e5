"""Benchmark: tools/call throughput of the reference server under gunicorn, on loopback.

Starts ``gunicorn -c gunicorn.conf.py wsgi:app`` on a free 127.0.0.1 port, then for a fixed
time runs, from several client threads with one session each:

* plain calls: ``ze_execute`` with a command (the ``application/json`` hot path);
* eliciting calls: ``ze_execute`` without a command, answered from a second connection
  (the in-place SSE upgrade and the correlation table).

Prints requests per second and latency percentiles, then stops the server. Figures depend
on the machine; compare runs on the same one. Usage::

    python benchmarks/calls.py [--seconds 5] [--clients 8]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


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


class Client:
    """One session: a connection for calls and another for elicitation answers."""

    def __init__(self, url: str):
        self.url = url
        self.calls = requests.Session()
        self.answers = requests.Session()
        self.next_id = 0
        r = self.post(self.calls, {"method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "bench", "version": "1"}}})
        self.headers = {**HEADERS, "Mcp-Session-Id": r.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-06-18"}

    def post(self, session: requests.Session, message: dict, **kw) -> requests.Response:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, **message}
        return session.post(self.url, data=json.dumps(body), headers=getattr(self, "headers", HEADERS), timeout=10, **kw)

    def plain(self) -> None:
        r = self.post(self.calls, {"method": "tools/call", "params": {"name": "ze_execute", "arguments": {"command": "help"}}})
        assert r.status_code == 200 and r.json()["result"]["isError"] is False, r.text

    def eliciting(self) -> None:
        r = self.post(self.calls, {"method": "tools/call", "params": {"name": "ze_execute", "arguments": {}}}, stream=True)
        lines = r.iter_lines()
        for line in lines:
            if line.startswith(b"data: "):
                ask = json.loads(line[6:])
                break
        answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"command": "help"}}}
        a = self.answers.post(self.url, data=json.dumps(answer), headers=self.headers, timeout=10)
        assert a.status_code == 202, a.text
        for line in lines:
            if line.startswith(b"data: "):
                assert json.loads(line[6:])["result"]["isError"] is False
        r.close()


def run(kind: str, url: str, clients: int, seconds: float) -> None:
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker() -> None:
        client = Client(url)
        step = getattr(client, kind)
        mine = []
        while time.monotonic() < stop:
            started = time.perf_counter()
            step()
            mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    q = statistics.quantiles(latencies, n=100)
    print(f"{kind:>9} calls: {len(latencies) / elapsed:8.0f} per second  "
          f"p50 {q[49] * 1000:6.2f} ms  p99 {q[98] * 1000:6.2f} ms  ({len(latencies)} calls, {clients} clients)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each measurement [s]")
    parser.add_argument("--clients", type=int, default=8, help="concurrent client sessions")
    args = parser.parse_args()
    port = free_port()
    env = {**os.environ, "ZEMCP_BIND": f"127.0.0.1:{port}"}
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--access-logfile", os.devnull,
                               "wsgi:app"], cwd=ROOT, env=env, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port(port, 20, server)
        url = f"http://127.0.0.1:{port}/mcp"
        run("plain", url, args.clients, args.seconds)
        run("eliciting", url, args.clients, args.seconds)
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
