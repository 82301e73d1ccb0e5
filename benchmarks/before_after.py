"""Benchmark: this checkout's speed beside an earlier commit's, in one run.

A change to the request path must not make the plain call slower. This script checks out
``--before`` (a git commit, default ``HEAD``) into a temporary worktree and serves the
reference server (``wsgi:app``, the shipped ``gunicorn.conf.py``, telemetry off, the standard
library's codecs) from it and from this checkout side by side on free 127.0.0.1 ports. Then, in
rounds that alternate between the two:

* wrk drives a plain ``tools/call`` (``ze_execute help``) of each era (benchmarks/wrk.py's
  scripts): requests per second, and the server's CPU time per request;
* one client on ``http.client`` takes the p50 of the handshake-era elicitation round trip
  (benchmarks/calls.py's ``RoundTripClient``).

It prints each round and the medians' ratios (after / before; for CPU time and latency, lower
is better). Needs wrk and git. Usage::

    python benchmarks/before_after.py [--before 0c9297b] [--seconds 5] [--rounds 3] [--connections 16]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.calls import ROOT, free_port, start_server, stop_gunicorn
from benchmarks.speed import handshake_check, p50, round_trip_step
from benchmarks.telemetry import server_cpu
from benchmarks.wrk import modern_script, session_script, wrk_figures


def serve_from(tree: Path, port: int) -> subprocess.Popen:
    """The reference server of the checkout at ``tree`` (its zemcp imported from there) on ``port``."""
    env = {"ZEMCP_OTEL": "off", "ZEMCP_SPEED": "off", "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    return start_server(["gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"], port, tree=tree, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="HEAD", help="the commit to compare with (default %(default)s)")
    parser.add_argument("--seconds", type=int, default=5, help="seconds of each wrk run (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default %(default)s)")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections (default %(default)s)")
    args = parser.parse_args()
    figures: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    with tempfile.TemporaryDirectory(prefix="zemcp-before-") as folder:
        before = Path(folder) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), args.before], check=True)
        servers: dict[str, subprocess.Popen] = {}
        try:
            urls = {}
            for side, tree in (("before", before), ("after", ROOT)):
                port = free_port()
                servers[side] = serve_from(tree, port)
                urls[side] = f"http://127.0.0.1:{port}/mcp"
                handshake_check(urls[side])
                wrk_figures(urls[side], modern_script(), 1, args.connections, None)  # warm up
            for round_ in range(args.rounds):
                line = [f"round {round_ + 1}:"]
                for side in ("before", "after"):
                    scripts = {"2026-07-28": modern_script(), "handshake": session_script(urls[side])}
                    for era, script in scripts.items():
                        used = server_cpu(servers[side])
                        rate, count = wrk_figures(urls[side], script, args.seconds, args.connections, None)
                        cpu = (server_cpu(servers[side]) - used) / count
                        figures[side].setdefault(f"{era} plain call [req/s]", []).append(rate)
                        figures[side].setdefault(f"{era} plain call CPU [us/req]", []).append(cpu * 1e6)
                        line.append(f"{side} {era} {rate:5.0f}/s {cpu * 1e6:3.0f} us")
                    trip = p50(round_trip_step(urls[side]), 3.0)
                    figures[side].setdefault("handshake round trip p50 [ms]", []).append(trip)
                    line.append(f"{side} round trip {trip:.2f} ms")
                print("  ".join(line), flush=True)
        finally:
            for server in servers.values():
                stop_gunicorn(server)
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=False)
    print(f"\nmedians, this checkout (after) beside {args.before} (before):")
    for name, values in figures["after"].items():
        after, earlier = statistics.median(values), statistics.median(figures["before"][name])
        print(f"  {name:40s} before {earlier:9.2f}  after {after:9.2f}  after/before {after / earlier:.3f}")


if __name__ == "__main__":
    main()
