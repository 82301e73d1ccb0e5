"""JSON-RPC and HTTP-level refusals of a POST: parse errors, bad messages, media types, body size."""

import json
import socket
import time

import pytest
import requests

from tests.support.clients import HandshakeClient, ModernClient
from tests.support.net import READ_TIMEOUT

ONE_MIB = 1024 * 1024


def _error(response, status):
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "error" in body and "result" not in body, body
    return body


@pytest.mark.parametrize(
    "data",
    [b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', b"", b"\xff\xfe{}", b"{'id': 1}"],
    ids=["truncated", "empty", "not-utf8", "single-quotes"],
)
def test_bad_json_is_400_parse_error(client, data):
    """A body that is not JSON gets 400 with -32700."""
    body = _error(client.post(data=data), 400)
    assert body["error"]["code"] == -32700
    assert body["id"] is None


def test_json_array_is_400_invalid_request(client):
    """A JSON array (batch) gets 400 with -32600."""
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
    body = _error(client.post(batch), 400)
    assert body["error"]["code"] == -32600


@pytest.mark.parametrize(
    "message, expected_id",
    [
        ({"jsonrpc": "1.0", "id": 7, "method": "ping"}, 7),
        ({"id": 8, "method": "ping"}, 8),
        ({"jsonrpc": "2.0", "id": 9}, 9),
        ("ping", None),
        (42, None),
    ],
    ids=["jsonrpc-1.0", "no-jsonrpc", "neither-method-nor-result", "json-string", "json-number"],
)
def test_not_json_rpc_is_invalid_request(client, message, expected_id):
    """JSON that is not one JSON-RPC 2.0 message gets -32600, with the id when it has one."""
    response = client.post(message)
    assert response.status_code in (200, 400), response.text
    body = _error(response, response.status_code)
    assert body["error"]["code"] == -32600
    assert body["id"] == expected_id


def test_unknown_method_is_method_not_found_with_id(client):
    """An unknown method gets -32601 echoing the request id."""
    response = client.post({"jsonrpc": "2.0", "id": "req-17", "method": "no/such/method"})
    assert response.status_code in (200, 400), response.text
    body = _error(response, response.status_code)
    assert body["error"]["code"] == -32601
    assert body["id"] == "req-17"


def test_unknown_tool_is_invalid_params_with_id(client):
    """tools/call of an unknown tool gets -32602 echoing the request id."""
    message = {"jsonrpc": "2.0", "id": 31, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}}
    response = client.post(message)
    assert response.status_code in (200, 400), response.text
    body = _error(response, response.status_code)
    assert body["error"]["code"] == -32602
    assert body["id"] == 31


@pytest.mark.parametrize(
    "params",
    [
        {"name": "ze_execute", "arguments": {"command": 5}},
        {"name": "ze_execute", "arguments": "server status"},
        {"arguments": {}},
        ["ze_execute"],
    ],
    ids=["argument-wrong-type", "arguments-not-object", "no-name", "params-not-object"],
)
def test_bad_params_are_invalid_params_with_id(client, params):
    """Bad tools/call params get -32602 echoing the request id."""
    response = client.post({"jsonrpc": "2.0", "id": 44, "method": "tools/call", "params": params})
    assert response.status_code in (200, 400), response.text
    body = _error(response, response.status_code)
    assert body["error"]["code"] == -32602
    assert body["id"] == 44


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_wrong_content_type_is_415(client, content_type):
    """A POST whose Content-Type is not application/json gets 415."""
    response = client.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Content-Type": content_type})
    assert response.status_code == 415, response.text


