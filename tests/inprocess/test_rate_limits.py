"""Rate limits in the HTTP transport, driven in-process through werkzeug's test client: what
takes a token and what never does, in both eras, the refusal, per-tool buckets, clients
told apart, the settings' checks, and Redis trouble. The same over real gunicorn workers is
tests/integration/test_http_rate_limits.py."""

from __future__ import annotations

from typing import Any

import pytest

import zemcp
from tests.apps import rated
from tests.support.clients import HandshakeClient, ModernClient
from tests.support.net import free_port
from tests.support.wires import InProcessWire
from zemcp import Settings


def make_app(**settings: Any) -> zemcp.McpApp:
    return zemcp.McpApp(rated.make_server(**settings))


def session(app: zemcp.McpApp) -> HandshakeClient:
    """A handshake-era client of ``app`` (not yet initialized)."""
    return HandshakeClient(InProcessWire(app, remote_addr="127.0.0.1"), "rates", "1")


def modern(app: zemcp.McpApp, address: str = "127.0.0.1") -> ModernClient:
    """A 2026-07-28 client of ``app`` declaring no capabilities, from client address ``address``."""
    return ModernClient(InProcessWire(app, remote_addr=address), "rates", "1", capabilities={})


def assert_refused(response, request_id, limit: str, scope: str, setting: str) -> int:
    """A 429 with Retry-After and the JSON-RPC error of the rate limit; returns the Retry-After."""
    assert response.status_code == 429, (response.status_code, response.get_data(as_text=True))
    retry_after = int(response.headers["Retry-After"])
    assert retry_after >= 1
    body = response.get_json()
    assert body["id"] == request_id and body["error"]["code"] == -32603, body
    assert body["error"]["data"] == {"limit": limit, "retryAfter": retry_after, "scope": scope}, body
    message = body["error"]["message"]
    assert message.startswith("Too Many Requests: this client's rate limit") and f"({limit}, {setting})" in message
    assert message.endswith(f"is used up; retry after {retry_after} s"), message
    return retry_after


def test_without_a_setting_nothing_is_limited():
    client = modern(make_app())
    assert all(client.call_tool("hello")[1].status_code == 200 for _ in range(30))


def test_requests_take_tokens_and_answers_notifications_pings_gets_and_deletes_never_do():
    peer = session(make_app(rate_limit="2/hour"))
    initialized = peer.initialize(capabilities={}, initialized=False)  # the first token
    assert initialized.status_code == 200, initialized.get_data(as_text=True)
    assert peer.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
    assert peer.call_tool("hello")[1].status_code == 200  # the second
    refused = peer.call_tool("hello")[1]
    assert assert_refused(refused, 3, "2/hour", "client", "ZEMCP_RATE_LIMIT") > 1700
    for _ in range(5):
        assert peer.request("ping", {}).status_code == 200
    # An answer nobody waits for is a 400, never a 429; a cancellation is taken in.
    answer = peer.post({"jsonrpc": "2.0", "id": "zemcp-x", "result": {"action": "accept", "content": {}}})
    assert answer.status_code == 400, answer.get_data(as_text=True)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    assert peer.post(cancel).status_code == 202
    assert peer.wire.raw("GET", headers={"Accept": "text/event-stream"}).status_code == 405
    # Still no token: a refused request gave none back and took none.
    assert peer.call_tool("hello")[1].status_code == 429
    assert peer.delete().status_code == 204


def test_the_2026_era_is_limited_with_the_requests_id():
    client = modern(make_app(rate_limit="3/minute"))
    for _ in range(3):
        assert client.call_tool("hello")[1].status_code == 200
    request_id, refused = client.call_tool("hello")
    assert 15 <= assert_refused(refused, request_id, "3/minute", "client", "ZEMCP_RATE_LIMIT") <= 20


