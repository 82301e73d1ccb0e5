"""2026-07-28 streams over real gunicorn: subscriptions/listen, and streams whose client leaves.

A stream the client closed gives its thread and slot back within about a second, whatever
the keep-alive interval: these servers run with the default 15 s interval.
"""

from __future__ import annotations

import json
import time

import requests

from tests.support.clients import ModernClient
from tests.support.net import CONNECT_TIMEOUT

#: [seconds] how soon a closed stream must have given its slot back (the check runs every second).
RELEASE_LIMIT = 3.0


def open_listen(client: ModernClient, notifications: dict) -> tuple[requests.Response, dict]:
    """POST subscriptions/listen with ``stream=True``; returns the response and the acknowledgement."""
    message = client.message("subscriptions/listen", {"notifications": notifications})
    response = requests.post(
        client.url,
        data=json.dumps(message),
        headers=client.headers(message),
        stream=True,
        timeout=(CONNECT_TIMEOUT, 10),
    )
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/event-stream"), (
        response.status_code,
        response.headers,
    )
    lines = response.iter_lines()
    for line in lines:
        if line.startswith(b"data: "):
            ack = json.loads(line[6:])
            assert ack["method"] == "notifications/subscriptions/acknowledged", ack
            return response, ack
    raise AssertionError("the listen stream ended before its acknowledgement")


def test_a_closed_listen_stream_frees_its_slot_within_seconds(start_server):
    """With one listen slot and a 15 s keep-alive, a new listen succeeds soon after the first client left."""
    server = start_server(max_listen_streams=1, keepalive_interval=15)
    client = ModernClient(server.url)
    first, _ = open_listen(client, {"toolsListChanged": True})
    message = client.message("subscriptions/listen", {"notifications": {}})
    refused = client.post(message)
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "30", refused.text
    first.close()
    closed = time.monotonic()
    while True:
        response = client.post(client.message("server/discover"))
        assert response.status_code == 200
        try:
            again, ack = open_listen(client, {"toolsListChanged": True})
        except AssertionError:
            assert time.monotonic() - closed < RELEASE_LIMIT, "the closed stream still holds its slot"
            time.sleep(0.2)
            continue
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        again.close()
        break


def test_an_abandoned_session_elicitation_frees_its_pending_slot_within_seconds(start_server):
    """A handshake-era client that drops its eliciting call's stream and does not resume it frees the
    pending slot within about a second of the resumption window."""
    server = start_server(keepalive_interval=15, elicitation_timeout=60, resume_window=1.5, stream_retry=0.5)
    leaver = server.session(name="leaver")
    _, response, stream, _ = leaver.start_elicitation()
    watcher = server.session(name="watcher")
    assert watcher.status()["pending"] == 1
    stream.close()
    response.close()
    started = time.monotonic()
    watcher.wait_pending(0, deadline=RELEASE_LIMIT + 1.5)
    assert time.monotonic() - started < RELEASE_LIMIT + 1.5
