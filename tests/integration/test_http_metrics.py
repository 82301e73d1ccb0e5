"""Prometheus metrics under gunicorn -w 2: one scrape adds up every worker, and a worker's exit loses no count.

Calls in the 2026-07-28 era (any worker serves them) on fresh connections spread over both
workers, which ``server status`` names by pid; the scrape, served by either, must count
each call once (prometheus_client's multiprocess mode, set up by zemcp's gunicorn
configuration). A worker then stops and gunicorn starts another: the counts of the one
that exited stay in the sums (the child_exit hook marks it dead, which drops only its live
gauges).
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest
import requests

from tests.support.clients import ModernClient
from zemcp import Settings
from zemcp.observe.prometheus import REFRESH_INTERVAL

CALLS = 24
THREADS = 8
#: [seconds] how long calls may take to reach both workers (the second boots after the first).
WORKERS_DEADLINE = 20.0
#: [seconds] how long gunicorn may take to replace a worker.
RESTART_TIMEOUT = 30.0


def tools_call_count(text: str) -> float:
    """The number of ze_execute calls a Prometheus text counts."""
    total = 0.0
    for row in text.splitlines():
        if (
            row.startswith("mcp_server_operation_duration_seconds_count{")
            and 'mcp_method_name="tools/call"' in row
            and 'gen_ai_tool_name="ze_execute"' in row
        ):
            total += float(row.rsplit(" ", 1)[1])
    return total


def scrape(base: str) -> str:
    response = requests.get(f"{base}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/plain")
    return response.text


def gauge_when(base: str, wanted, timeout: float = 15.0) -> float:
    """The summed ``zemcp_calls_budget`` of the first scrape where ``wanted(value)``, scraping
    for at most ``timeout`` seconds (the last value seen when none was)."""
    deadline = time.monotonic() + timeout
    value = -1.0
    while time.monotonic() < deadline:
        rows = [row for row in scrape(base).splitlines() if row.startswith("zemcp_calls_budget ")]
        value = sum(float(row.rsplit(" ", 1)[1]) for row in rows)
        if wanted(value):
            return value
        time.sleep(0.25)
    return value


def worker_pid(url: str, n: int) -> int:
    client = ModernClient(url, name=f"metrics-{n}")
    result = client.call_result({"command": "server status"})
    return int(re.search(r"^pid: (\d+)$", result["content"][0]["text"], re.M).group(1))


@pytest.mark.slow
def test_one_scrape_counts_the_calls_of_both_workers_and_keeps_them_past_a_restart(start_server):
    server = start_server(workers=2, threads=THREADS, metrics_path="/metrics")
    # The workers boot one after the other: call until both have served some calls.
    pids: list[int] = []
    deadline = time.monotonic() + WORKERS_DEADLINE
    while len(pids) < CALLS or len(set(pids)) < 2:
        assert time.monotonic() < deadline, f"{len(pids)} calls in {WORKERS_DEADLINE} s reached only {set(pids)}"
        pids.append(worker_pid(server.url, len(pids)))
        if len(pids) >= CALLS and len(set(pids)) < 2:
            time.sleep(0.1)
    calls = len(pids)
    assert tools_call_count(scrape(server.base)) == calls
    # Every scrape, whichever worker serves it, sees the same sums.
    assert {tools_call_count(scrape(server.base)) for _ in range(6)} == {calls}

    # Each worker writes its live gauges when it serves a scrape, and every few seconds: wait
    # until both have, so that the one about to stop has a gauge to lose.
    per_worker = Settings(threads=THREADS).call_budget
    assert gauge_when(server.base, lambda value: value == 2 * per_worker) == 2 * per_worker

    gone = pids[0]
    os.kill(gone, signal.SIGTERM)
    deadline = time.monotonic() + RESTART_TIMEOUT
    seen: set[int] = set()
    made = 0
    while time.monotonic() < deadline:
        seen = {worker_pid(server.url, 100 + made + n) for n in range(6)}
        made += 6
        if gone not in seen and len(seen) == 2:
            break
        time.sleep(0.2)
    assert gone not in seen and len(seen) == 2, f"worker {gone} was not replaced: {seen}"
    # The calls before the restart still count, and so do those that found the new workers.
    assert tools_call_count(scrape(server.base)) == calls + made
    # The stopped worker's gauge left the sum (child_exit marked it dead); the new one's joined,
    # once the new worker wrote it (it served calls: it writes within REFRESH_INTERVAL).
    time.sleep(REFRESH_INTERVAL + 1)
    assert gauge_when(server.base, lambda value: value == 2 * per_worker) == 2 * per_worker


def test_metrics_are_refused_to_addresses_not_allowed(start_server):
    server = start_server(metrics_path="/metrics", metrics_allow="10.0.0.0/8")
    response = requests.get(f"{server.base}/metrics", timeout=10)
    assert response.status_code == 403 and "ZEMCP_METRICS_ALLOW" in response.text
