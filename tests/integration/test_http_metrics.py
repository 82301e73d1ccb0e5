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

import requests

from tests.conftest import ModernClient

CALLS = 24
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


def worker_pid(url: str, n: int) -> int:
    client = ModernClient(url, name=f"metrics-{n}")
    result = client.call_result({"command": "server status"})
    return int(re.search(r"^pid: (\d+)$", result["content"][0]["text"], re.M).group(1))


def test_one_scrape_counts_the_calls_of_both_workers_and_keeps_them_past_a_restart(start_server):
    server = start_server(workers=2, metrics_path="/metrics")
    pids = [worker_pid(server.url, n) for n in range(CALLS)]
    assert len(set(pids)) == 2, f"the calls did not reach both workers: {pids}"
    assert tools_call_count(scrape(server.base)) == CALLS
    # Every scrape, whichever worker serves it, sees the same sums.
    assert {tools_call_count(scrape(server.base)) for _ in range(6)} == {CALLS}

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
    probes = tools_call_count(scrape(server.base)) - CALLS
    assert probes >= 6, probes
    assert "zemcp_calls_budget" in scrape(server.base)


def test_metrics_are_refused_to_addresses_not_allowed(start_server):
    server = start_server(metrics_path="/metrics", metrics_allow="10.0.0.0/8")
    response = requests.get(f"{server.base}/metrics", timeout=10)
    assert response.status_code == 403 and "ZEMCP_METRICS_ALLOW" in response.text
