"""elicit_missing, ctx.elicit(timeout=...) and the wait for notifications/initialized, in-process.

A session (2025-06-18 and 2025-11-25) and 2026-07-28 requests, over werkzeug's test client;
the same rules over real HTTP under gunicorn are in tests/integration/test_http_elicit_missing.py.
"""

import json
import threading
import time
from typing import Annotated, Literal

import pytest

import zemcp
from tests.inprocess.test_modern import Modern, result_of
from tests.inprocess.test_transport import HEADERS, events
from tests.support.threaded import Client
from zemcp import Settings
from zemcp.eras.handshake import call as call_module

BOOKED: list[dict] = []


def make_app():
    server = zemcp.Server(
        "missing-demo", "1", settings=Settings(threads=8, keepalive_interval=0.05, elicitation_timeout=5)
    )

    @server.tool(elicit_missing=True)
    def book(
        city: str,
        nights: Annotated[int, {"title": "Nights", "minimum": 1, "maximum": 14}],
        size: Annotated[Literal["s", "l"], {"enumNames": ["Small", "Large"]}],
        breakfast: bool,
        guests: list[str] | None = None,
    ) -> str:
        """Book a room."""
        BOOKED.append({"city": city, "nights": nights})
        return f"{nights} night(s) in {city}, size {size}, breakfast {breakfast}, guests {guests}"

    @server.tool(elicit_missing=True)
    def tag(label: Annotated[str, {"pattern": "^[a-z]+$"}], where: dict[str, str]) -> str:
        """Tag a place."""
        return f"{label} {where}"

    @server.tool(elicit_missing=["city"], elicit_message="Which city?")
    def visit(ctx: zemcp.Context, city: str) -> str:
        """Visit a city, after a confirmation."""
        confirm = ctx.elicit(
            f"Really visit {city}?",
            {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
            key="ok",
        )
        return f"visiting {city}" if confirm["ok"] else "staying home"

    @server.tool
    def quick(ctx: zemcp.Context) -> str:
        """Ask with a short per-call timeout."""
        try:
            answer = ctx.elicit(
                "Quick!", {"type": "object", "properties": {"x": {"type": "string"}}}, key="x", timeout=0.2
            )
        except zemcp.ElicitTimeout as exc:
            return f"timeout: {exc}"
        return f"got {answer.get('x')}"

    return zemcp.McpApp(server)


@pytest.fixture
def app():
    BOOKED.clear()
    return make_app()


class Peer:
    """A session over werkzeug's test client; sends notifications/initialized unless told not to."""

    def __init__(self, app, protocol_version="2025-11-25", capabilities=None, initialized=True):
        self.client = Client(app)
        self.ids = iter(range(1, 10_000))
        caps = {"elicitation": {}} if capabilities is None else capabilities
        r = self.client.post(
            "/mcp",
            headers=HEADERS,
            data=json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": protocol_version,
                        "capabilities": caps,
                        "clientInfo": {"name": "missing", "version": "1"},
                    },
                }
            ),
        )
        assert r.status_code == 200, r.get_data()
        self.headers = {**HEADERS, "Mcp-Session-Id": r.headers["Mcp-Session-Id"]}
        if initialized:
            self.initialized()

    def initialized(self):
        note = Client(self.client.application).post(
            "/mcp", headers=self.headers, data=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        assert note.status_code == 202

    def call(self, name, arguments):
        return self.client.post(
            "/mcp",
            headers=self.headers,
            buffered=False,
            data=json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": next(self.ids),
                    "method": "tools/call",
                    "params": {"name": name, "arguments": arguments},
                }
            ),
        )

    def respond(self, id_, result):
        return Client(self.client.application).post(
            "/mcp", headers=self.headers, data=json.dumps({"jsonrpc": "2.0", "id": id_, "result": result})
        )


def messages(response):
    return (e for e in events(response) if e != "keep-alive")


def final_text(response):
    body = response.get_json()
    assert body is not None, response.get_data()
    return body["result"]["isError"], body["result"]["content"][0]["text"]


def test_one_form_asks_for_every_missing_argument(app):
    """A 2025-11-25 call without its four primitives asks for all of them at once, titled options as oneOf."""
    peer = Peer(app)
    stream = messages(peer.call("book", {"guests": ["Ada"]}))
    ask = next(stream)
    assert ask["method"] == "elicitation/create"
    assert ask["params"]["mode"] == "form"
    assert ask["params"]["message"] == "book needs: city, Nights, size, breakfast"
    assert ask["params"]["requestedSchema"] == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "nights": {"type": "integer", "title": "Nights", "minimum": 1, "maximum": 14},
            "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
            "breakfast": {"type": "boolean"},
        },
        "required": ["city", "nights", "size", "breakfast"],
    }
    answer = {"city": "Oslo", "nights": 2, "size": "l", "breakfast": True, "unasked": "ignored"}
    assert peer.respond(ask["id"], {"action": "accept", "content": answer}).status_code == 202
    final = next(stream)
    assert final["result"] == {
        "content": [{"type": "text", "text": "2 night(s) in Oslo, size l, breakfast True, guests ['Ada']"}],
        "isError": False,
    }
    assert BOOKED == [{"city": "Oslo", "nights": 2}]


