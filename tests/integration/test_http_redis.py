"""Handshake-era sessions shared by every gunicorn worker through a real Redis (ZEMCP_REDIS_URL).

Each test starts its own ``gunicorn -w 4`` (or ``-w 2``) with ``ZEMCP_REDIS_URL`` naming a
``redis-server`` started on a free loopback port (tests/support/redisserver.py), and places requests
on chosen workers with tests/support/placement.py. Skips, saying so, where redis-server is not
installed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import httpx2
import mcp
import pytest
import requests
from mcp import types
from mcp.client.streamable_http import streamable_http_client

from tests.support.clients import ModernClient
from tests.support.gunicorn import connection_to_a_worker, trace_records
from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT
from tests.support.placement import (
    answer_on,
    open_standalone,
    redis_settings,
    resume_on,
    serving_workers,
    start_call,
    worker_connection,
)
from tests.support.sse import SseStream
from tests.support.tsclient1 import run_legacy_calls

#: [seconds] bound on the SDK scenario of 50 calls.
SDK_TIMEOUT = 120
#: What each answered command's output shows, to tell each call got its own answer.
ANSWERS = {"session show": "protocol version:", "server status": "thread budget:", "help": "session list"}
#: [seconds] how soon an announcement must reach a stream held by another worker.
NOTICE_TIMEOUT = 5.0


def test_an_answer_posted_to_another_worker_reaches_the_waiting_call(start_server, redis_server):
    server = start_server(**redis_settings(redis_server.url))
    client = server.session()
    runner, runner_pid = worker_connection(client)
    call, stream, ask = start_call(client, runner)
    other, other_pid = worker_connection(client, {runner_pid})
    started = time.monotonic()
    accepted = answer_on(client, other, ask["id"], "session show")
    assert accepted.status_code == 202, accepted.text
    assert time.monotonic() - started < 1.0, "the handover took longer than a second"
    result = stream.next_message()
    assert result["id"] == call["id"] and "protocol version:" in result["result"]["content"][0]["text"], result
    # The same answer again: the call no longer waits, which the 400 says.
    again = answer_on(client, other, ask["id"], "session show")
    assert again.status_code == 400 and "no request of this session is waiting" in again.json()["error"]["message"]
    assert other_pid != runner_pid


def test_every_worker_serves_the_session_and_delete_ends_it_everywhere(start_server, redis_server):
    server = start_server(**redis_settings(redis_server.url))
    client = server.session()
    # Workers finish booting one after another, and the kernel hands them new connections
    # unevenly: keep opening connections (bounded) until each of the four served the session.
    pids: set[int] = set()
    deadline = time.monotonic() + 20
    while len(pids) < 4 and time.monotonic() < deadline:
        http, pid = worker_connection(client)
        http.close()
        pids.add(pid)
    assert len(pids) == 4, f"the session was served by workers {pids} only"
    assert client.rpc("logging/setLevel", {"level": "error"}) == {}
    runner, runner_pid = worker_connection(client)
    call, stream, ask = start_call(client, runner)
    deleter, _ = worker_connection(client, {runner_pid})
    deleted = deleter.delete(client.url, headers=client.headers(), timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    assert deleted.status_code == 204, deleted.text
    # The call running on the other worker learns it at once: its stream ends with the outcome.
    rest = stream.rest()
    withdrawn = [m for m in rest if m.get("method") == "notifications/cancelled"]
    assert withdrawn and withdrawn[0]["params"]["requestId"] == ask["id"], rest
    assert rest[-1]["id"] == call["id"] and "session ended" in str(rest[-1]), rest
    assert client.post({"jsonrpc": "2.0", "id": 99, "method": "ping"}).status_code == 404


def test_a_cancel_posted_to_another_worker_ends_the_call(start_server, redis_server):
    server = start_server(**redis_settings(redis_server.url))
    client = server.session()
    runner, runner_pid = worker_connection(client)
    call, stream, ask = start_call(client, runner)
    other, _ = worker_connection(client, {runner_pid})
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call["id"]}}
    assert other.post(client.url, json=cancel, headers=client.headers()).status_code == 202
    # No response to a cancelled request; the server withdraws its question, and the stream ends.
    rest = stream.rest()
    assert all(message.get("id") != call["id"] for message in rest), rest
    assert answer_on(client, other, ask["id"], "help").status_code == 400


def test_a_stream_dropped_on_one_worker_resumes_on_another(start_server, redis_server):
    server = start_server(**redis_settings(redis_server.url))
    client = server.session()
    runner, runner_pid = worker_connection(client)
    call, stream, ask = start_call(client, runner)
    last_id = stream.last_event_id
    stream.close()
    resumer, resumer_pid = worker_connection(client, {runner_pid})
    _, resumed = resume_on(client, resumer, last_id)
    answerer, _ = worker_connection(client, {runner_pid, resumer_pid})
    assert answer_on(client, answerer, ask["id"], "server status").status_code == 202
    result = resumed.next_message()
    assert result["id"] == call["id"] and "thread budget:" in result["result"]["content"][0]["text"], result


@pytest.mark.slow
def test_a_killed_worker_is_reported_to_the_client_that_resumes(start_server, redis_server):
    server = start_server(**redis_settings(redis_server.url))
    client = server.session()
    runner, runner_pid = worker_connection(client)
    call, stream, ask = start_call(client, runner)
    last_id = stream.last_event_id
    os.kill(runner_pid, signal.SIGKILL)
    started = time.monotonic()
    message = resume_on(client, requests.Session(), last_id)[1].next_message()
    assert message["id"] == call["id"] and message["error"]["code"] == -32603, message
    assert "stopped" in message["error"]["message"], message
    assert time.monotonic() - started < 8, "the client learnt of the dead worker only after 8 s"
    assert answer_on(client, requests.Session(), ask["id"], "help").status_code == 400


def test_list_changed_in_one_worker_reaches_a_stream_held_by_another(start_server, redis_server):
    server = start_server("tests.apps.streams:app", **redis_settings(redis_server.url))
    listener = server.session()
    assert listener.rpc("resources/subscribe", {"uri": "test://watched"}) == {}
    holder, holder_pid = worker_connection(listener)
    stream = open_standalone(listener, holder)
    # One standalone stream per session, across workers: another worker refuses a second one.
    second, _ = worker_connection(listener, {holder_pid})
    refused = second.get(
        listener.url,
        headers=listener.headers({"Accept": "text/event-stream", "Content-Type": None}),
        timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
    )
    assert refused.status_code == 409, refused.text
    announcer = server.session()
    other, _ = worker_connection(announcer, {holder_pid})
    for message in (
        announcer.call_message({}, name="add_tool"),
        announcer.call_message({"uri": "test://watched"}, name="touch"),
    ):
        assert other.post(announcer.url, json=message, headers=announcer.headers()).status_code == 200
    assert stream.next_message() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}
    assert stream.next_message() == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "test://watched"},
    }


def next_notice(stream: SseStream) -> dict:
    """The next message of ``stream``, which must come within :data:`NOTICE_TIMEOUT` (the keep-alive
    comments, every half second, bound each read)."""
    deadline = time.monotonic() + NOTICE_TIMEOUT
    while time.monotonic() < deadline:
        item = stream.next_item()
        assert item is not None, f"the stream ended before a notification: {stream.events}"
        if item[0] == "event":
            return item[1]["data"]
    raise AssertionError(f"no notification within {NOTICE_TIMEOUT:g} s")


def modern_call_on(modern: ModernClient, http: requests.Session, name: str) -> str:
    """A 2026-07-28 tools/call of ``name`` (no arguments) on the kept-alive connection ``http``: its text."""
    message = modern.message("tools/call", {"name": name, "arguments": {}})
    response = http.post(
        modern.url,
        json=message,
        headers=modern.headers(message, {"Connection": "keep-alive"}),
        timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
    )
    assert response.status_code == 200, (response.status_code, response.text)
    return modern.reply(response, message["id"])["result"]["content"][0]["text"]


def test_list_changed_from_a_worker_that_served_only_2026_07_28_calls_reaches_every_stream(start_server, redis_server):
    """A worker of a fresh server that served nothing but 2026-07-28 calls announces
    tools/list_changed: a session's standalone stream and a subscriptions/listen stream, each
    held by another worker, hear it."""
    server = start_server("tests.apps.streams:app", **redis_settings(redis_server.url))
    modern = ModernClient(server.url)

    def ask_pid(http: requests.Session) -> int:
        return int(modern_call_on(modern, http, "pid"))

    # Every request of the session travels on the holder's kept-alive connection, to its worker:
    # the other workers serve nothing but 2026-07-28 calls (the `pid` probes).
    holder, holder_pid = connection_to_a_worker(ask_pid, set())
    listener = server.client()
    listener.http = holder
    assert listener.initialize().status_code == 200
    assert listener.status()["pid"] == holder_pid
    standalone = open_standalone(listener, holder)
    listening, listen_pid = connection_to_a_worker(ask_pid, {holder_pid})
    message = modern.message("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    response = listening.post(
        modern.url,
        json=message,
        headers=modern.headers(message, {"Connection": "keep-alive"}),
        timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
        stream=True,
    )
    assert response.headers.get("Content-Type", "").startswith("text/event-stream"), response.text
    listen = SseStream.from_requests(response, listening)
    assert listen.next_message()["method"] == "notifications/subscriptions/acknowledged"
    announcer, announcer_pid = connection_to_a_worker(ask_pid, {holder_pid, listen_pid})
    assert int(modern_call_on(modern, announcer, "announce")) == announcer_pid
    assert next_notice(standalone) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}
    assert next_notice(listen) == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": message["id"]}},
    }
    listen.close()
    standalone.close()


def test_list_changed_from_a_thread_of_a_worker_that_served_nothing_reaches_another_workers_stream(
    start_server, redis_server
):
    """A worker that has served no request at all announces tools/list_changed from a thread of
    the application's own (SIGUSR2 in tests/apps/streams.py): a standalone stream held by the
    other worker hears it."""
    server = start_server("tests.apps.streams:app", **redis_settings(redis_server.url, workers=2))
    children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children")
    deadline = time.monotonic() + 10
    workers = set()
    while len(workers) < 2 and time.monotonic() < deadline:  # the second may still be starting
        workers = {int(pid) for pid in children.read_text().split()}
        time.sleep(0.05)
    assert len(workers) == 2, workers
    # The session's every request, the stream included, on one kept-alive connection: one worker.
    listener = server.client()
    holder = requests.Session()
    listener.http = holder
    assert listener.initialize().status_code == 200
    holder_pid = listener.status()["pid"]
    standalone = open_standalone(listener, holder)
    (idle_pid,) = workers - {holder_pid}
    # Signalled once it has loaded the app: its node's heartbeat (which the fix starts as the
    # worker begins serving, not at its first request) says so.
    import redis as redis_py  # installed: redis_server skips the test otherwise

    admin = redis_py.Redis.from_url(redis_server.url)
    try:
        while not admin.keys(f"zemcp:node:*.{idle_pid}.*") and time.monotonic() < deadline + 10:
            time.sleep(0.05)
    finally:
        admin.close()
    os.kill(idle_pid, signal.SIGUSR2)
    assert next_notice(standalone) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}
    standalone.close()


def test_the_master_names_the_redis_once_without_its_credentials(start_server, start_redis):
    """One start-up line of gunicorn's master names the Redis in use; its user name and password appear nowhere."""
    redis = start_redis()
    import redis as redis_py  # installed: start_redis skips the test otherwise

    user, password = "zemcp-owner", "pw-7f3a9c1e5b"
    admin = redis_py.Redis.from_url(redis.url)
    try:
        admin.acl_setuser(
            user, enabled=True, passwords=[f"+{password}"], keys=["*"], channels=["*"], commands=["+@all"]
        )
    finally:
        admin.close()
    server = start_server(**redis_settings(f"redis://{user}:{password}@127.0.0.1:{redis.port}/0", workers=2))
    # The credentials work: a session lives in that Redis, whichever worker serves it.
    client = server.session()
    assert client.command_text("session show")
    log = server.log()
    named = [line for line in log.splitlines() if "shared state in Redis" in line]
    assert len(named) == 1, named
    assert named[0].endswith(
        f"zemcp: shared state in Redis at redis://127.0.0.1:{redis.port}/0 (ZEMCP_REDIS_URL; any user name and "
        "password not shown), keys under 'zemcp:'"
    ), named
    assert password not in log and user not in log


