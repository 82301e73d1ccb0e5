"""The requestedSchema subset, answer interpretation and the elicit() sequence (zemcp.protocol.elicitation)."""

import threading

import pytest

from zemcp.core.context import Context
from zemcp.eras.handshake.call import Call
from zemcp.protocol import jsonrpc
from zemcp.protocol.elicitation import (
    ClientDisconnected,
    ElicitCancelled,
    ElicitDeclined,
    ElicitMalformed,
    ElicitSchemaInvalid,
    ElicitTimeout,
    ElicitTooMany,
    ElicitUnsupported,
    RequestCancelled,
    SessionEnded,
    check_requested_schema,
    interpret_answer,
)
from zemcp.replies.sinks import ReplySink
from zemcp.state.correlation import CorrelationTable
from zemcp.state.session import Session

GOOD = [
    {"type": "object", "properties": {"name": {"type": "string"}}},
    {
        "type": "object",
        "title": "t",
        "description": "d",
        "required": ["a"],
        "properties": {
            "a": {
                "type": "string",
                "title": "A",
                "description": "x",
                "minLength": 1,
                "maxLength": 9,
                "format": "email",
                "default": "a@b.c",
            },
            "b": {"type": "string", "enum": ["x", "y"], "enumNames": ["X", "Y"]},
            "c": {"type": "number", "minimum": 0, "maximum": 1.5, "default": 1},
            "d": {"type": "integer", "minimum": 1},
            "e": {"type": "boolean", "default": True},
            "f": {"type": "string", "format": "date-time"},
        },
    },
]

BAD = [
    (None, "<root>"),
    ({"type": "array", "properties": {"a": {"type": "string"}}}, "type"),
    ({"type": "object"}, "<root>"),
    ({"type": "object", "properties": {}}, "properties"),
    ({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}, "properties.a.type"),
    ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}, "properties.a.type"),
    ({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", ""]}}}, "properties.a.enum.1"),
    ({"type": "object", "properties": {"a": {"type": "string", "enum": []}}}, "properties.a.enum"),
    ({"type": "object", "properties": {"a": {"type": "number", "enum": [1]}}}, "properties.a"),
    ({"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}}, "properties.a.format"),
    ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, "properties.a"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": []}, "<root>"),
    ({"type": "object", "properties": {"a": {"type": "string", "anyOf": []}}}, "properties.a"),
    ({"type": "object", "properties": {"a": {"type": "boolean", "default": "yes"}}}, "properties.a.default"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}, "required"),
    (
        {"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "enumNames": ["X", "Y"]}}},
        "properties.a.enumNames",
    ),
]


@pytest.mark.parametrize("schema", GOOD)
def test_subset_accepts_flat_primitive_schemas(schema):
    """Flat objects of string/number/integer/boolean with the allowed keywords pass."""
    check_requested_schema(schema)


@pytest.mark.parametrize("schema, path", BAD)
def test_subset_refuses_with_the_path_of_the_problem(schema, path):
    """Nesting, arrays, combinators, $ref, bad enums and formats are refused, naming where."""
    with pytest.raises(ElicitSchemaInvalid) as info:
        check_requested_schema(schema)
    assert info.value.path == path
    assert str(info.value).startswith(f"requestedSchema is invalid at {path}: ")


SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 1}, "e": {"type": "string", "format": "email"}},
    "required": ["n"],
}


def answer(result=None, error=None):
    return jsonrpc.Response("zemcp-1", result, error)


def test_accept_returns_validated_content():
    """accept with matching content returns the content."""
    assert interpret_answer(answer({"action": "accept", "content": {"n": 2}}), SCHEMA) == {"n": 2}


@pytest.mark.parametrize(
    "response, exc, text",
    [
        (answer({"action": "decline"}), ElicitDeclined, "declined"),
        (answer({"action": "cancel"}), ElicitCancelled, "cancelled"),
        (answer(error={"code": -32603, "message": "boom"}), ElicitCancelled, "boom"),
        (answer({"action": "maybe"}), ElicitMalformed, "action must be accept, decline or cancel, got 'maybe'"),
        (answer({}), ElicitMalformed, "the answer has no action"),
        (answer({"action": "accept", "content": [1]}), ElicitMalformed, "content must be a JSON object, got list"),
        (answer({"action": "accept", "content": {"n": 0}}), ElicitMalformed, "at n"),
        (answer({"action": "accept"}), ElicitMalformed, "'n' is a required property"),
        (answer({"action": "accept", "content": {"n": 1, "e": "nope"}}), ElicitMalformed, "at e"),
    ],
)
def test_other_answers_raise_their_exception(response, exc, text):
    """decline, cancel, error answers and unusable content each raise a specific exception."""
    with pytest.raises(exc, match=text):
        interpret_answer(response, SCHEMA)


