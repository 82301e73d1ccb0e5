"""Benchmark: what traces and metrics cost a plain tools/call, side by side in one run.

Starts, under the repository's gunicorn configuration on free 127.0.0.1 ports, the reference
server four times: with telemetry off (``ZEMCP_OTEL=off``, no metrics path); with traces and
metrics on (benchmarks/otel_app.py: an OpenTelemetry SDK recording every span and metric and
exporting them nowhere); with Prometheus at ``/metrics`` on top; and with the SDK sampling
one trace in ten (``OTEL_TRACES_SAMPLER=parentbased_traceidratio``, the way deployments
commonly run it). Beside them, the floor: the canned-JSON app without and with one SDK span
per request (benchmarks/span_floor_app.py), what the SDK costs whatever records the span.
Drives them with wrk (Debian: ``apt-get install wrk``), alternating rounds (handshake-era
plain calls of ``ze_execute`` with a command, in a session; a canned POST for the floor),
the servers on CPU 0 and wrk on CPU 1 when ``taskset`` and two CPUs are there
(``--mode unpinned``: every process on every core). Prints every round, the medians, the
ratio beside the target (traces and metrics on within 1.15x of off: off's rate / on's rate
<= 1.15), and how many microseconds a call each costs, the SDK's floor apart from zemcp's
own work; then stops them all. Compare the ratios of one run, not absolute figures across
runs.
Usage::

    python benchmarks/telemetry.py [--seconds 5] [--rounds 5] [--connections 16] [--mode pinned|unpinned]
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
from benchmarks.wrk import modern_script, run_wrk, session_script, wrk_figures

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
        done = subprocess.run(["taskset", "-a", "-p", "-c", cpu, child], capture_output=True)
        # A child that exited meanwhile (a short-lived helper of the master) needs no pinning.
        if done.returncode != 0 and Path(f"/proc/{child}").exists():
            raise RuntimeError(f"taskset could not pin process {child}: {done.stderr!r}")


def server_cpu(master: subprocess.Popen) -> float:
    """[seconds] the CPU time a gunicorn master and its workers used so far (user and system)."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = [str(master.pid), *Path(f"/proc/{master.pid}/task/{master.pid}/children").read_text().split()]
    total = 0
    for pid in pids:
        # Fields 14 and 15 of /proc/<pid>/stat, after the parenthesised command name.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / tick


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=5, help="length of one round [s]")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per server, alternating")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument(
        "--mode",
        choices=("pinned", "unpinned"),
        default="pinned",
        help="servers on CPU 0 and wrk on CPU 1, or every process on every core",
    )
    options = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian: apt-get install wrk)")
    pinned = options.mode == "pinned" and shutil.which("taskset") is not None and len(os.sched_getaffinity(0)) >= 2
    servers: dict[str, tuple[subprocess.Popen, int]] = {}
    try:
        for label, app, variables in (
            ("off", "wsgi:app", {"ZEMCP_OTEL": "off", "ZEMCP_METRICS_PATH": ""}),
            ("on", "benchmarks.otel_app:app", {"ZEMCP_OTEL": "auto", "ZEMCP_METRICS_PATH": ""}),
            ("on + Prometheus", "benchmarks.otel_app:app", {"ZEMCP_OTEL": "auto", "ZEMCP_METRICS_PATH": "/metrics"}),
            (
                "on, 10% sampled",
                "benchmarks.otel_app:app",
                {
                    "ZEMCP_OTEL": "auto",
                    "ZEMCP_METRICS_PATH": "",
                    "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                    "OTEL_TRACES_SAMPLER_ARG": "0.1",
                },
            ),
            ("canned", "benchmarks.calls:canned_app", {}),
            ("canned + 1 span", "benchmarks.span_floor_app:app", {}),
        ):
            with environment(**variables):
                port = free_port()
                servers[label] = (start_gunicorn(app, port), port)
        if pinned:
            for process, _ in servers.values():
                pin(process, "0")
        wrk_cpu = "1" if pinned else None
        print(
            f"wrk, 2 threads, {options.connections} connections, {options.seconds} s a round, one gunicorn worker "
            f"each, {'servers on CPU 0 and wrk on CPU 1' if pinned else 'unpinned'}"
        )
        urls = {label: f"http://127.0.0.1:{port}/mcp" for label, (_, port) in servers.items()}
        session = {label: session_script(urls[label]) for label in urls if not label.startswith("canned")}
        scripts = {**session, "canned": modern_script(), "canned + 1 span": modern_script()}
        for label, url in urls.items():
            run_wrk(url, scripts[label], 1, options.connections, wrk_cpu)  # warm up
        rates: dict[str, list[float]] = {label: [] for label in servers}
        cpu: dict[str, list[float]] = {label: [] for label in servers}
        for n in range(options.rounds):
            for label, url in urls.items():
                before = server_cpu(servers[label][0])
                rate, requests = wrk_figures(url, scripts[label], options.seconds, options.connections, wrk_cpu)
                used = (server_cpu(servers[label][0]) - before) / requests * 1e6
                rates[label].append(rate)
                cpu[label].append(used)
                print(
                    f"round {n + 1}, {label:>15}: {rate:8.0f} requests/s, {used:6.0f} us of server CPU each", flush=True
                )
        median = {label: statistics.median(values) for label, values in rates.items()}
        cpu_median = {label: statistics.median(values) for label, values in cpu.items()}

        def cost(label: str, base: str) -> float:
            """[microseconds] what a request of ``label`` costs beyond one of ``base``."""
            return (1 / median[label] - 1 / median[base]) * 1e6

        ratio = median["off"] / median["on"]
        floor = cost("canned + 1 span", "canned")
        print(
            f"\nmedians of {options.rounds} rounds, requests/s: " + ", ".join(f"{k} {v:.0f}" for k, v in median.items())
        )
        verdict = "within" if ratio <= TARGET else "OVER"
        print(f"traces and metrics on, beside off: {ratio:.3f}x (target <= {TARGET}x): {verdict} target")
        print(f"  with Prometheus too: {median['off'] / median['on + Prometheus']:.3f}x")
        print(
            f"per call: traces and metrics {cost('on', 'off'):.0f} us, of which one bare SDK span {floor:.0f} us "
            f"(alone, {(1 / median['off'] * 1e6 + floor) / (1 / median['off'] * 1e6):.3f}x a plain call); "
            f"Prometheus {cost('on + Prometheus', 'on'):.0f} us more"
        )
        print(f"traces sampled at 10% (metrics of every call): {median['off'] / median['on, 10% sampled']:.3f}x")
        # Server CPU per request moves less between rounds than rates do: the same question, asked so.
        print(
            "server CPU per request, us: "
            + ", ".join(f"{k} {v:.0f}" for k, v in cpu_median.items())
            + f"\n  traces and metrics on, beside off: {cpu_median['on'] / cpu_median['off']:.3f}x; "
            f"with Prometheus {cpu_median['on + Prometheus'] / cpu_median['off']:.3f}x; "
            f"10% sampled {cpu_median['on, 10% sampled'] / cpu_median['off']:.3f}x; "
            f"one bare SDK span {cpu_median['canned + 1 span'] - cpu_median['canned']:.0f} us"
        )
    finally:
        for process, _ in servers.values():
            stop_gunicorn(process)


if __name__ == "__main__":
    main()
