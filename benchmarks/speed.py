"""Benchmark: every speed and memory figure of zemcp beside its target, with and without zemcp[speed].

One run, on 127.0.0.1 only, of:

* plain ``tools/call`` throughput of the reference server (``ze_execute help``) in both eras,
  beside the canned-JSON ceiling (``benchmarks.calls:canned_app``: reads the body, answers fixed
  bytes) under the same gunicorn configuration (the shipped ``gunicorn.conf.py``, one worker
  each), driven by wrk in rounds that alternate between the servers, unpinned (wrk and the
  servers share every core) and pinned (the servers on CPU 0, wrk on CPU 1). Targets: at
  least 0.70x the ceiling with the standard library, 0.80x with ``zemcp[speed]``;
* latencies of one client on the standard library's ``http.client``: the handshake-era
  elicitation round trip (the call, the answer on a second connection, the result on the
  call's stream), the same round trip of the official MCP Python SDK's server
  (``benchmarks/sdk_server.py`` under uvicorn), and a two-round 2026-07-28 eliciting call.
  Targets: zemcp's round trip p50 at most 0.6x the SDK's; the two-round call p50 within 1.5x
  of zemcp's handshake round trip;
* memory: the resident size of an idle reference-server worker (before it serves anything) in
  fresh installs of ``.`` and ``.[speed]`` (pip, from the package index), target 40 MB at most,
  and what each of 1,000 pending elicitations adds, target 48 KiB.

zemcp runs twice side by side: with ``ZEMCP_SPEED=off`` (the standard library: json,
jsonschema) and with the extra's libraries (orjson, jsonschema-rs) when they are installed;
without them the script says so and prints the standard-library figures alone. Telemetry is
off in every zemcp server (``ZEMCP_OTEL=off``), as in a default install, which has no
OpenTelemetry (this environment has it: the official SDK depends on it).

Needs wrk (Debian: ``apt-get install wrk``), ``taskset`` for the pinned mode, and the official
SDK with uvicorn (the test extra installs ``mcp``). Usage::

    python benchmarks/speed.py [--seconds 10] [--rounds 3] [--connections 16] [--pending 1000] [--here]
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import pending as pending_bench
from benchmarks.calls import (
    HEADERS,
    MODERN,
    REQUEST_TIMEOUT,
    ROOT,
    RoundTripClient,
    _next_event,
    free_port,
    start_sdk_server,
    start_server,
    stop_gunicorn,
)
from benchmarks.telemetry import environment, server_cpu
from benchmarks.wrk import modern_script, session_script, wrk_figures

#: zemcp's two codecs: the standard library, and the extra's libraries.
CODECS = {"standard library": {"ZEMCP_SPEED": "off"}, "zemcp[speed]": {"ZEMCP_SPEED": "auto"}}
TARGETS = {
    "standard library": 0.70,
    "zemcp[speed]": 0.80,
}
ROUND_TRIP_VS_SDK = 0.6
TWO_ROUNDS_VS_ROUND_TRIP = 1.5
IDLE_WORKER_MB = 40.0
PENDING_KIB = 48.0
#: [seconds] how long each latency figure's client runs per round.
LATENCY_SECONDS = 3.0
#: [seconds] the wait after a server starts before its idle worker is measured.
SETTLE = 2.0


def speed_installed() -> bool:
    """True when the extra's libraries can be imported here (the servers share this Python)."""
    return all(importlib.util.find_spec(name) is not None for name in ("orjson", "jsonschema_rs"))


def start_zemcp(port: int, codec_env: dict[str, str], python: str = sys.executable) -> subprocess.Popen:
    """The reference server under the shipped gunicorn.conf.py with ``codec_env``, telemetry off."""
    with environment(ZEMCP_OTEL="off", **codec_env):
        return start_server(["gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"], port, python)


def workers_of(server: subprocess.Popen) -> list[int]:
    """The gunicorn master's child processes."""
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
    return [int(child) for child in children]


def pin(server: subprocess.Popen, cpu: str) -> None:
    """Move the master and its workers, every thread, to ``cpu``."""
    for pid in [server.pid, *workers_of(server)]:
        subprocess.run(["taskset", "-a", "-p", "-c", cpu, str(pid)], check=True, capture_output=True)


