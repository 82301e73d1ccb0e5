"""Answers for server requests that no longer wait, over real gunicorn: 400, never 404, and the session goes on.

A 404 to a request with ``Mcp-Session-Id`` says that the session is gone (MCP basic/transports,
"Session Management"), and clients then drop it and start a new one. So an elicitation answer
that comes after its wait timed out, a second answer, an answer for a cancelled call and one
carrying another session's request id all get 400 with a JSON-RPC error saying that no request
of the session waits for it (docs/transport.md, row 24 and "An answer nothing waits for"), and
the next request of the same session is served. Each case runs with the in-process state and
with a real redis-server (``ZEMCP_REDIS_URL``). The official clients keep their session through
such an answer: the MCP Python SDK, and the TypeScript SDK 1.x (the ``ts_sdk1_modules`` fixture
installs it with npm into a cache folder and skips, saying why, without npm).
"""

from __future__ import annotations

import asyncio
import contextlib

import mcp
import pytest
import requests
from mcp import types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from tests.support.clients import HandshakeClient
from tests.support.gunicorn import wait_trace
from tests.support.tsclient1 import run_late_answer

#: [seconds] the elicitation timeout of the servers whose waits must run out.
SHORT_WAIT = 1
#: [seconds] bound on each SDK scenario.
SCENARIO_TIMEOUT = 30


@pytest.fixture(params=["memory", "redis"])
def start(request, start_server):
    """Factory: ``start_server(**settings)`` with the state backend of the parameter (``redis``: a
    real redis-server, ``ZEMCP_REDIS_URL``)."""
    backend = {"redis_url": request.getfixturevalue("redis_server").url} if request.param == "redis" else {}
    return lambda **settings: start_server(keepalive_interval=0.3, **backend, **settings)


def assert_not_waiting(response: requests.Response, request_id: str) -> str:
    """``response`` is the 400 of an answer nothing waits for: -32600, ``id`` null, a message that
    names ``request_id`` and says the session goes on. Returns the message."""
    assert response.status_code == 400, (response.status_code, response.text)
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    body = response.json()
    assert body["id"] is None and body["error"]["code"] == -32600, body
    message = body["error"]["message"]
    assert f"no request of this session is waiting for an answer with id '{request_id}'" in message, message
    assert "this answer was not used" in message and "The session goes on" in message, message
    return message


def assert_session_goes_on(client: HandshakeClient) -> None:
    """The client's session still serves requests, under the same id: a ping, and a command that
    reports the session's own client."""
    assert client.rpc("ping") == {}
    assert f"client: {client.name} {client.version}" in client.command_text("session show")


def test_an_answer_after_the_wait_timed_out(start):
    """The wait ran out (the call ended with its timeout result) before the answer came."""
    server = start(elicitation_timeout=SHORT_WAIT)
    client = server.session(name="slow")
    call, _, stream, ask = client.start_elicitation()
    rest = stream.rest()
    assert rest[-1]["id"] == call["id"] and rest[-1]["result"]["isError"] is True, rest
    message = assert_not_waiting(client.accept(ask["id"], {"command": "help"}), ask["id"])
    assert "timed out" in message, message
    assert_session_goes_on(client)


def test_a_second_answer(start):
    """The same question answered again after its call completed with the first answer."""
    server = start()
    client = server.session(name="twice")
    call, _, stream, ask = client.start_elicitation()
    assert client.accept(ask["id"], {"command": "session show"}).status_code == 202
    final = stream.next_message()
    assert final["id"] == call["id"] and final["result"]["isError"] is False, final
    message = assert_not_waiting(client.accept(ask["id"], {"command": "help"}), ask["id"])
    assert "answered already" in message, message
    assert_session_goes_on(client)


def test_an_answer_for_a_cancelled_call(start):
    """The client cancelled the call (notifications/cancelled), then answered its question."""
    server = start()
    client = server.session(name="cancelling")
    call, _, stream, ask = client.start_elicitation()
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call["id"]}}
    assert client.post(cancel).status_code == 202
    # The server withdraws its question, and the cancelled call gets no response.
    rest = stream.rest()
    assert [(m.get("method"), m.get("params", {}).get("requestId")) for m in rest] == [
        ("notifications/cancelled", ask["id"])
    ], rest
    message = assert_not_waiting(client.accept(ask["id"], {"command": "help"}), ask["id"])
    assert "was cancelled" in message, message
    assert_session_goes_on(client)