def new_call(capabilities, table):
    """A handshake-era call of a fresh 2025-06-18 session that asks through ``table``."""
    return Call(Session("2025-06-18", {}, capabilities), 1, ReplySink(), None, table)


def elicit(call, timeout, message, schema):
    """``ctx.elicit`` of a handler running as ``call``, waiting at most ``timeout`` seconds."""
    call.timeout = timeout
    return Context(call).elicit(message, schema)


ASK = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}


def run_elicit(call, timeout=5.0):
    box = {}

    def target():
        try:
            box["value"] = elicit(call, timeout, "Which?", ASK)
        except Exception as exc:  # handed to the test thread
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread, box


def first_frame(sink):
    streaming, _ = sink.first()
    assert streaming
    return next(sink.frames(5))


def test_elicit_sends_request_and_returns_answer():
    """elicit() sends elicitation/create on the sink and returns the resolved answer's content."""
    table = CorrelationTable(10, 10)
    call = new_call({"elicitation": {}}, table)
    thread, box = run_elicit(call)
    frame = first_frame(call.sink)
    assert frame["method"] == "elicitation/create" and isinstance(frame["id"], str)
    assert frame["params"] == {"message": "Which?", "requestedSchema": ASK}
    assert table.resolve(
        call.session.id, jsonrpc.Response(frame["id"], {"action": "accept", "content": {"command": "x"}}, None)
    )
    thread.join(5)
    assert box == {"value": {"command": "x"}}
    assert table.count() == 0


def test_elicit_without_capability_sends_nothing():
    """Without the capability elicit() raises ElicitUnsupported and the reply stays plain JSON."""
    table = CorrelationTable(10, 10)
    call = new_call({}, table)
    with pytest.raises(ElicitUnsupported, match="did not declare the elicitation capability"):
        elicit(call, 5, "Which?", ASK)
    call.sink.finish({"done": True})
    assert call.sink.first() == (False, {"done": True})


def test_elicit_with_bad_schema_sends_nothing():
    """A schema outside the subset raises before anything is sent or registered."""
    table = CorrelationTable(10, 10)
    call = new_call({"elicitation": {}}, table)
    with pytest.raises(ElicitSchemaInvalid):
        elicit(call, 5, "Which?", {"type": "object", "properties": {"a": {"type": "object"}}})
    assert table.count() == 0
    call.sink.finish(None)
    assert call.sink.first() == (False, None)


def test_elicit_over_cap_raises_too_many():
    """A full per-session table raises ElicitTooMany at once."""
    table = CorrelationTable(10, 1)
    call = new_call({"elicitation": {}}, table)
    table.register(call.session, call)
    with pytest.raises(ElicitTooMany, match="per-session cap"):
        elicit(call, 5, "Which?", ASK)


def test_elicit_timeout_withdraws_the_request():
    """No answer within the timeout: notifications/cancelled for the request, then ElicitTimeout."""
    table = CorrelationTable(10, 10)
    call = new_call({"elicitation": {}}, table)
    thread, box = run_elicit(call, timeout=0.2)
    frame = first_frame(call.sink)
    thread.join(5)
    assert isinstance(box["error"], ElicitTimeout)
    withdrawn = next(call.sink.frames(5))
    assert withdrawn["method"] == "notifications/cancelled"
    assert withdrawn["params"]["requestId"] == frame["id"]
    assert table.count() == 0


@pytest.mark.parametrize("reason", [RequestCancelled(), SessionEnded("expired"), ClientDisconnected()])
def test_ending_a_call_wakes_its_waiter_with_the_reason(reason):
    """Cancel, session end and disconnect end the wait with their own exception."""
    table = CorrelationTable(10, 10)
    call = new_call({"elicitation": {}}, table)
    thread, box = run_elicit(call)
    first_frame(call.sink)
    assert table.end_call(call, reason) == 1
    thread.join(5)
    assert box["error"] is reason
    assert table.count() == 0


