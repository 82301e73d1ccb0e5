"""elicit_missing, ctx.elicit(timeout=...) and the wait for notifications/initialized, in-process.

A session (2025-06-18 and 2025-11-25) and 2026-07-28 requests, over werkzeug's test client;
the same rules over real HTTP under gunicorn are in tests/integration/test_http_elicit_missing.py.
"""

import threading
import time
from typing import Annotated, Literal

import pytest

import zemcp
from tests.support.clients import LATEST_VERSION, inprocess_modern, inprocess_session
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


def session(app, protocol_version=LATEST_VERSION, **options):
    """A session over werkzeug's test client (2025-11-25 unless said otherwise); ``options`` as
    for ``inprocess_session`` (``initialized=False`` leaves notifications/initialized unsent)."""
    return inprocess_session(app, protocol_version=protocol_version, **options)


def final_text(response):
    body = response.get_json()
    assert body is not None, response.get_data()
    return body["result"]["isError"], body["result"]["content"][0]["text"]


def test_one_form_asks_for_every_missing_argument(app):
    """A 2025-11-25 call without its four primitives asks for all of them at once, titled options as oneOf."""
    peer = session(app)
    stream = peer.open_call("book", {"guests": ["Ada"]})[2]
    ask = stream.next_message()
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
    assert peer.answer(ask["id"], {"action": "accept", "content": answer}).status_code == 202
    final = stream.next_message()
    assert final["result"] == {
        "content": [{"type": "text", "text": "2 night(s) in Oslo, size l, breakfast True, guests ['Ada']"}],
        "isError": False,
    }
    assert BOOKED == [{"city": "Oslo", "nights": 2}]


def test_only_the_missing_ones_are_asked_and_legacy_versions_get_enum_names(app):
    """A 2025-06-18 session is asked only what is missing (blank counts), titled options as enumNames."""
    peer = session(app, protocol_version="2025-06-18")
    stream = peer.open_call("book", {"city": " ", "nights": 3, "breakfast": False})[2]
    ask = stream.next_message()
    assert "mode" not in ask["params"]
    assert ask["params"]["requestedSchema"] == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"]},
        },
        "required": ["city", "size"],
    }
    peer.answer(ask["id"], {"action": "accept", "content": {"city": "Rome", "size": "s"}})
    assert (
        stream.next_message()["result"]["content"][0]["text"]
        == "3 night(s) in Rome, size s, breakfast False, guests None"
    )


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
    peer = session(app)
    stream = peer.open_call("book", {})[2]
    ask = stream.next_message()
    peer.answer(ask["id"], result)
    final = stream.next_message()
    assert final["result"] == {"content": [{"type": "text", "text": text}], "isError": True}
    assert BOOKED == []


def test_the_merged_arguments_are_checked_against_the_input_schema(app):
    """A keyword the form cannot carry (pattern) is checked on the merged arguments."""
    peer = session(app)
    stream = peer.open_call("tag", {"where": {"x": "y"}})[2]
    ask = stream.next_message()
    assert ask["params"]["requestedSchema"]["properties"] == {"label": {"type": "string"}}
    peer.answer(ask["id"], {"action": "accept", "content": {"label": "Not Lower"}})
    assert stream.next_message()["result"]["content"][0]["text"] == (
        "Error: elicit: malformed elicitation answer: the answer does not fit the tool's input schema: invalid "
        "arguments for tool 'tag': argument 'label': 'Not Lower' does not match '^[a-z]+$'"
    )


def test_a_missing_argument_a_form_cannot_ask_keeps_the_old_error(app):
    """Without 'where' (an object) nothing is asked: the call gets the usual validation error."""
    peer = session(app)
    assert final_text(peer.call_tool("tag", {})[1]) == (
        True,
        "invalid arguments for tool 'tag': missing required arguments 'label', 'where'",
    )
    old = session(app, protocol_version="2025-06-18")
    body = old.call_tool("tag", {"label": "x"})[1].get_json()
    assert body["error"]["code"] == -32602 and "missing required argument 'where'" in body["error"]["message"]


def test_invalid_given_arguments_are_refused_before_asking(app):
    """An invalid argument besides the missing ones is reported at once; nothing is asked."""
    peer = session(app)
    assert final_text(peer.call_tool("book", {"guests": [1]})[1]) == (
        True,
        "invalid arguments for tool 'book': argument 'guests' at guests[0]: 1 is not of type 'string'",
    )


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
def test_without_the_capability_the_missing_names_are_listed(app, version):
    """No elicitation capability: the deterministic isError text, in every version."""
    peer = session(app, protocol_version=version, capabilities={})
    assert final_text(peer.call_tool("book", {"size": "s"})[1]) == (
        True,
        "Error: missing required argument: city, nights, breakfast",
    )


def modern_ask(client, name, arguments, **kw):
    result = client.result(client.call_tool(name, arguments, **kw)[1])
    assert result["resultType"] == "input_required", result
    return result