def test_an_answer_with_another_sessions_request_id(start):
    """Bob answers Alice's question under his own session: refused like an unknown id, and
    Alice's call still waits for her own answer."""
    server = start()
    alice = server.session(name="alice")
    bob = server.session(name="bob")
    call, _, stream, ask = alice.start_elicitation()
    refused = bob.accept(ask["id"], {"command": "help"})
    assert_not_waiting(refused, ask["id"])
    # The same words as for an id never sent anywhere: nothing tells Bob the id is live elsewhere.
    unknown = bob.accept("zemcp-unknown", {"command": "help"})
    assert_not_waiting(unknown, "zemcp-unknown")
    assert refused.text == unknown.text.replace("zemcp-unknown", ask["id"])
    assert_session_goes_on(bob)
    # Alice's call still waits, and her own answer completes it.
    assert alice.accept(ask["id"], {"command": "session show"}).status_code == 202
    final = stream.next_message()
    assert final["id"] == call["id"] and "client: alice 1.0" in final["result"]["content"][0]["text"], final
    assert_session_goes_on(alice)


def test_the_python_sdk_keeps_its_session_through_a_second_answer(start_traced_server):
    """The SDK's own transport POSTs an answer again after the call completed: it gets 400, the
    SDK drops it, and its next call goes on in the same session, with no second initialize."""
    server = start_traced_server()
    since = len(server.log())
    asked = []

    async def on_elicit(context, params):
        asked.append(context.request_id)
        return types.ElicitResult(action="accept", content={"command": "session show"})

    async def scenario():
        writers = []

        @contextlib.asynccontextmanager
        async def transport():
            # The SDK's streamable HTTP transport, its write stream kept to send the answer again.
            async with streamable_http_client(server.url) as (read_stream, write_stream):
                writers.append(write_stream)
                yield read_stream, write_stream

        async with mcp.Client(transport(), mode="legacy", elicitation_callback=on_elicit) as client:
            first = await client.call_tool("ze_execute", {})
            again = types.JSONRPCResponse(
                jsonrpc="2.0", id=asked[0], result={"action": "accept", "content": {"command": "help"}}
            )
            await writers[0].send(SessionMessage(again))
            await asyncio.to_thread(wait_trace, server, since, 1, until=lambda r: r.status == 400)
            second = await client.call_tool("ze_execute", {"command": "session show"})
        return first, second

    first, second = asyncio.run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
    assert first.is_error is False and "elicitation: yes" in first.content[0].text, first
    assert second.is_error is False and "elicitation: yes" in second.content[0].text, second

    records = wait_trace(server, since, 1, until=lambda r: r.http == "DELETE")
    posts = [r for r in records if r.http == "POST"]
    # One initialize (the one POST without a session id); every later request in its session.
    assert [r.session_in for r in posts].count(None) == 1 and posts[0].session_in is None, records
    session = posts[0].session_out
    assert session and all(r.session_in == session for r in records if r is not posts[0]), records
    assert [r.status for r in records if r.status >= 400] == [400], records
    assert [r.status for r in records if r.http == "DELETE"] == [204], records


def test_the_typescript_sdk_1_keeps_its_session_through_a_late_answer(start_traced_server, ts_sdk1_modules):
    """The SDK answers an elicitation after the server's timeout (its handler holds the event
    loop, so the answer goes out before it reads the withdrawal): the answer gets 400, the SDK
    reports it through onerror, and its next call goes on in the same session."""
    server = start_traced_server(elicitation_timeout=SHORT_WAIT, keepalive_interval=0.3)
    since = len(server.log())
    summary = run_late_answer(server.url, SHORT_WAIT + 1, SCENARIO_TIMEOUT, modules=ts_sdk1_modules)

    assert summary["exitCode"] == 0 and summary["failure"] is None, summary
    assert summary["initializes"] == 1, summary
    session = summary["sessionIds"][0]
    assert session and summary["sessionIds"] == [session, session], summary
    assert summary["answers"] == [{"id": summary["askedId"], "status": 400}], summary
    timed_out, shown = summary["results"]
    assert timed_out["isError"] is True and f"within {SHORT_WAIT} s" in timed_out["content"][0]["text"], timed_out
    assert shown["isError"] is False and "client: zemcp-ts-late 1.0" in shown["content"][0]["text"], shown
    # What the SDK reports is the server's explanation, not a lost session.
    assert summary["errors"], summary
    assert all("no request of this session is waiting" in e["message"] for e in summary["errors"]), summary

    records = wait_trace(server, since, 1, until=lambda r: r.http == "DELETE")
    assert all(r.session_in == session for r in records[1:]), records
    assert [r.status for r in records if r.status >= 400] == [400], records
