"""The picture in docs/observability.md: what a dashboard of zemcp's Prometheus metrics shows.

Starts the reference server under gunicorn on a free 127.0.0.1 port with
``ZEMCP_METRICS_PATH=/metrics``, drives 40 s of scripted traffic (plain calls and eliciting
calls from a rising and falling number of clients, whose simulated users accept, decline,
cancel or take too long; tool errors, unknown tools, requests with an unknown session),
scrapes ``/metrics`` every second, stops the server and draws four panels from the scrapes:
calls per second by ``error.type``, calls per second by duration bucket, elicitation
outcomes, and the live figures beside the refusals. Needs matplotlib (``pip
install matplotlib``; only this script does). Usage::

    python benchmarks/dashboard.py [--out docs/dashboard.png] [--seconds 40]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import threading
import time
from collections import defaultdict
from pathlib import Path

import requests
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.calls import HEADERS, REQUEST_TIMEOUT, ROOT, free_port, start_gunicorn, stop_gunicorn

#: [seconds] how long an elicitation waits for its simulated user (some take longer).
ELICITATION_TIMEOUT = 2.5


class Session:
    """One handshake-era client session of the reference server."""

    def __init__(self, url: str):
        self.url = url
        self.calls = requests.Session()
        self.answers = requests.Session()
        self.ids = iter(range(1, 1_000_000))
        r = self.calls.post(
            url,
            data=json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"elicitation": {}},
                        "clientInfo": {"name": "dashboard", "version": "1"},
                    },
                }
            ),
            headers=HEADERS,
            timeout=REQUEST_TIMEOUT,
        )
        self.headers = {**HEADERS, "Mcp-Session-Id": r.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}

    def call(self, name: str, arguments: dict, **kw) -> requests.Response:
        body = {
            "jsonrpc": "2.0",
            "id": next(self.ids),
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        return self.calls.post(self.url, data=json.dumps(body), headers=self.headers, timeout=REQUEST_TIMEOUT, **kw)

    def elicit_and_answer(self, rng: random.Random) -> None:
        """An eliciting call whose user thinks, then accepts, declines or cancels (or is too slow)."""
        response = self.call("ze_execute", {}, stream=True)
        lines = response.iter_lines()
        ask = next(json.loads(line[6:]) for line in lines if line.startswith(b"data: "))
        time.sleep(rng.uniform(0.2, ELICITATION_TIMEOUT + 0.8))
        action = rng.choices(["accept", "decline", "cancel"], [7, 2, 1])[0]
        result = {"action": action, **({"content": {"command": "help"}} if action == "accept" else {})}
        self.answers.post(
            self.url,
            data=json.dumps({"jsonrpc": "2.0", "id": ask["id"], "result": result}),
            headers=self.headers,
            timeout=REQUEST_TIMEOUT,
        )
        for _ in lines:
            pass
        response.close()


def busy(second: float, length: float, shape: tuple[int, int, int, int]) -> int:
    """How many clients of a kind are busy ``second`` s into a run of ``length`` s: ``shape``
    gives the number in each of four phases (a rise, a peak, a fall, the tail)."""
    share = second / length
    return shape[0] if share < 0.2 else shape[1] if share < 0.55 else shape[2] if share < 0.8 else shape[3]


#: Clients making plain calls, and users answering elicitations, in each phase.
PLAIN = (1, 6, 3, 1)
ELICITING = (2, 8, 4, 1)


def drive(url: str, length: float, stop: threading.Event) -> None:
    """The scripted traffic, on threads that end when ``stop`` is set."""
    started = time.monotonic()

    def now() -> float:
        return time.monotonic() - started

    def plain(n: int) -> None:
        session = Session(url)
        while not stop.is_set():
            if busy(now(), length, PLAIN) > n:
                session.call("ze_execute", {"command": "help"})
            else:
                time.sleep(0.05)

    def eliciting(n: int) -> None:
        rng = random.Random(n)
        session = Session(url)
        while not stop.is_set():
            if busy(now(), length, ELICITING) > n:
                session.elicit_and_answer(rng)
            else:
                time.sleep(0.05)

    def mistakes() -> None:
        session = Session(url)
        bogus = {**session.headers, "Mcp-Session-Id": session.headers["Mcp-Session-Id"] + "x"}
        while not stop.is_set():
            session.call("ze_execute", {"command": "nonsense"})
            session.call("no_such_tool", {})
            if 0.6 * length < now() < 0.7 * length:
                for _ in range(10):
                    requests.post(url, data='{"jsonrpc": "2.0", "id": 1, "method": "ping"}', headers=bogus, timeout=5)
            time.sleep(0.5)

    def quietly(body, *args) -> None:
        try:
            body(*args)
        except requests.RequestException:
            if not stop.is_set():
                raise

    bodies = [(plain, n) for n in range(max(PLAIN))] + [(eliciting, n) for n in range(max(ELICITING))]
    for body, *args in [*bodies, (mistakes,)]:
        threading.Thread(target=quietly, args=(body, *args), daemon=True).start()


def scrape(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """One scrape: (sample name, sorted labels) -> value."""
    text = requests.get(f"{base}/metrics", timeout=5).text
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def total(samples: dict, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(
        value
        for (sample, keys), value in samples.items()
        if sample == name and all(dict(keys).get(k) == v for k, v in labels.items())
    )


def draw(scrapes: list[tuple[float, dict]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = [t for t, _ in scrapes]
    figure, axes = plt.subplots(2, 2, figsize=(13, 7.5), constrained_layout=True)
    figure.suptitle("zemcp reference server under scripted traffic: one Prometheus scrape a second", fontsize=13)
    calls = "mcp_server_operation_duration_seconds_count"

    def rate(series: list[float]) -> list[float]:
        return [0.0] + [(b - a) / (t1 - t0) for a, b, t0, t1 in zip(series, series[1:], times, times[1:])]

    panel = axes[0][0]
    for label, labels in (
        ("ok", {"error_type": ""}),
        ("tool_error (isError)", {"error_type": "tool_error"}),
        ("-32602 (unknown tool)", {"error_type": "-32602"}),
    ):
        panel.plot(
            times, rate([total(s, calls, mcp_method_name="tools/call", **labels) for _, s in scrapes]), label=label
        )
    panel.set_title("tools/call per second, by error.type")
    panel.set_ylabel("calls/s")
    panel.set_yscale("symlog", linthresh=1)
    panel.legend(loc="upper right")

    panel = axes[0][1]
    bucket = "mcp_server_operation_duration_seconds_bucket"
    ranges = (("under 10 ms", 0.0, 0.01), ("10-100 ms", 0.01, 0.1), ("0.1-1 s", 0.1, 1.0), ("1-5 s", 1.0, 5.0))
    for label, low, high in ranges:

        def within(s: dict, low: float = low, high: float = high) -> float:
            upper = total(s, bucket, mcp_method_name="tools/call", le=str(high))
            return upper - (total(s, bucket, mcp_method_name="tools/call", le=str(low)) if low else 0.0)

        panel.plot(times, rate([within(s) for _, s in scrapes]), label=label)
    panel.set_title("tools/call per second by duration (the convention's histogram buckets)")
    panel.set_ylabel("calls/s")
    panel.set_yscale("symlog", linthresh=1)
    panel.legend(loc="upper right")

    panel = axes[1][0]
    outcomes = defaultdict(list)
    for _, s in scrapes:
        for outcome in ("accept", "decline", "cancel", "timeout"):
            outcomes[outcome].append(
                total(s, "zemcp_client_requests_total", mcp_method_name="elicitation/create", zemcp_outcome=outcome)
            )
    for outcome, series in outcomes.items():
        panel.plot(times, series, label=outcome)
    panel.set_title("elicitation/create outcomes (cumulative)")
    panel.set_ylabel("elicitations")
    panel.set_xlabel("seconds")
    panel.legend(loc="upper left")

    panel = axes[1][1]
    for label, name in (
        ("running calls", "zemcp_calls_running"),
        ("pending elicitations", "zemcp_elicitations_pending"),
        ("live sessions", "zemcp_sessions_live"),
    ):
        panel.plot(times, [total(s, name) for _, s in scrapes], label=label)
    panel.plot(times, [total(s, "zemcp_calls_budget") for _, s in scrapes], "k--", linewidth=1, label="call budget")
    twin = panel.twinx()
    twin.bar(times, rate([total(s, "zemcp_refusals_total") for _, s in scrapes]), color="tab:red", alpha=0.3, width=0.8)
    twin.set_ylabel("refusals/s (bars)", color="tab:red")
    panel.set_title("live figures, and refusals before any handler ran")
    panel.set_xlabel("seconds")
    panel.legend(loc="upper left")
    figure.savefig(out, dpi=90)
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard.png")
    parser.add_argument("--seconds", type=float, default=40.0, help="length of the traffic [s]")
    options = parser.parse_args()
    port = free_port()
    os.environ.update(
        ZEMCP_METRICS_PATH="/metrics", ZEMCP_WORKERS="1", ZEMCP_ELICITATION_TIMEOUT=str(ELICITATION_TIMEOUT)
    )
    server = start_gunicorn("wsgi:app", port)
    stop = threading.Event()
    scrapes = []
    try:
        base = f"http://127.0.0.1:{port}"
        drive(f"{base}/mcp", options.seconds, stop)
        began = time.monotonic()
        while (elapsed := time.monotonic() - began) < options.seconds:
            scrapes.append((elapsed, scrape(base)))
            time.sleep(1.0)
    finally:
        stop.set()
        stop_gunicorn(server)
    draw(scrapes, options.out)


if __name__ == "__main__":
    main()