def test_redis_stopped_and_started_during_a_run(start_server, start_redis):
    redis = start_redis()
    server = start_server(**redis_settings(redis.url, workers=2))
    client = server.session()
    modern = ModernClient(server.url)
    redis.stop()
    # A worker that served the session less than a second ago still serves it from its own object.
    time.sleep(1.1)
    started = time.monotonic()
    refused = client.post({"jsonrpc": "2.0", "id": 7, "method": "ping"})
    assert time.monotonic() - started < 3, "a request waited more than 3 s on a stopped Redis"
    assert refused.status_code == 503 and int(refused.headers["Retry-After"]) > 0, refused.text
    assert "Redis" in refused.json()["error"]["message"] and "ZEMCP_REDIS_URL" in refused.json()["error"]["message"]
    assert f"127.0.0.1:{redis.port}" in refused.json()["error"]["message"]
    # A 2026-07-28 request needs no session: it is served while Redis is down.
    assert modern.call_result({"command": "session show"})["isError"] is False
    redis.start()
    # The restarted Redis has lost its data: the session is unknown, and a new one works.
    deadline = time.monotonic() + 10
    while True:
        status = client.post({"jsonrpc": "2.0", "id": 8, "method": "ping"}).status_code
        if status == 404 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status == 404
    again = server.session()
    runner, runner_pid = worker_connection(again)
    call, stream, ask = start_call(again, runner)
    other, _ = worker_connection(again, {runner_pid})
    assert answer_on(again, other, ask["id"], "help").status_code == 202
    assert "session list" in stream.next_message()["result"]["content"][0]["text"]


