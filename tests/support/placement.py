"""Requests placed on chosen gunicorn workers, for the tests of sessions shared through Redis.

A kept-alive connection stays with the worker that accepted it; a new one goes to the least
loaded worker (zemcp.http.workerloads), which is any of them while they are idle, so a test
opens new connections until ``server status`` (which names the worker's pid) says it reached a
worker it wants, and then keeps that connection for the requests it must place there.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from tests.support.clients import HandshakeClient, ModernClient
from tests.support.gunicorn import connection_to_a_worker
from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT
from tests.support.sse import SseStream


def redis_settings(url: str, **extra) -> dict:
    """The settings of a gunicorn of 4 workers sharing the Redis at ``url`` (``extra`` on top)."""
    return {"redis_url": url, "workers": 4, "elicitation_timeout": 30, "keepalive_interval": 0.5, **extra}


def worker_connection(client: HandshakeClient, avoid: set[int] = frozenset()) -> tuple[requests.Session, int]:
    """A new kept-alive connection to a worker whose pid is not in ``avoid``: the connection and the pid."""

    def ask_pid(http: requests.Session) -> int:
        response = http.post(
            client.url,
            json=client.call_message({"command": "server status"}),
            headers=client.headers(),
            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
        )
        if response.status_code == 503:
            return 0  # the probes of one batch took a worker's whole call budget: no worker named
        assert response.status_code == 200, (response.status_code, response.text)
        text = response.json()["result"]["content"][0]["text"]
        return int(re.search(r"^pid: (\d+)$", text, re.M).group(1))

    return connection_to_a_worker(ask_pid, set(avoid))


def start_call(client: HandshakeClient, http: requests.Session) -> tuple[dict, SseStream, dict]:
    """ze_execute {} on ``http``'s worker: the call, its stream and the elicitation/create request."""
    call = client.call_message({})
    response = http.post(
        client.url, json=call, headers=client.headers(), timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), stream=True
    )
    assert response.headers.get("Content-Type", "").startswith("text/event-stream"), response.text
    stream = SseStream.from_requests(response, http)
    stream.read_priming()
    ask = stream.next_message()
    assert ask is not None and ask["method"] == "elicitation/create", ask
    return call, stream, ask


def answer_on(client: HandshakeClient, http: requests.Session, request_id, command: str) -> requests.Response:
    """POST on ``http`` the answer to elicitation ``request_id`` of ze_execute: accept, with ``command``."""
    message = {"jsonrpc": "2.0", "id": request_id, "result": {"action": "accept", "content": {"command": command}}}
    return http.post(client.url, json=message, headers=client.headers(), timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))


def resume_on(
    client: HandshakeClient, http: requests.Session, last_event_id: str
) -> tuple[requests.Response, SseStream]:
    """Resume the session's stream after ``last_event_id`` with a GET on the connection
    ``http`` (its worker); it must answer 200. Returns the response and its stream."""
    return _stream_get(client, http, {"Last-Event-ID": last_event_id})


def open_standalone(client: HandshakeClient, http: requests.Session) -> SseStream:
    """The session's standalone GET stream, opened on the kept-alive connection ``http`` (its
    worker), past its priming event."""
    stream = _stream_get(client, http, {})[1]
    stream.read_priming()
    return stream


def _stream_get(client: HandshakeClient, http: requests.Session, extra: dict) -> tuple[requests.Response, SseStream]:
    response = http.get(
        client.url,
        headers={**client.headers({"Accept": "text/event-stream", "Content-Type": None}), **extra},
        timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
        stream=True,
    )
    assert response.status_code == 200, response.text
    return response, SseStream.from_requests(response, http)


#: [seconds] how long :func:`serving_workers` waits for the workers to serve.
READY_TIMEOUT = 20


def serving_workers(server: Any, count: int) -> set[int]:
    """The pids of ``count`` workers of ``server``, once each of them has served a stateless
    ``server status`` (workers boot one after another); waits up to :data:`READY_TIMEOUT` s.

    Raises:
        AssertionError: fewer than ``count`` workers served in that time."""
    probe = ModernClient(server.url, name="worker-probe")

    def pid(_: int) -> int | None:
        response, reply = probe.call({"command": "server status"})
        if response.status_code != 200:
            return None  # that worker's threads are busy with the other probes: ask again
        return int(re.search(r"^pid: (\d+)$", reply["result"]["content"][0]["text"], re.M).group(1))

    seen: set[int] = set()
    deadline = time.monotonic() + READY_TIMEOUT
    with ThreadPoolExecutor(count) as pool:
        while len(seen) < count:
            assert time.monotonic() < deadline, f"only workers {seen} served within {READY_TIMEOUT} s"
            seen |= {p for p in pool.map(pid, range(count)) if p is not None}
    return seen
