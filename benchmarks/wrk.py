"""Benchmark: plain tools/call throughput beside the canned-JSON ceiling, driven by wrk.

Starts two gunicorns with the repository's gunicorn.conf.py on free 127.0.0.1 ports: the
reference server (``wsgi:app``) and ``benchmarks.calls:canned_app``, which reads the body and
returns fixed bytes (what HTTP and gunicorn cost without MCP). Then runs wrk (Debian: ``apt-get
install wrk``) against each in turn, for the same time and connections, with:

* a 2026-07-28 ``tools/call`` of ``ze_execute`` (``help``): envelope, standard headers, no session;
* a handshake-era ``tools/call`` of the same, in a session created first;

and prints requests per second and the ratio to the ceiling, in two CPU modes: unpinned
(wrk and the servers share every core) and pinned (the servers on CPU 0, wrk on CPU 1, with
``taskset``). Compare ratios, not absolute figures, across machines. Usage::

    python benchmarks/wrk.py [--seconds 5] [--connections 16]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.calls import free_port, start_gunicorn, stop_gunicorn

ACCEPT = "application/json, text/event-stream"
CALL = {"name": "ze_execute", "arguments": {"command": "help"}}


def lua(body: dict, headers: dict) -> str:
    """A wrk script that POSTs ``body`` with ``headers``."""
    lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(json.dumps(body))}"]
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    return "\n".join(lines) + "\n"


def modern_script() -> str:
    params = {
        **CALL,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }
    return lua(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params},
        {
            "Content-Type": "application/json",
            "Accept": ACCEPT,
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "ze_execute",
        },
    )


def session_script(url: str) -> str:
    init = requests.post(
        url,
        timeout=10,
        headers={"Content-Type": "application/json", "Accept": ACCEPT},
        json={
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "wrk", "version": "1"},
            },
        },
    )
    init.raise_for_status()
    return lua(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": CALL},
        {"Content-Type": "application/json", "Accept": ACCEPT, "Mcp-Session-Id": init.headers["Mcp-Session-Id"]},
    )


def run_wrk(url: str, script: str, seconds: int, connections: int, cpu: str | None) -> float:
    """Requests per second of one wrk run (on ``cpu`` when given); fails when any response was not 2xx."""
    return wrk_figures(url, script, seconds, connections, cpu)[0]


def wrk_figures(url: str, script: str, seconds: int, connections: int, cpu: str | None) -> tuple[float, int]:
    """Requests per second and requests made of one wrk run, as :func:`run_wrk`."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
    try:
        pin = ["taskset", "-c", cpu] if cpu is not None else []
        out = subprocess.run(
            [*pin, "wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "-s", f.name, url],
            capture_output=True,
            text=True,
            timeout=seconds + 30,
            check=True,
        ).stdout
    finally:
        os.unlink(f.name)
    if "Non-2xx" in out:
        raise RuntimeError(f"wrk saw error responses:\n{out}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return rate, int(re.search(r"(\d+) requests in", out).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian: apt-get install wrk)")
    modes = [("unpinned", None, None)]
    if shutil.which("taskset") and len(os.sched_getaffinity(0)) >= 2:
        modes.append(("pinned: servers on CPU 0, wrk on CPU 1", "0", "1"))
    print(f"wrk, 2 threads, {args.connections} connections, {args.seconds} s per figure, one gunicorn worker each")
    for label, server_cpu, wrk_cpu in modes:
        ceiling, figures = measure(args, server_cpu, wrk_cpu)
        print(f"{label}:")
        print(f"{'canned-JSON ceiling':>30}: {ceiling:8.0f} requests/s")
        for name, rate in figures.items():
            print(f"{name:>30}: {rate:8.0f} requests/s  {rate / ceiling:.2f}x the ceiling")


def measure(args: argparse.Namespace, server_cpu: str | None, wrk_cpu: str | None) -> tuple[float, dict[str, float]]:
    """The ceiling and zemcp's figures, with the servers on ``server_cpu`` and wrk on ``wrk_cpu``."""
    zemcp_port, canned_port = free_port(), free_port()
    zemcp = start_gunicorn("wsgi:app", zemcp_port)
    try:
        canned = start_gunicorn("benchmarks.calls:canned_app", canned_port)
        try:
            if server_cpu is not None:
                for server in (zemcp, canned):
                    # The whole process group: the master and its worker.
                    subprocess.run(
                        ["taskset", "-a", "-p", "-c", server_cpu, str(server.pid)], check=True, capture_output=True
                    )
                    for child in Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split():
                        subprocess.run(
                            ["taskset", "-a", "-p", "-c", server_cpu, child], check=True, capture_output=True
                        )
            zemcp_url, canned_url = f"http://127.0.0.1:{zemcp_port}/mcp", f"http://127.0.0.1:{canned_port}/mcp"
            modern, session = modern_script(), session_script(zemcp_url)
            run_wrk(zemcp_url, modern, 1, args.connections, wrk_cpu)  # warm up both
            run_wrk(canned_url, modern, 1, args.connections, wrk_cpu)
            ceiling = run_wrk(canned_url, modern, args.seconds, args.connections, wrk_cpu)
            figures = {
                "2026-07-28 plain tools/call": run_wrk(zemcp_url, modern, args.seconds, args.connections, wrk_cpu),
                "handshake plain tools/call": run_wrk(zemcp_url, session, args.seconds, args.connections, wrk_cpu),
            }
        finally:
            stop_gunicorn(canned)
    finally:
        stop_gunicorn(zemcp)
    return ceiling, figures


if __name__ == "__main__":
    main()