def test_the_python_sdk_in_legacy_mode_completes_50_eliciting_calls_over_4_workers(start_traced_server, redis_server):
    """The official SDK client (mode="legacy"), a new TCP connection for every request, 50
    calls each answered with its own command: every result is the output of its own answer."""
    server = start_traced_server(**redis_settings(redis_server.url))
    serving_workers(server, 4)  # workers boot one after another: every one is there to take connections
    commands = list(ANSWERS)
    asked = []

    async def on_elicit(context, params):
        command = commands[len(asked) % len(commands)]
        asked.append(command)
        return types.ElicitResult(action="accept", content={"command": command})

    async def scenario():
        # No kept-alive connections: every request is a new connection, which any worker may accept.
        http = httpx2.AsyncClient(limits=httpx2.Limits(max_keepalive_connections=0), timeout=20)
        transport = streamable_http_client(server.url, http_client=http)
        results = []
        async with mcp.Client(transport, mode="legacy", elicitation_callback=on_elicit) as client:
            for _ in range(50):
                results.append(await client.call_tool("ze_execute", {}))
        await http.aclose()
        return results

    results = asyncio.run(asyncio.wait_for(scenario(), SDK_TIMEOUT))
    assert len(results) == 50 and len(asked) == 50
    for command, result in zip(asked, results):
        assert result.is_error is False, result
        assert ANSWERS[command] in result.content[0].text, (command, result.content[0].text)
    records = trace_records(server)
    posts = [r for r in records if r.http == "POST"]
    # initialize, notifications/initialized, then a call and its answer 50 times.
    assert len(posts) >= 102 and all(r.status in (200, 202) for r in posts), posts
    assert len({r.port for r in records}) == len(records), "a connection carried two requests"
    assert len({r.pid for r in posts}) > 1, "every request reached one worker"


