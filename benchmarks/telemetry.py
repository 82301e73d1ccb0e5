"""Benchmark: what traces and metrics cost a plain tools/call, side by side in one run.

Starts the reference server twice under the repository's gunicorn configuration on free
127.0.0.1 ports: once with telemetry off (``ZEMCP_OTEL=off``, no metrics path) and once with
all of it on (benchmarks/otel_app.py: an OpenTelemetry SDK recording every span and metric
and exporting them nowhere, plus Prometheus at ``/metrics``). Then drives both with wrk
(Debian: ``apt-get install wrk``), alternating rounds of handshake-era plain calls
(``ze_execute`` with a command, in a session) between them, the servers on CPU 0 and wrk on
CPU 1 when ``taskset`` and two CPUs are there. Prints every round, the medians and the
ratio beside the target (telemetry on within 1.15x of off: off's rate / on's rate <= 1.15),
then stops both. Compare the ratio of one run, not absolute figures across runs. Usage::

    python benchmarks/telemetry.py [--seconds 5] [--rounds 5] [--connections 16]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.calls import free_port, start_gunicorn, stop_gunicorn
from benchmarks.wrk import run_wrk, session_script

#: The most traces and metrics may slow a plain call: off's rate / on's rate.
TARGET = 1.15


@contextlib.contextmanager
def environment(**variables: str) -> Iterator[None]:
    """``os.environ`` with ``variables`` for the servers started inside the block."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def pin(server: subprocess.Popen, cpu: str) -> None:
    """Put a gunicorn master and its workers on ``cpu``."""
    subprocess.run(["taskset", "-a", "-p", "-c", cpu, str(server.pid)], check=True, capture_output=True)
    for child in Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split():
        subprocess.run(["taskset", "-a", "-p", "-c", cpu, child], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=5, help="length of one round [s]")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per server, alternating")
    parser.add_argument("--connections", type=int, default=16)
    options = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian: apt-get install wrk)")
    pinned = shutil.which("taskset") is not None and len(os.sched_getaffinity(0)) >= 2
    servers: dict[str, tuple[subprocess.Popen, int]] = {}
    try:
        with environment(ZEMCP_OTEL="off", ZEMCP_METRICS_PATH=""):
            port = free_port()
            servers["off"] = (start_gunicorn("wsgi:app", port), port)
        with environment(ZEMCP_OTEL="auto", ZEMCP_METRICS_PATH="/metrics"):
            port = free_port()
            servers["on"] = (start_gunicorn("benchmarks.otel_app:app", port), port)
        if pinned:
            for process, _ in servers.values():
                pin(process, "0")
        wrk_cpu = "1" if pinned else None
        print(
            f"wrk, 2 threads, {options.connections} connections, {options.seconds} s a round, one gunicorn worker "
            f"each, {'servers on CPU 0 and wrk on CPU 1' if pinned else 'unpinned'}"
        )
        scripts = {label: session_script(f"http://127.0.0.1:{port}/mcp") for label, (_, port) in servers.items()}
        for label, (_, port) in servers.items():
            run_wrk(f"http://127.0.0.1:{port}/mcp", scripts[label], 1, options.connections, wrk_cpu)  # warm up
        rates: dict[str, list[float]] = {"off": [], "on": []}
        for n in range(options.rounds):
            for label, (_, port) in servers.items():
                rate = run_wrk(
                    f"http://127.0.0.1:{port}/mcp", scripts[label], options.seconds, options.connections, wrk_cpu
                )
                rates[label].append(rate)
                print(f"round {n + 1}, telemetry {label:>3}: {rate:8.0f} requests/s", flush=True)
        off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
        ratio = off / on
        print(f"\nhandshake plain tools/call, median of {options.rounds} rounds: off {off:.0f}, on {on:.0f} requests/s")
        print(
            f"cost of traces and metrics: {ratio:.3f}x (target <= {TARGET}x): {'within' if ratio <= TARGET else 'OVER'} target"
        )
    finally:
        for process, _ in servers.values():
            stop_gunicorn(process)


if __name__ == "__main__":
    main()
