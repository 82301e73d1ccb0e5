"""Benchmark: handshake-era calls with the in-process state and with the state in Redis.

Starts, on free 127.0.0.1 ports, the reference server (``gunicorn -c gunicorn.conf.py
wsgi:app``) three times at once, and a ``redis-server`` (``--save '' --appendonly no``):

* **in-process**: the default state, one worker (a session lives in its process);
* **Redis, one worker**: ``ZEMCP_REDIS_URL`` set, the same CPU as in-process;
* **Redis, several workers** (``--workers``, 2): any worker serves any request of a session.

Then, in ``--rounds`` rounds that alternate between the servers (so that a slower stretch of
the machine falls on both sides), it measures:

a. plain ``tools/call`` (``ze_execute`` with ``help``, the application/json path) from
   ``--clients`` threads, each with a session of its own and its calls on one kept-alive
   connection: in-process against Redis with one worker;
b. the elicitation round trip of one client: ``ze_execute`` without a command on a new
   connection (the kernel hands it to any worker), its ``elicitation/create`` read from the
   call's event stream, the answer POSTed on a kept-alive connection, the result read:
   in-process against Redis with several workers, counting only the round trips whose answer
   another worker served than the call (gunicorn's access log, on for every server, names the
   worker of each request).

It prints every figure, then the medians' ratios of Redis to in-process beside the targets:
a plain call's p50 within 1.3x (and its throughput at least 1/1.3), the round trip's p50
within 1.5x. The Redis runs need the Redis state backend, the ``redis`` package (``pip
install '.[redis]'`` in the checkout) and ``redis-server`` (Debian: ``apt-get install redis-server``);
without one of them the script says which and measures in-process only. Every process it
starts is stopped at the end, also on failure. Figures depend on the machine; compare runs
on the same one. Usage::

    python benchmarks/redis_state.py [--seconds 3] [--rounds 3] [--clients 8] [--workers 2]
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.calls import (  # noqa: E402 (needs ROOT on sys.path)
    HEADERS,
    REQUEST_TIMEOUT,
    START_TIMEOUT,
    Figure,
    _next_event,
    free_port,
    run,
    stop_gunicorn,
    wait_for_port,
)

HOST = "127.0.0.1"
PROTOCOL_VERSION = "2025-06-18"
#: Targets: Redis figure / in-process figure, at most.
PLAIN_TARGET = 1.3
ROUND_TRIP_TARGET = 1.5
#: Request header naming a request of the round trip in the access log (ignored by the server).
TAG_HEADER = "X-Bench-Tag"
#: gunicorn access log line: the worker's pid and the request's tag ("-" without one).
ACCESS_FORMAT = f"bench pid=%(p)s tag=%({{{TAG_HEADER.lower()}}}i)s"
ACCESS_LINE = re.compile(r"^bench pid=<?(\d+)>? tag=(\S+)$", re.M)
#: [seconds] how long the access log may take to show the round trip's last requests.
LOG_SETTLE = 5.0
#: Unmeasured plain calls and round trips before each run's figures (imports, caches,
#: connection pools; round trips on new connections reach several workers).
WARM_UP_CALLS = 200
WARM_UP_ROUND_TRIPS = 50


# -- the client ---------------------------------------------------------------------------


class Session:
    """One handshake-era session over the standard library's http.client.

    ``initialize`` and ``notifications/initialized`` travel on a connection of their own;
    plain calls share one kept-alive connection, and each request of a round trip opens a new
    one and asks the server to close it (``Connection: close``).
    """

    def __init__(self, url: str):
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname, parts.port, parts.path
        self.next_id = 0
        setup = self.connect()
        r = self.send(
            setup,
            {
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "bench-redis-state", "version": "1"},
                },
            },
            HEADERS,
        )
        r.read()
        if r.status != 200:
            raise RuntimeError(f"initialize answered {r.status}")
        self.headers = {
            **HEADERS,
            "Mcp-Session-Id": r.getheader("Mcp-Session-Id"),
            "MCP-Protocol-Version": PROTOCOL_VERSION,
        }
        note = self.send(setup, {"method": "notifications/initialized"}, self.headers, with_id=False)
        note.read()
        setup.close()
        self.kept = self.connect()

    def connect(self) -> http.client.HTTPConnection:
        """A new connection to the server (it dials on the first request)."""
        return http.client.HTTPConnection(self.host, self.port, timeout=REQUEST_TIMEOUT)

    def send(
        self, connection: http.client.HTTPConnection, message: dict, headers: dict, with_id: bool = True
    ) -> http.client.HTTPResponse:
        """POST ``message`` (with a fresh id unless ``with_id`` is False); returns the response unread."""
        body = {"jsonrpc": "2.0", **message}
        if with_id:
            self.next_id += 1
            body["id"] = self.next_id
        connection.request("POST", self.path, json.dumps(body), headers)
        return connection.getresponse()

    def plain(self) -> None:
        """One ``ze_execute help`` on the kept connection that must answer a successful JSON result."""
        r = self.send(
            self.kept,
            {"method": "tools/call", "params": {"name": "ze_execute", "arguments": {"command": "help"}}},
            self.headers,
        )
        body = r.read()
        if r.status != 200 or json.loads(body)["result"]["isError"] is not False:
            raise RuntimeError(f"plain call answered {r.status}: {body[:200]!r}")

    def round_trip(self, tag: str) -> None:
        """One eliciting ``ze_execute`` on a new connection (so the kernel hands it to any
        worker), its question read, the answer POSTed on the kept-alive connection (always
        the same worker), the result read. The call and its answer carry ``<tag>-call`` and
        ``<tag>-answer`` in :data:`TAG_HEADER`."""
        headers = {**self.headers, "Connection": "close"}
        calls = self.connect()
        r = self.send(
            calls,
            {"method": "tools/call", "params": {"name": "ze_execute", "arguments": {}}},
            {**headers, TAG_HEADER: f"{tag}-call"},
        )
        ask = _next_event(r)
        answer = {"id": ask["id"], "result": {"action": "accept", "content": {"command": "help"}}}
        a = self.send(self.kept, answer, {**self.headers, TAG_HEADER: f"{tag}-answer"}, with_id=False)
        a.read()
        if a.status != 202:
            raise RuntimeError(f"the elicitation answer got {a.status}")
        if _next_event(r)["result"]["isError"] is not False:
            raise RuntimeError("the eliciting call did not succeed")
        r.read()
        calls.close()


def round_trips(url: str, seconds: float) -> dict[str, float]:
    """Round trips of one session for ``seconds``: each one's latency [seconds] by its tag."""
    session = Session(url)
    latencies: dict[str, float] = {}
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        tag = f"rt{len(latencies) + 1}"
        started = time.perf_counter()
        session.round_trip(tag)
        latencies[tag] = time.perf_counter() - started
    session.kept.close()
    return latencies