def rss_kib(pid: int) -> int:
    """Resident size [KiB] of process ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


# -- the clients of the latency figures ---------------------------------------------------


class ModernRoundsClient:
    """A 2026-07-28 client on ``http.client``: an eliciting call of two rounds per step."""

    REQUEST_HEADERS = {**HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "ze_execute"}
    META = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }

    def __init__(self, url: str):
        parts = urlsplit(url)
        self.path = parts.path
        self.http = http.client.HTTPConnection(parts.hostname, parts.port, timeout=REQUEST_TIMEOUT)
        self.next_id = 0

    def call(self, params: dict) -> dict:
        self.next_id += 1
        body = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "tools/call",
            "params": {"name": "ze_execute", "arguments": {}, **params, "_meta": self.META},
        }
        self.http.request("POST", self.path, json.dumps(body), self.REQUEST_HEADERS)
        response = self.http.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{response.status}: {data[:300]!r}")
        return json.loads(data)["result"]

    def eliciting(self) -> None:
        first = self.call({})
        assert first["resultType"] == "input_required", first
        answers = {key: {"action": "accept", "content": {"command": "help"}} for key in first["inputRequests"]}
        result = self.call({"requestState": first["requestState"], "inputResponses": answers})
        assert result["resultType"] == "complete" and result["isError"] is False, result


def p50(step: Callable[[], None], seconds: float) -> float:
    """The median time [ms] of ``step()`` run in a loop for ``seconds`` (after a short warm-up)."""
    for _ in range(20):
        step()
    times = []
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def round_trip_step(url: str) -> Callable[[], None]:
    return RoundTripClient(url).eliciting


def handshake_check(url: str) -> None:
    """Fail early when the server does not elicit as the figures assume."""
    client = RoundTripClient(url)
    r = client.post(
        client.calls, {"method": "tools/call", "params": {"name": "ze_execute", "arguments": {}}}, client.headers
    )
    ask = _next_event(r)
    if ask.get("method") != "elicitation/create":
        raise RuntimeError(f"expected an elicitation, got {ask}")
    answer = {"id": ask["id"], "result": {"action": "cancel"}}
    client.post(client.answers, answer, client.headers, with_id=False).read()
    r.read()


# -- the figures ------------------------------------------------------------------------


def measured(
    server: subprocess.Popen, url: str, script: str, args: argparse.Namespace, wrk_cpu: str | None
) -> tuple[float, float]:
    """One wrk run: requests per second, and the server's CPU time [s] per request (steadier than rates)."""
    used = server_cpu(server)
    rate, count = wrk_figures(url, script, args.seconds, args.connections, wrk_cpu)
    return rate, (server_cpu(server) - used) / count


def throughput(
    args: argparse.Namespace, codecs: list[str]
) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, list[float]]]]:
    """Ratios to the ceiling per CPU mode and figure, one per round: of requests per second,
    and of the servers' CPU time per request (the ceiling's over zemcp's)."""
    modes: list[tuple[str, str | None, str | None]] = [("unpinned", None, None)]
    if shutil.which("taskset") and len(os.sched_getaffinity(0)) >= 2:
        modes.append(("pinned", "0", "1"))
    else:
        print("note: taskset or a second CPU is missing: the pinned figures are left out", flush=True)
    ratios: dict[str, dict[str, list[float]]] = {}
    cpu_ratios: dict[str, dict[str, list[float]]] = {}
    for mode, servers_cpu, wrk_cpu in modes:
        canned_port = free_port()
        servers = {
            "ceiling": start_server(["gunicorn", "-c", "gunicorn.conf.py", "benchmarks.calls:canned_app"], canned_port)
        }
        urls = {"ceiling": f"http://127.0.0.1:{canned_port}/mcp"}
        try:
            for codec in codecs:
                port = free_port()
                servers[codec] = start_zemcp(port, CODECS[codec])
                urls[codec] = f"http://127.0.0.1:{port}/mcp"
            if servers_cpu is not None:
                for server in servers.values():
                    pin(server, servers_cpu)
            modern = modern_script()
            scripts = {codec: {"2026-07-28": modern, "handshake": session_script(urls[codec])} for codec in codecs}
            for url in urls.values():  # warm up
                wrk_figures(url, modern, 1, args.connections, wrk_cpu)
            by_figure = ratios.setdefault(mode, {})
            by_cpu = cpu_ratios.setdefault(mode, {})

            for round_ in range(args.rounds):
                ceiling, ceiling_cpu = measured(servers["ceiling"], urls["ceiling"], modern, args, wrk_cpu)
                line = [f"{mode} round {round_ + 1}: ceiling {ceiling:5.0f}/s {ceiling_cpu * 1e6:3.0f} us"]
                for codec in codecs:
                    for era, script in scripts[codec].items():
                        rate, cpu = measured(servers[codec], urls[codec], script, args, wrk_cpu)
                        by_figure.setdefault(f"{era} plain tools/call, {codec}", []).append(rate / ceiling)
                        by_cpu.setdefault(f"{era} plain tools/call, {codec}", []).append(ceiling_cpu / cpu)
                        line.append(f"{era}/{codec} {rate:5.0f}/s {rate / ceiling:.2f}x {cpu * 1e6:3.0f} us")
                print("  ".join(line), flush=True)
        finally:
            for server in servers.values():
                stop_gunicorn(server)
    return ratios, cpu_ratios


