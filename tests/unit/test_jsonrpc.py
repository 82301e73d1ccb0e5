"""JSON-RPC 2.0 message parsing and building (zemcp.protocol.jsonrpc)."""

import json

import pytest

from zemcp.protocol import headers, identifiers, jsonrpc
from zemcp.protocol.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, ProtocolError


def parse(obj):
    return jsonrpc.parse(json.dumps(obj).encode())


def test_request_notification_response_are_told_apart():
    """A message with id and method is a request, without id a notification, without method a response."""
    assert parse({"jsonrpc": "2.0", "id": 7, "method": "ping"}) == jsonrpc.Request(7, "ping", {})
    assert parse({"jsonrpc": "2.0", "method": "notifications/initialized"}) == jsonrpc.Notification(
        "notifications/initialized", {}
    )
    answer = parse({"jsonrpc": "2.0", "id": "e1", "result": {"action": "decline"}})
    assert answer == jsonrpc.Response("e1", {"action": "decline"}, None)
    err = parse({"jsonrpc": "2.0", "id": None, "error": {"code": -1, "message": "x"}})
    assert err.error == {"code": -1, "message": "x"} and err.id is None


@pytest.mark.parametrize(
    "body, code, id_",
    [
        (b"{not json", PARSE_ERROR, None),
        (b"\xff\xfe", PARSE_ERROR, None),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', INVALID_REQUEST, None),
        (b'"hello"', INVALID_REQUEST, None),
        (b'{"id":1,"method":"ping"}', INVALID_REQUEST, 1),
        (b'{"jsonrpc":"1.0","id":"a","method":"ping"}', INVALID_REQUEST, "a"),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":3,"method":""}', INVALID_REQUEST, 3),
        (b'{"jsonrpc":"2.0","id":3,"method":"ping","params":[1]}', INVALID_PARAMS, 3),
        (b'{"jsonrpc":"2.0","id":4}', INVALID_REQUEST, 4),
        (b'{"jsonrpc":"2.0","id":4,"result":{},"error":{}}', INVALID_REQUEST, 4),
        (b'{"jsonrpc":"2.0","result":{}}', INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":5,"result":[]}', INVALID_REQUEST, 5),
    ],
)
def test_invalid_messages_raise_with_code_and_id(body, code, id_):
    """Every malformed body maps to the JSON-RPC code the spec gives, keeping a readable id."""
    with pytest.raises(ProtocolError) as info:
        jsonrpc.parse(body)
    assert info.value.code == code
    assert info.value.id == id_
    assert info.value.to_message()["error"]["code"] == code


def test_batch_error_explains_the_alternative():
    """A JSON array is refused with a message that says to send one message per POST."""
    with pytest.raises(ProtocolError) as info:
        jsonrpc.parse(b"[]")
    assert "one message per POST" in info.value.message


def test_encode_is_one_line_even_with_newlines_in_strings():
    """Encoded messages never contain a raw newline, so they fit one SSE data line."""
    data = jsonrpc.encode(jsonrpc.result(1, {"text": "a\nb\r\nc\u2028"}))
    assert b"\n" not in data and b"\r" not in data
    assert json.loads(data)["result"]["text"] == "a\nb\r\nc\u2028"


def test_builders_shape_messages():
    """Server-built messages carry jsonrpc 2.0 and the right members."""
    assert jsonrpc.request("x", "elicitation/create", {}) == {
        "jsonrpc": "2.0",
        "id": "x",
        "method": "elicitation/create",
        "params": {},
    }
    assert "id" not in jsonrpc.notification("notifications/cancelled", {})
    assert jsonrpc.error(None, -32600, "m", data={"a": 1})["error"] == {
        "code": -32600,
        "message": "m",
        "data": {"a": 1},
    }


@pytest.mark.parametrize(
    "body, text",
    [
        (b"", "the body is empty"),
        (b"  \n", "the body is empty"),
        ('{"jsonrpc":"2.0","id":1,"method":"ping"}'.encode("utf-16"), "not UTF-8"),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + b"[" * 5000 + b"]" * 5000 + b"}}",
            "nested too deeply",
        ),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}', "NaN is not valid JSON"),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-Infinity}}', "-Infinity is not valid JSON"),
        (b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}', "an integer has too many digits"),
    ],
)
def test_unusable_bodies_are_parse_errors_with_a_reason(body, text):
    """Empty, non-UTF-8, too deeply nested, NaN and huge-number bodies are -32700 saying why."""
    with pytest.raises(ProtocolError) as info:
        jsonrpc.parse(body)
    assert info.value.code == PARSE_ERROR and text in info.value.message


@pytest.mark.parametrize(
    "raw, why", [(b"null", "MCP forbids null"), (b"true", "got bool"), (b"1.5", "got float"), (b"[1]", "got list")]
)
def test_bad_request_ids_say_what_was_sent(raw, why):
    """A request id that is not a string or integer is refused, naming what arrived."""
    with pytest.raises(ProtocolError, match=why):
        jsonrpc.parse(b'{"jsonrpc":"2.0","method":"ping","id":' + raw + b"}")