def test_2026_07_28_asks_in_a_round_then_replays(app):
    """The missing arguments are one input request keyed by their names; the replay runs the handler."""
    client = inprocess_modern(app)
    first = modern_ask(client, "book", {"nights": 1})
    assert list(first["inputRequests"]) == ["city,size,breakfast"]
    question = first["inputRequests"]["city,size,breakfast"]
    assert question["params"]["requestedSchema"]["properties"]["size"]["oneOf"][0] == {"const": "s", "title": "Small"}
    done = client.result(
        client.call_tool(
            "book",
            {"nights": 1},
            input_responses={
                "city,size,breakfast": {
                    "action": "accept",
                    "content": {"city": "Bern", "size": "s", "breakfast": False},
                }
            },
            request_state=first["requestState"],
        )[1]
    )
    assert done["resultType"] == "complete"
    assert done["content"][0]["text"] == "1 night(s) in Bern, size s, breakfast False, guests None"
    assert BOOKED == [{"city": "Bern", "nights": 1}]


def test_2026_07_28_handler_questions_follow_the_missing_ones(app):
    """The handler's own question comes after the form, in the next round."""
    client = inprocess_modern(app)
    first = modern_ask(client, "visit", {})
    assert first["inputRequests"]["city"]["params"]["message"] == "Which city?"
    second = modern_ask(
        client,
        "visit",
        {},
        input_responses={"city": {"action": "accept", "content": {"city": "Lyon"}}},
        request_state=first["requestState"],
    )
    assert second["inputRequests"]["ok"]["params"]["message"] == "Really visit Lyon?"
    done = client.result(
        client.call_tool(
            "visit",
            {},
            input_responses={"ok": {"action": "accept", "content": {"ok": True}}},
            request_state=second["requestState"],
        )[1]
    )
    assert done["content"][0]["text"] == "visiting Lyon"


def test_2026_07_28_without_the_capability_lists_the_missing_names(app):
    """A request that declares no elicitation gets the same isError text (not -32021)."""
    client = inprocess_modern(app)
    result = client.result(client.call_tool("visit", {}, capabilities={})[1])
    assert result["isError"] is True and result["content"][0]["text"] == "Error: missing required argument: city"


def test_the_per_call_timeout_ends_a_session_wait(app):
    """In a session, ctx.elicit(timeout=0.2) ends with ElicitTimeout after about 0.2 s, not elicitation_timeout."""
    peer = session(app)
    started = time.monotonic()
    stream = peer.open_call("quick", {})[2].rest()
    elapsed = time.monotonic() - started
    assert stream[0]["method"] == "elicitation/create"
    assert stream[1]["method"] == "notifications/cancelled"
    assert stream[2]["result"]["content"][0]["text"] == "timeout: no answer to the elicitation within 0.2 s"
    assert 0.15 <= elapsed < 3.0, elapsed


def test_the_per_call_timeout_does_not_bound_a_2026_07_28_round_trip(app):
    """In 2026-07-28 nothing waits: an answer later than timeout= counts while the requestState is valid."""
    client = inprocess_modern(app)
    first = modern_ask(client, "quick", {})
    time.sleep(0.5)
    done = client.result(
        client.call_tool(
            "quick",
            {},
            input_responses={"x": {"action": "accept", "content": {"x": "late"}}},
            request_state=first["requestState"],
        )[1]
    )
    assert done["content"][0]["text"] == "got late"


def test_questions_wait_for_notifications_initialized(app, monkeypatch):
    """A call made before notifications/initialized holds its question until the notification arrives."""
    monkeypatch.setattr(call_module, "INITIALIZED_GRACE", 5.0)
    peer = session(app, initialized=False)
    threading.Timer(0.3, peer.notify_initialized).start()
    started = time.monotonic()
    stream = peer.open_call("visit", {})[2]
    ask = stream.next_message()
    waited = time.monotonic() - started
    assert ask["params"]["message"] == "Which city?"
    assert 0.25 <= waited < 4.0, waited
    peer.answer(ask["id"], {"action": "decline"})
    assert stream.next_message()["result"]["isError"] is True


def test_a_client_that_never_sends_initialized_is_asked_after_the_grace(app, monkeypatch):
    """Without the notification the question goes out after the grace (with a warning), once per session."""
    monkeypatch.setattr(call_module, "INITIALIZED_GRACE", 0.3)
    peer = session(app, initialized=False)
    for expected_wait in (0.25, 0.0):
        started = time.monotonic()
        stream = peer.open_call("visit", {})[2]
        ask = stream.next_message()
        waited = time.monotonic() - started
        assert expected_wait <= waited < expected_wait + 2.0, waited
        peer.answer(ask["id"], {"action": "cancel"})
        assert stream.next_message()["result"]["content"][0]["text"] == (
            "Error: elicit: the user cancelled the request without answering"
        )


def test_ze_execute_is_titled_in_tools_list():
    """ze_execute's title shows in tools/list from 2025-06-18."""
    import wsgi

    peer = session(wsgi.create_app(Settings(threads=8)))
    body = peer.request("tools/list").get_json()
    tool = {t["name"]: t for t in body["result"]["tools"]}["ze_execute"]
    assert tool["title"] == "Run a command"