def test_the_typescript_sdk_1_completes_50_eliciting_calls_over_4_workers(
    start_traced_server, redis_server, ts_sdk1_modules
):
    """The TypeScript SDK 1.x client, a new TCP connection for every request, 50 eliciting calls."""
    server = start_traced_server(**redis_settings(redis_server.url))
    serving_workers(server, 4)  # workers boot one after another: every one is there to take connections
    summary = run_legacy_calls(server.url, 50, 120, modules=ts_sdk1_modules)
    assert summary["exitCode"] == 0 and summary["failures"] == [], summary
    assert summary["ok"] == 50 and summary["elicitations"] == 50, summary
    assert summary["requests"] == summary["connections"], summary
    posts = [r for r in trace_records(server) if r.http == "POST"]
    assert len({r.pid for r in posts}) > 1, "every request reached one worker"


def test_a_call_waiting_when_redis_stops_still_ends_with_its_response(start_server, start_redis):
    """Redis goes away while a call waits for its answer: the call keeps its stream, and its
    response (here the elicitation timeout's) still reaches its own connection."""
    redis = start_redis()
    server = start_server(**redis_settings(redis.url, workers=2, elicitation_timeout=3))
    client = server.session()
    runner, _ = worker_connection(client)
    call, stream, ask = start_call(client, runner)
    redis.stop()
    rest = stream.rest()
    # The question is withdrawn, then the response ends the stream.
    assert rest[0]["method"] == "notifications/cancelled" and rest[0]["params"]["requestId"] == ask["id"], rest
    final = rest[-1]
    assert final["id"] == call["id"] and final["result"]["isError"] is True, final
    assert "within 3 s" in final["result"]["content"][0]["text"], final
    assert "Traceback" not in server.log(), server.log()[-3000:]
