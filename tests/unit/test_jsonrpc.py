"""JSON-RPC 2.0 message parsing and building (zemcp.jsonrpc)."""

import json

import pytest

from zemcp import jsonrpc
from zemcp.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, ProtocolError


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
        "jsonrpc": "2.0", "id": "x", "method": "elicitation/create", "params": {}
    }
    assert "id" not in jsonrpc.notification("notifications/cancelled", {})
    assert jsonrpc.error(None, -32600, "m", data={"a": 1})["error"] == {"code": -32600, "message": "m", "data": {"a": 1}}