def test_only_the_missing_ones_are_asked_and_legacy_versions_get_enum_names(app):
    """A 2025-06-18 session is asked only what is missing (blank counts), titled options as enumNames."""
    peer = Peer(app, protocol_version="2025-06-18")
    stream = messages(peer.call("book", {"city": " ", "nights": 3, "breakfast": False}))
    ask = next(stream)
    assert "mode" not in ask["params"]
    assert ask["params"]["requestedSchema"] == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"]},
        },
        "required": ["city", "size"],
    }
    peer.respond(ask["id"], {"action": "accept", "content": {"city": "Rome", "size": "s"}})
    assert next(stream)["result"]["content"][0]["text"] == "3 night(s) in Rome, size s, breakfast False, guests None"


@pytest.mark.parametrize(
    "result, text",
    [
        ({"action": "decline"}, "Error: elicit: the user declined to provide the requested information"),
        ({"action": "cancel"}, "Error: elicit: the user cancelled the request without answering"),
        (
            {"action": "accept", "content": {"city": "Oslo", "nights": 99, "size": "s", "breakfast": True}},
            "Error: elicit: malformed elicitation answer: content does not match requestedSchema at nights: "
            "99 is greater than the maximum of 14",
        ),
        (
            {"action": "accept", "content": {"city": "Oslo", "nights": 1, "size": "s", "breakfast": {"yes": 1}}},
            "Error: elicit: malformed elicitation answer: content['breakfast'] is an object; an elicitation answer's "
            "values must be strings, numbers, booleans or arrays of strings",
        ),
        (
            {"action": "accept", "content": {"city": "", "nights": 1, "size": "s", "breakfast": True}},
            "Error: elicit returned empty city",
        ),
    ],
    ids=["decline", "cancel", "out-of-range", "not-primitive", "blank"],
)
def test_failed_answers_are_typed_error_results(app, result, text):
    """Decline, cancel, malformed and blank answers end the call with ze's texts; the handler never runs."""
    peer = Peer(app)
    stream = messages(peer.call("book", {}))
    ask = next(stream)
    peer.respond(ask["id"], result)
    final = next(stream)
    assert final["result"] == {"content": [{"type": "text", "text": text}], "isError": True}
    assert BOOKED == []


def test_the_merged_arguments_are_checked_against_the_input_schema(app):
    """A keyword the form cannot carry (pattern) is checked on the merged arguments."""
    peer = Peer(app)
    stream = messages(peer.call("tag", {"where": {"x": "y"}}))
    ask = next(stream)
    assert ask["params"]["requestedSchema"]["properties"] == {"label": {"type": "string"}}
    peer.respond(ask["id"], {"action": "accept", "content": {"label": "Not Lower"}})
    assert next(stream)["result"]["content"][0]["text"] == (
        "Error: elicit: malformed elicitation answer: the answer does not fit the tool's input schema: invalid "
        "arguments for tool 'tag': argument 'label': 'Not Lower' does not match '^[a-z]+$'"
    )


def test_a_missing_argument_a_form_cannot_ask_keeps_the_old_error(app):
    """Without 'where' (an object) nothing is asked: the call gets the usual validation error."""
    peer = Peer(app)
    assert final_text(peer.call("tag", {})) == (
        True,
        "invalid arguments for tool 'tag': missing required arguments 'label', 'where'",
    )
    old = Peer(app, protocol_version="2025-06-18")
    body = old.call("tag", {"label": "x"}).get_json()
    assert body["error"]["code"] == -32602 and "missing required argument 'where'" in body["error"]["message"]


def test_invalid_given_arguments_are_refused_before_asking(app):
    """An invalid argument besides the missing ones is reported at once; nothing is asked."""
    peer = Peer(app)
    assert final_text(peer.call("book", {"guests": [1]})) == (
        True,
        "invalid arguments for tool 'book': argument 'guests' at guests[0]: 1 is not of type 'string'",
    )


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
def test_without_the_capability_the_missing_names_are_listed(app, version):
    """No elicitation capability: the deterministic isError text, in every version."""
    peer = Peer(app, protocol_version=version, capabilities={})
    assert final_text(peer.call("book", {"size": "s"})) == (
        True,
        "Error: missing required argument: city, nights, breakfast",
    )


def modern_ask(client, name, arguments, **kw):
    result = result_of(client.call(name, arguments, **kw))
    assert result["resultType"] == "input_required", result
    return result