def test_aborted_call_cannot_elicit():
    """A call already aborted raises its reason instead of sending a request."""
    table = CorrelationTable(10, 10)
    call = new_call({"elicitation": {}}, table)
    call.aborted = RequestCancelled()
    with pytest.raises(RequestCancelled):
        elicit(call, 5, "Which?", ASK)
    assert table.count() == 0


@pytest.mark.parametrize(
    "fmt, bad, good",
    [
        ("email", "nobody", "a@b.example"),
        ("uri", "not a uri", "https://example.com/x"),
        ("date", "2026-13-40", "2026-11-30"),
        ("date-time", "yesterday", "2026-11-30T12:00:00Z"),
    ],
)
def test_every_format_of_the_subset_is_checked(fmt, bad, good):
    """Accepted content is checked against each format the subset allows."""
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}}}
    assert interpret_answer(answer({"action": "accept", "content": {"v": good}}), schema) == {"v": good}
    with pytest.raises(ElicitMalformed, match=f"is not a '{fmt}'"):
        interpret_answer(answer({"action": "accept", "content": {"v": bad}}), schema)


GOOD_1125 = [
    {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    },
    {
        "type": "object",
        "properties": {
            "titledSingle": {"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
            "legacy": {"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]},
            "untitledMulti": {
                "type": "array",
                "minItems": 1,
                "maxItems": 2,
                "items": {"type": "string", "enum": ["x", "y"]},
                "default": ["x"],
            },
            "titledMulti": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}]}},
        },
    },
]


@pytest.mark.parametrize("schema", GOOD_1125)
def test_2025_11_25_subset_adds_titled_and_multi_select(schema):
    """2025-11-25 sessions may send defaults, oneOf titled enums, multi-select arrays and $schema."""
    check_requested_schema(schema, "2025-11-25")


@pytest.mark.parametrize("schema", GOOD_1125)
def test_2025_06_18_keeps_the_stricter_subset(schema):
    """The same schemas are refused for a 2025-06-18 session."""
    with pytest.raises(ElicitSchemaInvalid):
        check_requested_schema(schema, "2025-06-18")


@pytest.mark.parametrize(
    "schema, path",
    [
        (
            {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}},
            "properties.a.items.type",
        ),
        ({"type": "object", "properties": {"a": {"type": "array"}}}, "properties.a"),
        (
            {"type": "object", "properties": {"a": {"type": "string", "oneOf": [{"const": "x"}]}}},
            "properties.a.oneOf.0",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "default": "y"}}},
            "properties.a.default",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "array", "items": {"type": "string", "enum": ["x"]}, "default": "x"}},
            },
            "properties.a.default",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "array", "items": {"type": "string", "enum": ["x"]}, "default": ["zzz"]}},
            },
            "properties.a.default",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}]}, "default": ["y"]}
                },
            },
            "properties.a.default",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "oneOf": [{"const": "x", "title": "X"}], "default": "y"}},
            },
            "properties.a.default",
        ),
    ],
)
def test_2025_11_25_subset_still_refuses_what_is_outside(schema, path):
    """Arrays need string options, titled options need titles, defaults must fit."""
    with pytest.raises(ElicitSchemaInvalid) as info:
        check_requested_schema(schema, "2025-11-25")
    assert info.value.path == path


def test_a_schema_that_passed_is_checked_again_once_it_changes():
    """Passing schemas are remembered by their JSON text: the same dict edited into a bad
    schema is refused, and a bad schema is refused every time it is passed."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    check_requested_schema(schema)
    check_requested_schema(schema)
    schema["properties"]["name"] = {"type": "object"}
    for _ in range(2):
        with pytest.raises(ElicitSchemaInvalid) as info:
            check_requested_schema(schema)
        assert info.value.path == "properties.name.type"


def test_answers_are_validated_against_the_schema_sent_also_when_it_changes():
    """The remembered content validator belongs to one schema text, never to another schema."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert interpret_answer(answer({"action": "accept", "content": {"n": 1}}), schema) == {"n": 1}
    schema["properties"]["n"] = {"type": "string"}
    with pytest.raises(ElicitMalformed, match="at n: 1 is not of type 'string'"):
        interpret_answer(answer({"action": "accept", "content": {"n": 1}}), schema)