def latencies(args: argparse.Namespace, codecs: list[str]) -> dict[str, list[float]]:
    """p50s [ms] per figure, one per round, the servers taking turns within each round."""
    servers: dict[str, subprocess.Popen] = {}
    urls: dict[str, str] = {}
    figures: dict[str, list[float]] = {}
    try:
        for codec in codecs:
            port = free_port()
            servers[codec] = start_zemcp(port, CODECS[codec])
            urls[codec] = f"http://127.0.0.1:{port}/mcp"
            handshake_check(urls[codec])
        sdk_port = free_port()
        servers["sdk"] = start_sdk_server(sdk_port)
        sdk_url = f"http://127.0.0.1:{sdk_port}/mcp"
        for round_ in range(args.rounds):
            sdk = p50(round_trip_step(sdk_url), LATENCY_SECONDS)
            figures.setdefault("official SDK round trip", []).append(sdk)
            line = [f"latency round {round_ + 1}: SDK round trip {sdk:.2f} ms"]
            for codec in codecs:
                trip = p50(round_trip_step(urls[codec]), LATENCY_SECONDS)
                rounds = p50(ModernRoundsClient(urls[codec]).eliciting, LATENCY_SECONDS)
                figures.setdefault(f"round trip, {codec}", []).append(trip)
                figures.setdefault(f"two rounds, {codec}", []).append(rounds)
                line.append(f"{codec}: round trip {trip:.2f} ms, two rounds {rounds:.2f} ms")
            print("  ".join(line), flush=True)
    finally:
        for server in servers.values():
            stop_gunicorn(server)
    return figures


def fresh_install(folder: Path, extras: str) -> str:
    """A new virtual environment in ``folder`` with ``pip install .{extras}`` of this checkout, as a
    deployment installs it; returns its Python. (jsonschema imports every optional format library
    it finds, so a worker in a development environment is larger than a deployment's.)"""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = str(folder / "bin" / "python")
    done = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{ROOT}{extras}"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip install '.{extras}' failed:\n{done.stdout}{done.stderr}")
    return python


def idle_worker_mb(codec: str, python: str = sys.executable) -> float:
    """Resident size [MB] of a fresh reference-server worker that has served nothing."""
    port = free_port()
    server = start_zemcp(port, CODECS[codec], python)
    try:
        time.sleep(SETTLE)
        (worker,) = workers_of(server)
        return rss_kib(worker) * 1024 / 1e6
    finally:
        stop_gunicorn(server)


def idle_workers(codecs: list[str], here: bool) -> dict[str, float]:
    """The idle worker's size [MB] per codec: in fresh installs (the default install for the
    standard library, ``.[speed]`` for the extra) unless ``here``."""
    if here:
        return {codec: idle_worker_mb(codec) for codec in codecs}
    extras = {"standard library": "", "zemcp[speed]": "[speed]"}
    memory = {}
    with tempfile.TemporaryDirectory(prefix="zemcp-bench-") as folder:
        for codec in codecs:
            print(f"installing '.{extras[codec]}' into a fresh virtual environment for the idle worker", flush=True)
            python = fresh_install(Path(folder) / (extras[codec].strip("[]") or "default"), extras[codec])
            memory[codec] = idle_worker_mb(codec, python)
    return memory