def test_json_content_type_with_charset_is_accepted(client):
    """Content-Type application/json with a charset parameter is accepted."""
    response = client.post(
        {"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["result"] == {}


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", "text/html", None])
def test_accept_lacking_a_type_is_406(client, accept):
    """An Accept header lacking application/json or text/event-stream gets 406."""
    response = client.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Accept": accept})
    assert response.status_code == 406, response.text


def _padded_ping(size):
    """A valid ping message of exactly ``size`` bytes (padded with spaces)."""
    raw = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    return raw + b" " * (size - len(raw))


def _chunks(data, size=1000):
    for start in range(0, len(data), size):
        yield data[start : start + size]


def test_body_over_default_limit_with_content_length_is_413(client):
    """A body over the default 1 MiB limit sent with Content-Length gets 413."""
    response = client.post(data=_padded_ping(ONE_MIB + 1))
    assert response.status_code == 413, response.text


def test_body_over_default_limit_chunked_is_413(client):
    """A body over the default 1 MiB limit sent chunked gets 413."""
    response = client.post(data=_chunks(_padded_ping(ONE_MIB + 1), 65536))
    assert response.status_code == 413, response.text


def test_body_of_exactly_default_limit_is_accepted(client):
    """A body of exactly 1 MiB is accepted."""
    response = client.post(data=_padded_ping(ONE_MIB))
    assert response.status_code == 200, response.text
    assert response.json()["result"] == {}


def test_body_limit_setting_applies_to_length_and_chunked_bodies(start_server):
    """ZEMCP_MAX_BODY_BYTES bounds bodies: over it 413 (Content-Length or chunked), at it accepted."""
    server = start_server(max_body_bytes=2048)
    client = server.session()
    assert client.post(data=_padded_ping(2049)).status_code == 413
    assert client.post(data=_chunks(_padded_ping(2049), 500)).status_code == 413
    assert client.post(data=_chunks(_padded_ping(4096), 500)).status_code == 413
    at_limit = client.post(data=_padded_ping(2048))
    assert at_limit.status_code == 200 and at_limit.json()["result"] == {}, at_limit.text
    chunked_at_limit = client.post(data=_chunks(_padded_ping(2048), 500))
    assert chunked_at_limit.status_code == 200 and chunked_at_limit.json()["result"] == {}, chunked_at_limit.text


@pytest.mark.parametrize(
    "framing, first_bytes",
    [
        ("Content-Length: 1000", b"{"),
        ("Transfer-Encoding: chunked", b"1\r\n{\r\n"),
    ],
)
def test_stalled_body_is_408_and_frees_the_thread(start_server, framing, first_bytes):
    """A body that stops arriving gets 408 after ZEMCP_BODY_TIMEOUT, so it cannot pin a thread."""
    import socket
    import time

    server = start_server(body_timeout=1, threads=3)
    stalled = []
    for _ in range(3):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.sendall(
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\n{framing}\r\n\r\n".encode()
            + first_bytes
        )
        stalled.append(s)
    try:
        started = time.monotonic()
        for s in stalled:
            answer = b""
            while b"ZEMCP_BODY_TIMEOUT" not in answer and len(answer) < 4096:
                chunk = s.recv(4096)
                if not chunk:
                    break
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert b"ZEMCP_BODY_TIMEOUT" in answer
        assert time.monotonic() - started < 8
        # Every thread was held by a stalled body; all are free again.
        fresh = HandshakeClient(server.url)
        fresh.initialize()
        assert fresh.post({"jsonrpc": "2.0", "id": fresh.new_id(), "method": "ping"}).json()["result"] == {}
    finally:
        for s in stalled:
            s.close()


@pytest.mark.parametrize(
    "name", [{"tool": "ze_execute"}, [1], [], 7, None], ids=["object", "list", "empty-list", "number", "null"]
)
def test_a_modern_tools_call_whose_name_is_no_string_is_invalid_params(server, name):
    """2026-07-28: a tools/call whose params.name is not a string gets 400 -32602 naming it, never a 500."""
    modern = ModernClient(server.url)
    message = modern.message("tools/call", {"name": name, "arguments": {}})
    # The standard headers of a body without a string name: no Mcp-Name (the body's own check answers).
    headers = modern.headers({"method": "resources/list"}) | {"Mcp-Method": "tools/call"}
    response = requests.post(server.url, data=json.dumps(message), headers=headers, timeout=READ_TIMEOUT)
    body = _error(response, 400)
    assert body["error"]["code"] == -32602 and body["id"] == message["id"], body
    assert "name" in body["error"]["message"], body
    assert "Traceback" not in server.log()


def _raw_exchange(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Send ``data`` on one connection, then read until the server closes it (or ``timeout``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        received = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                return received
            received += chunk
    raise AssertionError(f"the connection stayed open after: {received[:500]!r}")


def _raw_post(body: bytes, framing: str = "") -> bytes:
    framing = framing or f"Content-Length: {len(body)}"
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n{framing}\r\n\r\n"
    )
    return head.encode() + body


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_body_over_the_limit_is_413_connection_close(start_server, framing):
    """413 says Connection: close and the connection closes: the request the client sent next
    on it is not silently lost after a response that promised keep-alive."""
    server = start_server(max_body_bytes=2048)
    big = _padded_ping(64 * 1024)
    if framing == "chunked":
        first = _raw_post(
            b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in _chunks(big, 4096)) + b"0\r\n\r\n",
            "Transfer-Encoding: chunked",
        )
    else:
        first = _raw_post(big)
    received = _raw_exchange(server.port, first + _raw_post(_padded_ping(100)))
    head = received.split(b"\r\n\r\n", 1)[0].lower()
    assert head.startswith(b"http/1.1 413") and b"\r\nconnection: close" in head, received[:500]
    assert received.count(b"HTTP/1.1 ") == 1, received


def test_a_refusal_before_the_body_closes_and_a_plain_request_keeps_the_connection(server):
    """A 415 leaves its body unread: Connection: close. Two pings on one connection are both answered."""
    refused = _raw_exchange(
        server.port, _raw_post(_padded_ping(100)).replace(b"application/json\r\nAccept", b"text/plain\r\nAccept")
    )
    assert refused.startswith(b"HTTP/1.1 415") and b"\r\nconnection: close" in refused.split(b"\r\n\r\n")[0].lower()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        # Without a session the ping is a 2026-07-28 request without its envelope: 400, kept alive.
        s.sendall(_raw_post(_padded_ping(100)) * 2)
        received = b""
        while received.count(b"HTTP/1.1 400") < 2:
            chunk = s.recv(65536)
            assert chunk, received
            received += chunk
        assert b"connection: close" not in received.lower(), received
