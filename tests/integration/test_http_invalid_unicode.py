"""Lone surrogates in names, URIs, task ids and answer ids over real HTTP under gunicorn, with
the in-process state and with a real Redis (ZEMCP_REDIS_URL): 4xx naming the field, never a 500.

A JSON string such as ``"\\ud800"`` (half a surrogate pair) is not Unicode text: no header
value, Redis key or script argument can be made of it. Each entry the field reported gets 400
with -32602 (or -32600 for an answer's id) naming the field, before any lookup; the server
logs no traceback; and what a client only sends to be shown (its name, a request id) still
works. The server is tests/apps/tasks_app.py, with Redis in two workers that share the state. The seeded fuzz over every field is tests/inprocess/test_invalid_unicode.py.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.clients import ModernClient
from tests.support.gunicorn import GunicornServer, lend
from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT
from tests.support.sse import SseStream

APP = "tests.apps.tasks_app:app"
MODERN_CAPABILITIES = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
SURROGATES = ["\ud800", "\udfff", "\ud800\ud800", "\udc00\ud800", "task-\ud83d"]


@pytest.fixture(scope="module", params=["memory", "redis"])
def _unicode_server(request: pytest.FixtureRequest, _log_dir: Path) -> Iterator[GunicornServer]:
    settings = {"workers": 1, "keepalive_interval": 0.5, "task_poll_interval": 0.2}
    if request.param == "redis":
        # Two workers sharing the run's redis-server (flushed only by tests of other modules).
        settings.update(workers=2, redis_url=request.getfixturevalue("_shared_redis").url)
    server = GunicornServer(settings, _log_dir, app=APP)
    yield server
    server.stop()


@pytest.fixture
def server(request: pytest.FixtureRequest, _unicode_server: GunicornServer) -> Iterator[GunicornServer]:
    """The module's gunicorn (one per backend); after each test, its log must hold no traceback."""
    start = len(_unicode_server.log())
    yield from lend(request, _unicode_server)
    written = _unicode_server.log()[start:]
    assert "Traceback" not in written and "UnicodeEncodeError" not in written, written


def _base64_anyway(value: str) -> str:
    """The Mcp-Name a client that encodes the surrogates anyway would send (not UTF-8 inside)."""
    return "=?base64?" + base64.b64encode(value.encode("utf-8", "surrogatepass")).decode("ascii") + "?="


def _refusal(response: requests.Response, code: int, field: str) -> dict:
    assert response.status_code == 400, (response.status_code, response.text)
    error = response.json()["error"]
    assert error["code"] == code, error
    assert field in error["message"] and "lone surrogate" in error["message"], error
    return response.json()


@pytest.mark.parametrize(
    ("method", "field"),
    [
        ("tools/call", "name"),
        ("prompts/get", "name"),
        ("resources/read", "uri"),
        ("tasks/get", "taskId"),
        ("tasks/cancel", "taskId"),
        ("tasks/update", "taskId"),
    ],
)
@pytest.mark.parametrize("value", SURROGATES, ids=ascii)
def test_a_modern_name_uri_or_task_id_with_a_lone_surrogate_is_400_invalid_params(server, method, field, value):
    """2026-07-28: 400, -32602 naming params.<field>, with the request's id, whatever Mcp-Name holds."""
    client = ModernClient(server.url, capabilities=MODERN_CAPABILITIES)
    params = {field: value, **({"arguments": {}} if method == "tools/call" else {})}
    if method == "tasks/update":
        params["inputResponses"] = {}
    for mcp_name in (_base64_anyway(value), None):
        message = client.message(method, params)
        body = _refusal(client.post(message, headers={"Mcp-Name": mcp_name}), -32602, f"params.{field}")
        assert body["id"] == message["id"], body


@pytest.mark.parametrize("field", ["resourceSubscriptions", "taskIds"])
@pytest.mark.parametrize("value", SURROGATES, ids=ascii)
def test_a_listen_stream_naming_a_uri_or_task_id_with_a_lone_surrogate_is_400_invalid_params(server, field, value):
    """2026-07-28 subscriptions/listen: 400, -32602 naming params.notifications.<field>[1], before
    any stream opens or task record is looked up."""
    client = ModernClient(server.url, capabilities=MODERN_CAPABILITIES)
    fit = "test://fine" if field == "resourceSubscriptions" else "a" * 32
    message = client.message("subscriptions/listen", {"notifications": {field: [fit, value]}})
    body = _refusal(client.post(message), -32602, f"params.notifications.{field}[1]")
    assert body["id"] == message["id"], body


@pytest.mark.parametrize("method", ["tasks/get", "tasks/result", "tasks/cancel"])
@pytest.mark.parametrize("value", SURROGATES, ids=ascii)
def test_a_session_task_id_with_a_lone_surrogate_is_400_invalid_params(server, method, value):
    """2025-11-25: 400, -32602 naming params.taskId; the session goes on."""
    client = server.session(protocol_version="2025-11-25")
    _refusal(client.request(method, {"taskId": value}), -32602, "params.taskId")
    assert client.rpc("tools/call", {"name": "echo", "arguments": {"text": "still here"}})["content"][0]["text"] == (
        "still here"
    )


def test_an_answer_whose_id_holds_a_lone_surrogate_is_refused_and_the_question_still_waits(server):
    """2025-11-25: a task's elicitation/create comes on its tasks/result stream; answers with
    ids holding a lone surrogate get 400, -32600 naming "id", and the right answer then
    completes the task."""
    client = server.session(protocol_version="2025-11-25")
    create = {"name": "approve", "arguments": {"item": "crate"}, "task": {}}
    task_id = client.rpc("tools/call", create)["task"]["taskId"]
    fetch = {"jsonrpc": "2.0", "id": client.new_id(), "method": "tasks/result", "params": {"taskId": task_id}}
    response, stream = client.open_stream(fetch)
    assert isinstance(stream, SseStream), (response.status_code, response.text)
    question = stream.next_message()
    while question is not None and question.get("method") != "elicitation/create":
        question = stream.next_message()
    assert question is not None, "the stream ended before the question came"
    for bad in ["\ud800", question["id"] + "\udfff", "\udc00" + question["id"]]:
        refused = _refusal(client.accept(bad, {"ok": True}), -32600, '"id"')
        assert refused["id"] is None, refused
    assert client.accept(question["id"], {"ok": True}).status_code == 202
    final = [m for m in stream.rest() if m.get("id") == fetch["id"]]
    assert final and final[0]["result"]["content"][0]["text"] == "approved crate", final


def test_a_client_name_and_request_id_with_lone_surrogates_are_carried(server):
    """Text only shown is kept: a session whose client is named "\\udc00", initialized by a
    request with id "\\ud800", is created, and serves calls on new connections (with Redis,
    on either worker) whose ids and arguments hold lone surrogates."""
    client = server.client(name="\udc00")
    message = {
        "jsonrpc": "2.0",
        "id": "\ud800",
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "\udc00"}},
    }
    response = client.post(message, version=False)
    assert response.status_code == 200 and response.json()["id"] == "\ud800", response.text
    client.session_id = response.headers["Mcp-Session-Id"]
    for _ in range(4):
        with requests.Session() as http:
            call = {"jsonrpc": "2.0", "id": "\udfff", "method": "tools/call", "params": {"name": "echo"}}
            call["params"]["arguments"] = {"text": "\ud83d"}
            answer = http.post(
                server.url,
                data=json.dumps(call),
                headers=client.headers({"Connection": "close"}),
                timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
            )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["id"] == "\udfff" and body["result"]["content"][0]["text"] == "\ud83d", body