def test_2026_07_28_asks_in_a_round_then_replays(app):
    """The missing arguments are one input request keyed by their names; the replay runs the handler."""
    client = Modern(app)
    first = modern_ask(client, "book", {"nights": 1})
    assert list(first["inputRequests"]) == ["city,size,breakfast"]
    question = first["inputRequests"]["city,size,breakfast"]
    assert question["params"]["requestedSchema"]["properties"]["size"]["oneOf"][0] == {"const": "s", "title": "Small"}
    done = result_of(
        client.call(
            "book",
            {"nights": 1},
            extra={
                "inputResponses": {
                    "city,size,breakfast": {
                        "action": "accept",
                        "content": {"city": "Bern", "size": "s", "breakfast": False},
                    }
                },
                "requestState": first["requestState"],
            },
        )
    )
    assert done["resultType"] == "complete"
    assert done["content"][0]["text"] == "1 night(s) in Bern, size s, breakfast False, guests None"
    assert BOOKED == [{"city": "Bern", "nights": 1}]


def test_2026_07_28_handler_questions_follow_the_missing_ones(app):
    """The handler's own question comes after the form, in the next round."""
    client = Modern(app)
    first = modern_ask(client, "visit", {})
    assert first["inputRequests"]["city"]["params"]["message"] == "Which city?"
    second = modern_ask(
        client,
        "visit",
        {},
        extra={
            "inputResponses": {"city": {"action": "accept", "content": {"city": "Lyon"}}},
            "requestState": first["requestState"],
        },
    )
    assert second["inputRequests"]["ok"]["params"]["message"] == "Really visit Lyon?"
    done = result_of(
        client.call(
            "visit",
            {},
            extra={
                "inputResponses": {"ok": {"action": "accept", "content": {"ok": True}}},
                "requestState": second["requestState"],
            },
        )
    )
    assert done["content"][0]["text"] == "visiting Lyon"


def test_2026_07_28_without_the_capability_lists_the_missing_names(app):
    """A request that declares no elicitation gets the same isError text (not -32021)."""
    result = result_of(Modern(app).call("visit", {}, capabilities={}))
    assert result["isError"] is True and result["content"][0]["text"] == "Error: missing required argument: city"


def test_the_per_call_timeout_ends_a_session_wait(app):
    """In a session, ctx.elicit(timeout=0.2) ends with ElicitTimeout after about 0.2 s, not elicitation_timeout."""
    peer = Peer(app)
    started = time.monotonic()
    stream = list(messages(peer.call("quick", {})))
    elapsed = time.monotonic() - started
    assert stream[0]["method"] == "elicitation/create"
    assert stream[1]["method"] == "notifications/cancelled"
    assert stream[2]["result"]["content"][0]["text"] == "timeout: no answer to the elicitation within 0.2 s"
    assert 0.15 <= elapsed < 3.0, elapsed


def test_the_per_call_timeout_does_not_bound_a_2026_07_28_round_trip(app):
    """In 2026-07-28 nothing waits: an answer later than timeout= counts while the requestState is valid."""
    client = Modern(app)
    first = modern_ask(client, "quick", {})
    time.sleep(0.5)
    done = result_of(
        client.call(
            "quick",
            {},
            extra={
                "inputResponses": {"x": {"action": "accept", "content": {"x": "late"}}},
                "requestState": first["requestState"],
            },
        )
    )
    assert done["content"][0]["text"] == "got late"


def test_questions_wait_for_notifications_initialized(app, monkeypatch):
    """A call made before notifications/initialized holds its question until the notification arrives."""
    monkeypatch.setattr(call_module, "INITIALIZED_GRACE", 5.0)
    peer = Peer(app, initialized=False)
    threading.Timer(0.3, peer.initialized).start()
    started = time.monotonic()
    stream = messages(peer.call("visit", {}))
    ask = next(stream)
    waited = time.monotonic() - started
    assert ask["params"]["message"] == "Which city?"
    assert 0.25 <= waited < 4.0, waited
    peer.respond(ask["id"], {"action": "decline"})
    assert next(stream)["result"]["isError"] is True


def test_a_client_that_never_sends_initialized_is_asked_after_the_grace(app, monkeypatch):
    """Without the notification the question goes out after the grace (with a warning), once per session."""
    monkeypatch.setattr(call_module, "INITIALIZED_GRACE", 0.3)
    peer = Peer(app, initialized=False)
    for expected_wait in (0.25, 0.0):
        started = time.monotonic()
        stream = messages(peer.call("visit", {}))
        ask = next(stream)
        waited = time.monotonic() - started
        assert expected_wait <= waited < expected_wait + 2.0, waited
        peer.respond(ask["id"], {"action": "cancel"})
        assert next(stream)["result"]["content"][0]["text"] == (
            "Error: elicit: the user cancelled the request without answering"
        )


def test_ze_execute_is_titled_in_tools_list():
    """ze_execute's title shows in tools/list from 2025-06-18."""
    import wsgi

    peer = Peer(wsgi.create_app(Settings(threads=8)))
    body = (
        Client(peer.client.application)
        .post("/mcp", headers=peer.headers, data=json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
        .get_json()
    )
    tool = {t["name"]: t for t in body["result"]["tools"]}["ze_execute"]
    assert tool["title"] == "Run a command"