def test_encode_escapes_everything_outside_ascii():
    """Lone surrogates and other non-ASCII text are escaped, so any str can be sent."""
    data = jsonrpc.encode(jsonrpc.result("\ud800", {"text": "caf\u00e9 \udc00"}))
    assert data.isascii() and json.loads(data)["result"]["text"] == "caf\u00e9 \udc00"


@pytest.mark.parametrize("value, exc", [(float("nan"), ValueError), ({1, 2}, TypeError)])
def test_encode_refuses_what_json_cannot_carry(value, exc):
    """NaN and non-JSON types raise instead of producing invalid JSON."""
    with pytest.raises(exc):
        jsonrpc.encode(jsonrpc.result(1, {"v": value}))


# -- names, URIs and ids that no name may hold (zemcp.protocol.identifiers) ----------------

#: Every (method, path into params) of a naming field; unfit values with what they hold and where.
NAMING = [(method, path) for method, paths in identifiers.FIELDS.items() for path in paths]
UNFIT = [
    ("\ud800", "a lone surrogate", 0),
    ("ok\udfff", "a lone surrogate", 2),
    ("\udc00\ud800", "a lone surrogate", 0),
    ("a\x00b", "a control character", 1),
    ("tab\there", "a control character", 3),
    ("\x85", "a control character", 0),
    ("\ufffe", "a noncharacter", 0),
    ("\ufdd0", "a noncharacter", 0),
    ("x\U0010ffff", "a noncharacter", 1),
]


def _with(path, value):
    """Params with ``value`` at ``path`` (in a list after a fit item where the path ends with "*")."""
    if path[-1] == "*":
        path, value = path[:-1], ["test://fine", value]
    params = {}
    node = params
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return params


@pytest.mark.parametrize(("method", "path"), NAMING, ids=lambda v: "/".join(v) if isinstance(v, tuple) else v)
@pytest.mark.parametrize(("value", "kind", "index"), UNFIT, ids=ascii)
def test_a_name_uri_or_task_id_that_no_name_may_hold_is_invalid_params_naming_it(method, path, value, kind, index):
    """-32602 with the request's id, naming params.<path>, what it holds and where."""
    label = "params." + ".".join(path[:-1]) + "[1]" if path[-1] == "*" else "params." + ".".join(path)
    with pytest.raises(ProtocolError) as info:
        jsonrpc.parse(json.dumps({"jsonrpc": "2.0", "id": 9, "method": method, "params": _with(path, value)}).encode())
    error = info.value
    assert error.code == INVALID_PARAMS and error.id == 9, error.message
    assert error.message.startswith(f"Invalid params: {label} holds {kind} (") and f"at index {index}" in error.message


def test_the_refusal_of_a_lone_surrogate_says_how_to_escape_a_character_beyond_the_bmp():
    with pytest.raises(ProtocolError) as info:
        parse({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "\ud83d"}})
    assert "as a pair of surrogates (\\ud83d\\ude00), never half of one" in info.value.message


@pytest.mark.parametrize(
    "text", ["echo", "caf\u00e9", "\u00e9t\u00e9 \U0001f600", "\ufffd", "\u200b", "=?base64?x?=", "a b/c?d#e"]
)
def test_unicode_text_is_any_name(text):
    """Non-ASCII, a pair of surrogate escapes (one character), U+FFFD and spaces are fine."""
    for method, path in NAMING:
        parsed = parse({"jsonrpc": "2.0", "id": 1, "method": method, "params": _with(path, text)})
        assert isinstance(parsed, jsonrpc.Request)
    paired = jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\\ud83d\\ude00"}}')
    assert paired.params["name"] == "\U0001f600"


def test_other_fields_requests_ids_and_notifications_carry_any_string():
    """Only the naming fields of requests are checked: arguments, request ids, other methods'
    fields and notifications keep lone surrogates and control characters as sent."""
    odd = "\ud800\x00\ufffe"
    call = parse(
        {"jsonrpc": "2.0", "id": odd, "method": "tools/call", "params": {"name": "e", "arguments": {"t": odd}}}
    )
    assert call.id == odd and call.params["arguments"] == {"t": odd}
    assert parse({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"clientInfo": {"name": odd}}})
    note = parse({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": odd}})
    assert note == jsonrpc.Notification("notifications/cancelled", {"requestId": odd})
    assert parse({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": ["\ud800"]}})


@pytest.mark.parametrize("value", ["\ud800", "zemcp-abc\udfff", "\x00", "\uffff"], ids=ascii)
def test_a_response_whose_id_no_id_may_hold_is_an_invalid_request_naming_the_id(value):
    """-32600 naming "id", answered with id null: no request of the server has such an id."""
    with pytest.raises(ProtocolError) as info:
        parse({"jsonrpc": "2.0", "id": value, "result": {"action": "cancel"}})
    assert info.value.code == INVALID_REQUEST and info.value.id is None
    assert info.value.message.startswith('Invalid Request: "id" holds ')


def test_every_field_mcp_name_mirrors_is_checked():
    """Mcp-Name carries these fields' values: none may reach its header check unchecked."""
    for method, field in headers.NAME_FIELDS.items():
        assert (field,) in identifiers.FIELDS[method], method
