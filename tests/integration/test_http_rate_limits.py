"""Rate limits over real gunicorn (docs/observability.md, "Rate limits").

Each test starts its own gunicorn running tests/apps/rated.py. The two-worker tests pin a
kept-alive connection to each worker: a new connection lands on either worker, so a test
opens connections, sends each a GET (which no rate limit counts: it is answered 405 without
a session), reads from the traced access log which worker served it, and keeps one
connection per worker. Calls sent on those connections then reach the worker the test
chose, and the trace tells which worker answered each of them. Skips the Redis tests,
saying so, where redis-server is not installed. Buckets by principal are tested with the
other authorization tests (tests/integration/test_http_auth.py), stdio's freedom from limits
in tests/integration/test_stdio_transport.py.
"""

from __future__ import annotations

import json
import time

import pytest
import requests

from tests.support.clients import TAG_HEADER, ModernClient
from tests.support.gunicorn import wait_trace
from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT

APP = "tests.apps.rated:app"
#: [seconds] how long to look for a connection to each of the two workers: they boot one after
#: the other, and until the second is up the first takes every connection.
WORKERS_DEADLINE = 20.0


def probe(server, http: requests.Session, tag: str) -> int:
    """The pid of the worker that serves a GET (never rate limited) on ``http``."""
    since = len(server.log())
    response = http.get(
        server.url,
        headers={"Accept": "text/event-stream", TAG_HEADER: tag},
        timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
    )
    assert response.status_code == 405, response.text
    records = wait_trace(server, since, 1, until=lambda record: record.tag == tag)
    return next(record.pid for record in records if record.tag == tag)


def connections_to_both_workers(server) -> dict[int, requests.Session]:
    """A kept-alive connection to each of the two workers of ``server``, by worker pid."""
    found: dict[int, requests.Session] = {}
    deadline = time.monotonic() + WORKERS_DEADLINE
    tries = 0
    while time.monotonic() < deadline:
        tries += 1
        for pid, kept in list(found.items()):
            # Used again before gunicorn's keep-alive (5 s) closes it; a new one may reach another worker.
            if probe(server, kept, f"keep-{tries}") != pid:
                del found[pid]
                kept.close()
        http = requests.Session()
        pid = probe(server, http, f"probe-{tries}")
        if pid in found:
            http.close()
            time.sleep(0.05)
            continue
        found[pid] = http
        if len(found) == 2:
            return found
    for http in found.values():
        http.close()
    pytest.fail(f"{tries} new connections in {WORKERS_DEADLINE} s reached only workers {sorted(found)}")


