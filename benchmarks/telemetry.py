"""Benchmark: what traces and metrics cost a plain tools/call, side by side in one run.

Starts the reference server twice under the same gunicorn configuration on free 127.0.0.1
ports: once with telemetry off (``ZEMCP_OTEL=off``, no metrics path) and once with all of it
on (benchmarks/otel_app.py: an OpenTelemetry SDK recording every span and metric and
exporting them nowhere, plus Prometheus at ``/metrics``). Alternates rounds of handshake-era
plain calls (``ze_execute`` with a command) against each, prints both rates and the ratio
beside the target (on within 1.15x of off: off's rate / on's rate <= 1.15), then stops both.
Figures vary between runs and machines; the ratio within one run is the figure. Usage::

    python benchmarks/telemetry.py [--seconds 5] [--clients 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
from collections.abc import Iterator

from benchmarks.calls import Client, free_port, run, start_gunicorn, stop_gunicorn

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of one round [s]")
    parser.add_argument("--clients", type=int, default=8, help="client threads")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server, alternating")
    options = parser.parse_args()
    servers = {}
    try:
        off_port, on_port = free_port(), free_port()
        with environment(ZEMCP_OTEL="off", ZEMCP_METRICS_PATH=""):
            servers["off"] = (start_gunicorn("wsgi:app", off_port), off_port)
        with environment(ZEMCP_OTEL="auto", ZEMCP_METRICS_PATH="/metrics"):
            servers["on"] = (start_gunicorn("benchmarks.otel_app:app", on_port), on_port)
        rates: dict[str, list[float]] = {"off": [], "on": []}
        for n in range(options.rounds):
            for label in ("off", "on"):
                url = f"http://127.0.0.1:{servers[label][1]}/mcp"
                figure = run(
                    f"round {n + 1}, telemetry {label}",
                    lambda url=url: Client(url).plain,
                    options.clients,
                    options.seconds,
                )
                rates[label].append(figure.rate)
        off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
        ratio = off / on
        verdict = "within" if ratio <= TARGET else "OVER"
        print(f"\nplain tools/call, median of {options.rounds} rounds: off {off:.0f} calls/s, on {on:.0f} calls/s")
        print(f"cost of traces and metrics: {ratio:.3f}x (target <= {TARGET}x): {verdict} target")
    finally:
        for process, _ in servers.values():
            stop_gunicorn(process)


if __name__ == "__main__":
    main()