def test_a_tool_with_a_limit_takes_from_its_bucket_and_the_clients():
    client = modern(make_app(rate_limit="5/hour", rate_limit_tools="search=1/hour,report=100/hour"))
    # report's own rate_limit (2/minute) wins over its entry in the setting.
    assert [client.call_tool("report")[1].status_code for _ in range(2)] == [200, 200]
    request_id, refused = client.call_tool("report")
    assert_refused(refused, request_id, "2/minute", "tool report", "the tool's rate_limit")
    assert client.call_tool("search")[1].status_code == 200
    request_id, refused = client.call_tool("search")
    assert_refused(refused, request_id, "1/hour", "tool search", "ZEMCP_RATE_LIMIT_TOOLS")
    # Three tokens of the client's five went to the calls that were served, none to the refused.
    assert [client.call_tool("hello")[1].status_code for _ in range(3)] == [200, 200, 429]


def test_each_address_is_a_client_of_its_own():
    app = make_app(rate_limit="1/hour")
    first, second = modern(app, "127.0.0.2"), modern(app, "127.0.0.3")
    assert first.call_tool("hello")[1].status_code == 200
    assert first.call_tool("hello")[1].status_code == 429
    assert second.call_tool("hello")[1].status_code == 200


def test_a_bad_rate_is_refused_where_it_is_given():
    with pytest.raises(ValueError, match=r"rate_limit \(ZEMCP_RATE_LIMIT\) must be a rate <count>/<second"):
        Settings(rate_limit="lots")
    with pytest.raises(ValueError, match=r"rate_limit \(ZEMCP_RATE_LIMIT\) must be a rate .*got '5 per minute'"):
        Settings.from_env({"ZEMCP_RATE_LIMIT": "5 per minute"})
    with pytest.raises(ValueError, match=r"rate_limit_tools \(ZEMCP_RATE_LIMIT_TOOLS\) takes comma-separated"):
        Settings.from_env({"ZEMCP_RATE_LIMIT_TOOLS": "report:5/minute"})
    with pytest.raises(ValueError, match="must be a string"):
        Settings(rate_limit_tools={"report": "5/minute"})
    server = zemcp.Server("x", settings=Settings())
    with pytest.raises(ValueError, match="tool 'often': rate_limit must be a rate"):
        server.tool("often", rate_limit="often")(lambda: "x")
    settings = Settings.from_env({"ZEMCP_RATE_LIMIT": " 120/m ", "ZEMCP_RATE_LIMIT_TOOLS": "report=5/minute"})
    assert settings.rate_limit == "120/m" and settings.client_rate.text == "120/minute"
    assert {name: rate.text for name, rate in settings.tool_rates.items()} == {"report": "5/minute"}
    assert Settings().client_rate is None and Settings().tool_rates == {}


def test_an_unreachable_redis_is_a_503_for_limited_requests_only():
    pytest.importorskip("redis", reason="the redis package is not installed (pip install '.[redis]')")
    port = free_port()  # nothing listens there
    app = make_app(redis_url=f"redis://127.0.0.1:{port}/0", redis_timeout=0.5, rate_limit="10/minute")
    try:
        client = modern(app)
        request_id, refused = client.call_tool("hello")
        assert refused.status_code == 503 and refused.headers["Retry-After"] == "2", refused.get_data(as_text=True)
        body = refused.get_json()
        assert body["id"] == request_id and body["error"]["code"] == -32603, body
        assert "ZEMCP_REDIS_URL" in body["error"]["message"], body
        # A request that takes no token does not ask Redis for one.
        probe = session(app).post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        assert probe.status_code != 503, probe.get_data(as_text=True)
    finally:
        app.server.sessions.close()


def test_a_tool_limit_naming_no_tool_is_warned_of(caplog):
    caplog.set_level("WARNING", logger="zemcp.rates")
    make_app(rate_limit_tools="serach=1/hour,search=1/hour")
    (record,) = [r for r in caplog.records if r.name == "zemcp.rates"]
    assert "'serach'" in record.getMessage() and "'search'" not in record.getMessage()