def call_on(http: requests.Session, client: ModernClient, name: str, tag: str) -> tuple[dict, requests.Response]:
    """A 2026-07-28 tools/call of ``name`` on the kept-alive connection ``http``; the message and the response."""
    message = client.message("tools/call", {"name": name, "arguments": {}})
    headers = client.headers(message, {"Connection": "keep-alive", TAG_HEADER: tag})
    response = http.post(client.url, data=json.dumps(message), headers=headers, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    return message, response


def assert_refused(response: requests.Response, request_id, limit: str, scope: str, setting: str) -> int:
    """HTTP 429, Retry-After and the JSON-RPC error of the rate limit; returns the Retry-After."""
    assert response.status_code == 429, (response.status_code, response.text)
    retry_after = int(response.headers["Retry-After"])
    assert retry_after >= 1, response.headers
    body = response.json()
    assert body["id"] == request_id and body["error"]["code"] == -32603, body
    assert body["error"]["data"] == {"limit": limit, "retryAfter": retry_after, "scope": scope}, body
    message = body["error"]["message"]
    assert f"rate limit{'' if scope == 'client' else ' for ' + scope} ({limit}, {setting}) is used up" in message
    assert message.endswith(f"retry after {retry_after} s"), message
    return retry_after


def alternate(server, calls: int, name: str = "hello") -> list[tuple[int, dict, requests.Response]]:
    """``calls`` calls of ``name`` sent alternately to the two workers: (pid, message, response) each,
    the pid checked against the trace of the worker that answered."""
    connections = connections_to_both_workers(server)
    client = ModernClient(server.url, name="rate-test")
    pids = sorted(connections)
    since = len(server.log())
    sent = []
    for n in range(calls):
        pid = pids[n % 2]
        message, response = call_on(connections[pid], client, name, f"call-{n}")
        sent.append((pid, message, response))
    traced = {r.tag: r.pid for r in wait_trace(server, since, calls) if r.tag}
    assert traced == {f"call-{n}": pid for n, (pid, _, _) in enumerate(sent)}, traced
    for http in connections.values():
        http.close()
    return sent


def test_with_redis_both_workers_take_from_one_bucket(start_traced_server, redis_server):
    """ZEMCP_RATE_LIMIT=4/minute with ZEMCP_REDIS_URL: the bucket is shared by both workers, so of
    8 calls sent alternately to each, exactly the first 4 (2 on each worker) are served and the
    other 4 get 429 with Retry-After and the JSON-RPC error."""
    server = start_traced_server(app=APP, workers=2, redis_url=redis_server.url, rate_limit="4/minute")
    sent = alternate(server, 8)
    assert [response.status_code for _, _, response in sent] == [200] * 4 + [429] * 4, [
        (pid, r.status_code, r.text) for pid, _, r in sent
    ]
    assert len({pid for pid, _, _ in sent[:4]}) == 2, "the served calls came from both workers"
    for _, message, response in sent[4:]:
        # One token every 15 s; the test took far less than that since the first call.
        assert 1 <= assert_refused(response, message["id"], "4/minute", "client", "ZEMCP_RATE_LIMIT") <= 15


def test_without_redis_each_worker_allows_the_whole_limit(start_traced_server):
    """ZEMCP_RATE_LIMIT=4/minute without Redis: the buckets are per process, so each of the two
    workers allows this client its own 4 calls: of 8 calls alternately sent to each, all are
    served (the client got between 4 and 8, here twice the limit), and each worker, having
    served 4, refuses the next call it gets."""
    server = start_traced_server(app=APP, workers=2, rate_limit="4/minute")
    sent = alternate(server, 10)
    served = [pid for pid, _, response in sent if response.status_code == 200]
    assert 4 <= len(served) <= 8
    assert {pid: served.count(pid) for pid in set(served)} == {pid: 4 for pid, _, _ in sent}, served
    assert [response.status_code for _, _, response in sent] == [200] * 8 + [429, 429], [
        (pid, r.status_code) for pid, _, r in sent
    ]
    assert sent[8][0] != sent[9][0], "the last two calls went one to each worker"
    for _, message, response in sent[8:]:
        assert_refused(response, message["id"], "4/minute", "client", "ZEMCP_RATE_LIMIT")


def test_tools_have_buckets_of_their_own_shared_by_the_workers(start_server, redis_server):
    """report's @server.tool(rate_limit="2/minute") wins over ZEMCP_RATE_LIMIT_TOOLS's report=100/minute;
    search=1/minute comes from the setting. Each served call also takes one of the client's 6,
    and a refused one takes none: calls on fresh connections, any worker of two."""
    server = start_server(
        app=APP,
        workers=2,
        redis_url=redis_server.url,
        rate_limit="6/minute",
        rate_limit_tools="report=100/minute,search=1/minute",
    )
    client = ModernClient(server.url, name="rate-tools")

    def call(name: str) -> tuple[dict, requests.Response]:
        message = client.message("tools/call", {"name": name, "arguments": {}})
        return message, client.post(message)

    assert [call("report")[1].status_code for _ in range(2)] == [200, 200]
    message, refused = call("report")
    assert 1 <= assert_refused(refused, message["id"], "2/minute", "tool report", "the tool's rate_limit") <= 30
    assert call("search")[1].status_code == 200
    message, refused = call("search")
    assert 1 <= assert_refused(refused, message["id"], "1/minute", "tool search", "ZEMCP_RATE_LIMIT_TOOLS") <= 60
    # 3 of the client's 6 tokens went to the served calls: 3 more, then the client's own 429.
    assert [call("hello")[1].status_code for _ in range(3)] == [200, 200, 200]
    message, refused = call("hello")
    assert_refused(refused, message["id"], "6/minute", "client", "ZEMCP_RATE_LIMIT")


def test_pings_answers_cancellations_gets_and_deletes_are_served_over_the_limit(start_server):
    """ZEMCP_RATE_LIMIT=3/hour: initialize and two eliciting calls take the 3 tokens; then a call
    is refused, but pings are answered, the first call's elicitation answer completes it, the
    second call's cancellation ends it, the standalone GET stream opens and DELETE ends the
    session."""
    server = start_server(app=APP, rate_limit="3/hour", keepalive_interval=0.5)
    client = server.session()  # initialize: the first token; notifications/initialized: none
    first = client.call_message({}, name="ask")
    _, answered = client.open_stream(first)
    question = answered.next_message()
    assert question["method"] == "elicitation/create", question
    second = client.call_message({}, name="ask")
    _, cancelled = client.open_stream(second)
    assert cancelled.next_message()["method"] == "elicitation/create"

    refused_call = client.call_message({}, name="hello")
    refused = client.post(refused_call)
    assert assert_refused(refused, refused_call["id"], "3/hour", "client", "ZEMCP_RATE_LIMIT") > 1100
    for _ in range(3):
        assert client.rpc("ping") == {}

    accepted = client.accept(question["id"], {"word": "late"})
    assert accepted.status_code == 202, accepted.text
    final = [m for m in answered.rest() if m.get("id") == first["id"]]
    assert final and final[0]["result"]["content"][0]["text"] == "word: late", answered.events

    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": second["id"]}}
    assert client.post(cancel).status_code == 202
    rest = cancelled.rest()
    assert cancelled.ended and not [m for m in rest if m.get("id") == second["id"]], rest

    response, standalone = client.get_stream()
    assert response.status_code == 200 and standalone is not None, (response.status_code, response.text)
    standalone.close()
    assert client.post(client.call_message({}, name="hello")).status_code == 429, "still no token"
    assert client.delete().status_code == 204


def test_each_round_of_a_2026_call_takes_a_token(start_server):
    """ZEMCP_RATE_LIMIT=3/minute in the 2026-07-28 era: an eliciting call's two rounds take two,
    a plain call the third, and the next request is refused with its id."""
    server = start_server(app=APP, rate_limit="3/minute")
    client = ModernClient(server.url, name="rate-modern")
    first = client.call_result({}, name="ask")
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["word"], first
    final = client.call_result(
        {},
        name="ask",
        input_responses={"word": {"action": "accept", "content": {"word": "hi"}}},
        request_state=first["requestState"],
    )
    assert final["resultType"] == "complete" and final["content"][0]["text"] == "word: hi", final
    assert client.call_result({}, name="hello")["content"][0]["text"] == "hello"
    message = client.message("tools/call", {"name": "hello", "arguments": {}})
    assert 15 <= assert_refused(client.post(message), message["id"], "3/minute", "client", "ZEMCP_RATE_LIMIT") <= 20