# -- processes ------------------------------------------------------------------------------


def redis_unavailable() -> str | None:
    """Why the Redis run cannot happen here, or None when it can."""
    if importlib.util.find_spec("zemcp.state.redis") is None:
        return "the Redis state backend (zemcp.state.redis) is not in this zemcp"
    import zemcp.state

    if "redis" not in zemcp.state.BACKENDS:
        return "zemcp.state.BACKENDS names no 'redis' backend yet (ZEMCP_REDIS_URL would stop gunicorn at start-up)"
    if importlib.util.find_spec("redis") is None:
        return "the redis package is not installed (pip install '.[redis]')"
    if redis_binary() is None:
        return "redis-server is not installed (Debian: apt-get install redis-server)"
    return None


def redis_binary() -> str | None:
    """The path of ``redis-server``, also looked for in the sbin directories."""
    return shutil.which("redis-server") or shutil.which("redis-server", path="/usr/sbin:/usr/bin:/sbin")


def start_redis(port: int, workdir: Path) -> subprocess.Popen:
    """``redis-server`` on 127.0.0.1:``port`` without persistence, in its own process group; returns once it answers PING."""
    server = subprocess.Popen(
        [
            redis_binary(),
            "--port",
            str(port),
            "--bind",
            HOST,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with socket.create_connection((HOST, port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    return server
        except OSError:
            pass
        time.sleep(0.05)
    stop_gunicorn(server)
    raise RuntimeError(f"redis-server did not answer on {HOST}:{port} within {START_TIMEOUT} s")


@dataclass
class Server:
    """A running reference server: its process, its endpoint and its access log file."""

    process: subprocess.Popen
    url: str
    access_log: Path


def start_reference(port: int, workers: int, redis_url: str, workdir: Path) -> Server:
    """The reference server on ``port`` with ``workers`` workers, with Redis when ``redis_url`` is set.

    The access log (:data:`ACCESS_FORMAT`) goes to ``workdir/access-<port>.log``, everything
    else gunicorn writes to ``workdir/gunicorn-<port>.log``.
    """
    access_log = workdir / f"access-{port}.log"
    # Only what this run sets decides the state backend and the workers.
    env = {k: v for k, v in os.environ.items() if k not in ("ZEMCP_REDIS_URL", "ZEMCP_STATE_BACKEND")}
    env.update(
        {
            "ZEMCP_BIND": f"{HOST}:{port}",
            "ZEMCP_WORKERS": str(workers),
            "ZEMCP_ACCESS_LOG": str(access_log),
        }
    )
    if redis_url:
        env["ZEMCP_REDIS_URL"] = redis_url
    with open(workdir / f"gunicorn-{port}.log", "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "gunicorn.conf.py",
                "--access-logformat",
                ACCESS_FORMAT,
                "wsgi:app",
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for_port(port, START_TIMEOUT, process)
    except BaseException:
        stop_gunicorn(process)
        raise
    return Server(process, f"http://{HOST}:{port}/mcp", access_log)


# -- measuring ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Half:
    """The figures of one side.

    Attributes:
        plain: the plain-call figure.
        round_trip: the round-trip figure.
    """

    plain: Figure
    round_trip: Figure


def answered_elsewhere(access_log: Path, tags: list[str]) -> set[str]:
    """The round trips of ``tags`` whose answer another worker served than their call, from
    the access log (waits up to :data:`LOG_SETTLE` s for all of them: a request is logged when
    its response ended)."""
    deadline = time.monotonic() + LOG_SETTLE
    while True:
        text = access_log.read_text(errors="replace") if access_log.exists() else ""
        pids = {tag: int(pid) for pid, tag in ACCESS_LINE.findall(text) if tag.startswith("rt")}
        complete = [t for t in tags if f"{t}-call" in pids and f"{t}-answer" in pids]
        if len(complete) == len(tags) or time.monotonic() > deadline:
            return {t for t in complete if pids[f"{t}-call"] != pids[f"{t}-answer"]}
        time.sleep(0.1)


def trip_figure(label: str, latencies: list[float], seconds: float) -> Figure:
    """The round-trip figure of ``latencies`` [seconds], printed as :func:`benchmarks.calls.run` prints."""
    if len(latencies) < 2:
        raise RuntimeError(f"{label}: only {len(latencies)} round trip(s) to measure")
    ordered = sorted(latencies)
    figure = Figure(
        label, len(ordered) / seconds, statistics.median(ordered), ordered[int(0.99 * (len(ordered) - 1))], len(ordered)
    )
    print(
        f"{label:>34}: {figure.rate:8.0f} calls/s  p50 {figure.p50 * 1000:6.2f} ms  "
        f"p99 {figure.p99 * 1000:6.2f} ms  ({figure.calls} round trips)",
        flush=True,
    )
    return figure


def warm_up(url: str) -> None:
    """Unmeasured calls and round trips (imports, caches, connection pools)."""
    warm = Session(url)
    for _ in range(WARM_UP_CALLS):
        warm.plain()
    for n in range(WARM_UP_ROUND_TRIPS):
        warm.round_trip(f"warm{n}")
    warm.kept.close()


def measure_plain(name: str, server: Server, args: argparse.Namespace) -> Figure:
    """One plain-call figure of ``server``."""
    return run(f"{name} plain tools/call", lambda: Session(server.url).plain, args.clients, args.seconds)


def measure_trips(name: str, server: Server, args: argparse.Namespace, elsewhere_only: bool) -> Figure:
    """One round-trip figure of ``server``: every round trip, or (``elsewhere_only``) only those
    whose answer another worker served than the one running the call."""
    latencies = round_trips(server.url, args.seconds)
    if not elsewhere_only:
        return trip_figure(f"{name} elicitation round trip", list(latencies.values()), args.seconds)
    crossed = answered_elsewhere(server.access_log, list(latencies))
    print(f"{'':>34}  {len(crossed)} of {len(latencies)} answers served by another worker than their call", flush=True)
    return trip_figure(f"{name} round trip, answer elsewhere", [latencies[t] for t in crossed], args.seconds)


def median_figure(figures: list[Figure]) -> Figure:
    """The figure whose every number is the median of the rounds' ``figures``."""
    return Figure(
        figures[0].label,
        statistics.median(f.rate for f in figures),
        statistics.median(f.p50 for f in figures),
        statistics.median(f.p99 for f in figures),
        sum(f.calls for f in figures),
    )


def verdict(ratio: float, target: float) -> str:
    """``met`` when ``ratio`` is at most ``target``, else ``missed``."""
    return "met" if ratio <= target else "missed"


def report(local: Half, shared: Half) -> None:
    """Print the ratios of the Redis run to the in-process run and the targets."""
    plain_p50 = shared.plain.p50 / local.plain.p50
    plain_rate = local.plain.rate / shared.plain.rate
    trip_p50 = shared.round_trip.p50 / local.round_trip.p50
    print("\nRedis / in-process (medians of the rounds):")
    rows = [
        ("plain tools/call p50 (one worker each)", plain_p50, PLAIN_TARGET),
        ("plain tools/call calls/s, in-process / Redis", plain_rate, PLAIN_TARGET),
        ("round trip p50 (Redis: answer on another worker)", trip_p50, ROUND_TRIP_TARGET),
    ]
    for label, ratio, target in rows:
        print(f"{label:>50}: {ratio:5.2f}  (target at most {target:.1f}: {verdict(ratio, target)})")
    print(f"{'plain tools/call p99':>50}: {shared.plain.p99 / local.plain.p99:5.2f}")
    print(f"{'round trip p99':>50}: {shared.round_trip.p99 / local.round_trip.p99:5.2f}")


def main() -> int:
    """Run both halves (or the in-process one alone) and print the figures; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each measurement [s]")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients of the plain-call figure")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers of the Redis round trips (at least 2)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every figure, alternating between the servers")
    args = parser.parse_args()
    unavailable = redis_unavailable()
    running: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="zemcp-bench-redis-") as tmp:
        workdir = Path(tmp)
        try:
            print(
                f"{args.clients} clients for plain calls, 1 for round trips, {args.rounds} rounds of {args.seconds:g} s "
                f"per figure; workers: 1 in-process, 1 and {args.workers} with Redis",
                flush=True,
            )
            local_server = start_reference(free_port(), 1, "", workdir)
            running.append(local_server.process)
            servers = [local_server]
            if unavailable is None:
                redis_port = free_port()
                redis_url = f"redis://{HOST}:{redis_port}/0"
                running.append(start_redis(redis_port, workdir))
                # The plain call with Redis on the same CPU as in-process: one worker.
                one = start_reference(free_port(), 1, redis_url, workdir)
                running.append(one.process)
                several = start_reference(free_port(), args.workers, redis_url, workdir)
                running.append(several.process)
                servers += [one, several]
            for server in servers:
                warm_up(server.url)
            figures: dict[str, list[Figure]] = {"local plain": [], "local trips": [], "plain": [], "trips": []}
            # Rounds alternate between the servers, so that a slower stretch of the machine
            # falls on both sides; the medians of the rounds are compared.
            for n in range(args.rounds):
                print(f"round {n + 1} of {args.rounds}", flush=True)
                figures["local plain"].append(measure_plain("in-process", local_server, args))
                if unavailable is None:
                    figures["plain"].append(measure_plain("Redis", one, args))
                figures["local trips"].append(measure_trips("in-process", local_server, args, False))
                if unavailable is None:
                    figures["trips"].append(measure_trips("Redis", several, args, True))
            local = Half(median_figure(figures["local plain"]), median_figure(figures["local trips"]))
            if unavailable is not None:
                print(f"\nRedis run skipped: {unavailable}.", flush=True)
                return 0
            shared = Half(median_figure(figures["plain"]), median_figure(figures["trips"]))
        except RuntimeError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            for log in sorted(workdir.glob("gunicorn-*.log")):
                print(
                    f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-20:]), file=sys.stderr
                )
            return 1
        finally:
            for process in reversed(running):
                stop_gunicorn(process)
    report(local, shared)
    return 0


if __name__ == "__main__":
    sys.exit(main())