def verdict(value: float, target: float, at_most: bool) -> str:
    met = value <= target if at_most else value >= target
    return "met" if met else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=10, help="seconds of each wrk run (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default %(default)s)")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections (default %(default)s)")
    parser.add_argument("--pending", type=int, default=1000, help="pending elicitations (default %(default)s)")
    parser.add_argument(
        "--here",
        action="store_true",
        help="measure the idle worker in this Python instead of in fresh installs of '.' and '.[speed]'",
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian: apt-get install wrk)")
    codecs = ["standard library"]
    if speed_installed():
        codecs.append("zemcp[speed]")
    else:
        print(
            "note: orjson or jsonschema-rs is missing (pip install '.[speed]'): the figures with the extra are left out"
        )
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; wrk 2 threads, {args.connections} connections, "
        f"{args.rounds} rounds of {args.seconds} s; one gunicorn worker per server",
        flush=True,
    )
    ratios, cpu_ratios = throughput(args, codecs)
    times = latencies(args, codecs)
    memory = idle_workers(codecs, args.here)
    pending = {codec: pending_bench.measure(args.pending, {"ZEMCP_OTEL": "off", **CODECS[codec]}) for codec in codecs}

    rows: list[tuple[str, str, str, str]] = []
    for mode, by_figure in ratios.items():
        for figure, values in by_figure.items():
            codec = figure.rsplit(", ", 1)[1]
            median = statistics.median(values)
            target = TARGETS[codec]
            rows.append(
                (
                    f"{figure} / ceiling, {mode}",
                    f"{median:.2f}x (rounds {', '.join(f'{v:.2f}' for v in values)})",
                    f">= {target:.2f}x",
                    verdict(median, target, at_most=False),
                )
            )
            cpu = statistics.median(cpu_ratios[mode][figure])
            rows.append(
                (
                    "  the same by server CPU per request (ceiling's / zemcp's)",
                    f"{cpu:.2f}x",
                    "",
                    "(for comparison)",
                )
            )
    sdk = statistics.median(times["official SDK round trip"])
    for codec in codecs:
        trip = statistics.median(times[f"round trip, {codec}"])
        rounds = statistics.median(times[f"two rounds, {codec}"])
        rows.append(
            (
                f"round trip p50 / SDK's, {codec}",
                f"{trip / sdk:.2f}x ({trip:.2f} vs {sdk:.2f} ms)",
                f"<= {ROUND_TRIP_VS_SDK}x",
                verdict(trip / sdk, ROUND_TRIP_VS_SDK, at_most=True),
            )
        )
        rows.append(
            (
                f"two-round 2026-07-28 call p50 / round trip, {codec}",
                f"{rounds / trip:.2f}x ({rounds:.2f} vs {trip:.2f} ms)",
                f"<= {TWO_ROUNDS_VS_ROUND_TRIP}x",
                verdict(rounds / trip, TWO_ROUNDS_VS_ROUND_TRIP, at_most=True),
            )
        )
        rows.append(
            (
                f"idle worker RSS, {codec}",
                f"{memory[codec]:.1f} MB",
                f"<= {IDLE_WORKER_MB:g} MB",
                verdict(memory[codec], IDLE_WORKER_MB, at_most=True),
            )
        )
        held = pending[codec]
        rows.append(
            (
                f"per pending elicitation ({held.pending} pending), {codec}",
                f"{held.kib_each:.1f} KiB, {held.threads_each:.2f} threads, {held.wrong} mixed up",
                f"<= {PENDING_KIB:g} KiB",
                verdict(held.kib_each, PENDING_KIB, at_most=True) if held.wrong == 0 else "NOT met (answers mixed up)",
            )
        )
    width = max(len(row[0]) for row in rows)
    print("\nfigure".ljust(width + 1), "value".ljust(44), "target".ljust(12), "verdict")
    for label, value, target, met in rows:
        print(label.ljust(width), value.ljust(44), target.ljust(12), met)


if __name__ == "__main__":
    main()
