"""What a call waiting for an answer gets when what it relies on is lost, with sessions shared
through a real Redis (ZEMCP_REDIS_URL) by two gunicorn workers: the worker that runs it is
killed, or Redis loses its data. The helpers that place requests on chosen workers are
tests/support/placement.py's.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import requests

from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT
from tests.support.placement import answer_on, redis_settings, start_call, worker_connection
from tests.support.sse import SseStream

#: What the result of a call whose session Redis lost says (zemcp.state.redis.sessions.LOST).
LOST = "Redis no longer has it: Redis lost its data"


@pytest.mark.slow
def test_an_answer_for_the_call_of_a_worker_killed_a_moment_ago_is_not_accepted(start_server, redis_server):
    """The answer reaches the other worker while the killed one's heartbeat still lives: the
    waiting worker never says it took the answer, so the POST is not answered 202 (nor 404:
    the session lives on), and the call ends with an error for the client that resumes it."""
    server = start_server(**redis_settings(redis_server.url, workers=2))
    client = server.session()
    runner, runner_pid = worker_connection(client)
    call, stream, ask = start_call(client, runner)
    other, _ = worker_connection(client, {runner_pid})
    last_id = stream.last_event_id
    os.kill(runner_pid, signal.SIGKILL)
    started = time.monotonic()
    refused = answer_on(client, other, ask["id"], "help")
    assert time.monotonic() - started < 5, "the answer POST waited more than 5 s"
    # 503 while the killed worker's heartbeat lives (it never confirms); 400 if it lapsed first.
    assert refused.status_code in (400, 503), (refused.status_code, refused.text)
    assert "this answer was not used" in refused.json()["error"]["message"], refused.text
    headers = {**client.headers({"Accept": "text/event-stream", "Content-Type": None}), "Last-Event-ID": last_id}
    response = requests.get(client.url, headers=headers, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), stream=True)
    assert response.status_code == 200, response.text
    message = SseStream.from_requests(response, requests.Session()).next_message()
    assert message["id"] == call["id"] and message["error"]["code"] == -32603, message
    assert client.rpc("ping") == {}


def test_a_call_whose_answer_its_stalled_worker_read_too_late_ends_at_once(start_server, redis_server):
    """The worker running the call stalls (SIGSTOP) while its answer is handed over: the POST
    gets 503 after the 2-s handover bound, and once the worker runs again its call ends at once
    with an error saying so (not at the 60-s elicitation timeout); the answer sent again gets
    400, since no request waits for it any more."""
    server = start_server(**redis_settings(redis_server.url, workers=2, elicitation_timeout=60))
    client = server.session()
    runner, runner_pid = worker_connection(client)
    call, stream, ask = start_call(client, runner)
    other, _ = worker_connection(client, {runner_pid})
    os.kill(runner_pid, signal.SIGSTOP)
    try:
        refused = answer_on(client, other, ask["id"], "help")
    finally:
        os.kill(runner_pid, signal.SIGCONT)
    assert refused.status_code == 503, (refused.status_code, refused.text)
    assert "this answer was not used" in refused.json()["error"]["message"], refused.text
    started = time.monotonic()
    final = stream.rest()[-1]
    assert time.monotonic() - started < 10, "the call did not end within 10 s of its worker's return"
    assert final["id"] == call["id"] and final["result"]["isError"] is True, final
    assert "reached the server process running it too late" in final["result"]["content"][0]["text"], final
    assert answer_on(client, other, ask["id"], "help").status_code == 400
    assert client.rpc("ping") == {}


def test_calls_waiting_when_redis_loses_its_data_end_with_an_error_within_seconds(start_server, redis_server):
    """FLUSHALL while a call of each of two sessions waits on each worker: each stream ends at
    once with the question withdrawn and an isError result saying Redis lost the session, and
    each worker holds neither a pending elicitation nor the call's thread any more."""
    server = start_server(**redis_settings(redis_server.url, workers=2))
    first, second = server.session(), server.session()
    one, one_pid = worker_connection(first)
    two, _ = worker_connection(second, {one_pid})
    waiting = [(start_call(first, one), one), (start_call(second, two), two)]
    redis_server.flush()
    started = time.monotonic()
    for (call, stream, ask), _ in waiting:
        rest = stream.rest()
        assert rest[0]["method"] == "notifications/cancelled" and rest[0]["params"]["requestId"] == ask["id"], rest
        final = rest[-1]
        assert final["id"] == call["id"] and final["result"]["isError"] is True, final
        assert LOST in final["result"]["content"][0]["text"], final
    assert time.monotonic() - started < 5, "the calls ended more than 5 s after Redis lost their sessions"
    for _, http in waiting:
        # A new session on the same kept-alive connection asks the same worker, whose only
        # running request is then that question (a thread ends a moment after its last write).
        again = server.client()
        again.http = http
        assert again.initialize().status_code == 200
        deadline = time.monotonic() + 3
        while (status := again.status())["running"] > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status["pending"] == 0 and status["running"] == 1, status["text"]
    assert first.post({"jsonrpc": "2.0", "id": 9, "method": "ping"}).status_code == 404
    assert "Traceback" not in server.log(), server.log()[-3000:]
