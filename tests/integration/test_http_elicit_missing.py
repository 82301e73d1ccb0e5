"""elicit_missing, ctx.elicit(timeout=...) and the wait for notifications/initialized over gunicorn.

gunicorn serves this module's ``app`` (``APP``): a tool that asks for its missing arguments
and one that elicits with a short per-call timeout. The reference server's ``ze_execute``,
which uses the same mechanism, is driven too.
"""

import threading
import time
from typing import Annotated, Literal

import zemcp
from tests.support.clients import ModernClient

APP = "tests.integration.test_http_elicit_missing:app"

server = zemcp.Server("elicit-missing-http", "1.0")


@server.tool(elicit_missing=True, title="Book a room")
def book(city: str, nights: Annotated[int, {"minimum": 1, "maximum": 14}], size: Literal["s", "l"]) -> str:
    """Book a room."""
    return f"{nights} night(s) in {city}, size {size}"


@server.tool
def quick(ctx: zemcp.Context) -> str:
    """Ask with a per-call timeout of 0.5 s."""
    try:
        answer = ctx.elicit("Quick!", {"type": "object", "properties": {"x": {"type": "string"}}}, key="x", timeout=0.5)
    except zemcp.ElicitTimeout as exc:
        return f"timeout: {exc}"
    return f"got {answer.get('x')}"


app = zemcp.McpApp(server)


def test_missing_arguments_are_asked_in_one_form_over_a_stream(start_server):
    """A 2025-11-25 session: one elicitation/create for all missing arguments, then the handler's result."""
    client = start_server(app=APP).session(protocol_version="2025-11-25")
    call = client.call_message({"nights": 2}, name="book")
    response, stream = client.open_stream(call)
    assert response.status_code == 200 and stream is not None, response.headers
    ask = stream.next_message()
    assert ask["method"] == "elicitation/create", ask
    assert ask["params"]["message"] == "Book a room needs: city, size"
    assert ask["params"]["requestedSchema"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "size": {"type": "string", "enum": ["s", "l"]}},
        "required": ["city", "size"],
    }
    assert client.accept(ask["id"], {"city": "Oslo", "size": "l"}).status_code == 202
    final = stream.next_message()
    assert final["id"] == call["id"], final
    assert final["result"] == {"content": [{"type": "text", "text": "2 night(s) in Oslo, size l"}], "isError": False}


def test_declined_and_unsupported_are_typed_error_results(start_server):
    """Decline gives ze's 'Error: elicit: ...'; a client without the capability gets the missing names."""
    gunicorn = start_server(app=APP)
    client = gunicorn.session()
    response, stream = client.open_stream(client.call_message({}, name="book"))
    ask = stream.next_message()
    assert ask["params"]["requestedSchema"]["required"] == ["city", "nights", "size"]
    client.answer(ask["id"], {"action": "decline"})
    assert stream.next_message()["result"]["content"][0]["text"] == (
        "Error: elicit: the user declined to provide the requested information"
    )
    plain = gunicorn.session(elicitation=False)
    result = plain.post(plain.call_message({"size": "s"}, name="book")).json()["result"]
    assert result == {
        "content": [{"type": "text", "text": "Error: missing required argument: city, nights"}],
        "isError": True,
    }


def test_missing_arguments_in_2026_07_28_take_a_round(start_server):
    """The stateless era asks by input_required under the names' key and completes on the retry."""
    modern = ModernClient(start_server(app=APP).url)
    first = modern.call_result({"city": "Rome"}, name="book")
    assert first["resultType"] == "input_required", first
    assert list(first["inputRequests"]) == ["nights,size"]
    done = modern.call_result(
        {"city": "Rome"},
        name="book",
        request_state=first["requestState"],
        input_responses={"nights,size": {"action": "accept", "content": {"nights": 3, "size": "s"}}},
    )
    assert done["resultType"] == "complete" and done["content"][0]["text"] == "3 night(s) in Rome, size s", done


def test_ze_execute_asks_for_its_command_in_both_eras(server):
    """ze_execute's command is asked by the mechanism: a stream in a session, a round in 2026-07-28."""
    client = server.session()
    _, _, stream, ask = client.start_elicitation()
    assert ask["params"]["message"] == "Which command would you like to run?"
    assert ask["params"]["requestedSchema"]["required"] == ["command"]
    client.accept(ask["id"], {"command": "help"})
    assert "server status" in stream.next_message()["result"]["content"][0]["text"]
    assert "session: none" in ModernClient(server.url).run_eliciting("session show")


def test_per_call_timeout_ends_the_wait_in_a_session(start_server):
    """ctx.elicit(timeout=0.5) ends in about 0.5 s with ElicitTimeout and notifications/cancelled."""
    client = start_server(app=APP, elicitation_timeout=30).session()
    started = time.monotonic()
    response, stream = client.open_stream(client.call_message({}, name="quick"))
    messages = stream.rest()
    elapsed = time.monotonic() - started
    assert [m.get("method") for m in messages[:2]] == ["elicitation/create", "notifications/cancelled"], messages
    assert messages[-1]["result"]["content"][0]["text"] == "timeout: no answer to the elicitation within 0.5 s"
    assert 0.4 <= elapsed < 5.0, elapsed


def test_per_call_timeout_does_not_bound_a_2026_07_28_round_trip(start_server):
    """No thread waits between rounds: a retry later than timeout= is served while the requestState is valid."""
    modern = ModernClient(start_server(app=APP, elicitation_timeout=30).url)
    first = modern.call_result({}, name="quick")
    assert first["resultType"] == "input_required", first
    time.sleep(1.0)
    done = modern.call_result(
        {},
        name="quick",
        request_state=first["requestState"],
        input_responses={"x": {"action": "accept", "content": {"x": "late"}}},
    )
    assert done["content"][0]["text"] == "got late", done


def _call_in_thread(client):
    """Start an eliciting ze_execute on a thread; returns (thread, box) with the time the first event arrived."""
    box = {}

    def run():
        call = client.call_message({})
        _, stream = client.open_stream(call)
        box["ask"] = stream.next_message()
        box["at"] = time.monotonic()
        box["stream"] = stream

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def test_the_question_waits_for_notifications_initialized(start_server):
    """A call made before notifications/initialized gets its elicitation/create only after the notification."""
    gunicorn = start_server()
    client = gunicorn.client()
    assert client.initialize(initialized=False).status_code == 200
    thread, box = _call_in_thread(client)
    time.sleep(0.15)
    assert "ask" not in box, "the elicitation went out before notifications/initialized"
    sent = time.monotonic()
    assert client.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
    thread.join(5)
    assert box["ask"]["method"] == "elicitation/create"
    assert box["at"] >= sent
    client.accept(box["ask"]["id"], {"command": "help"})
    assert box["stream"].next_message()["result"]["isError"] is False
    assert "sent no notifications/initialized" not in gunicorn.log()


def test_a_client_that_never_sends_initialized_is_asked_after_the_grace(start_server):
    """Without the notification the question goes out after the grace (0.5 s), and the log says why."""
    gunicorn = start_server()
    client = gunicorn.client()
    assert client.initialize(initialized=False).status_code == 200
    started = time.monotonic()
    thread, box = _call_in_thread(client)
    thread.join(5)
    assert box["ask"]["method"] == "elicitation/create"
    assert box["at"] - started >= 0.45, box["at"] - started
    client.accept(box["ask"]["id"], {"command": "help"})
    assert box["stream"].next_message()["result"]["isError"] is False
    deadline = time.monotonic() + 5
    while "sent no notifications/initialized" not in gunicorn.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "sent no notifications/initialized" in gunicorn.log()
