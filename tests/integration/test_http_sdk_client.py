"""The official MCP Python SDK client (PyPI ``mcp`` 2.3) against the gunicorn-served server, in each of its modes.

``mcp.Client(url, mode=...)`` picks the era: a modern version string (``"2026-07-28"``) adopts
the stateless era without a probe, ``"auto"`` (the default) probes ``server/discover`` and
adopts the modern era when the server offers it, ``"legacy"`` runs the ``initialize``
handshake. What went over the wire is read back from the traced server's access log
(one line per request, with the MCP headers and session ids; tests/support/gunicorn.py).
"""

import asyncio

import mcp
from mcp import types

from tests.support.clients import MODERN_VERSION
from tests.support.gunicorn import wait_trace

ELICIT_MESSAGE = "Which command would you like to run?"
#: [seconds] bound on each whole client scenario.
SCENARIO_TIMEOUT = 30


def run_client(url: str, name: str, **options) -> dict:
    """Connect ``mcp.Client`` with ``options``, list the tools, call ze_execute ``{}`` and answer the
    elicitation with ``session show``; returns what the client saw."""
    elicitations = []

    async def on_elicit(context, params):
        # context.request_id: the JSON-RPC id of a pushed server request (handshake era),
        # or the inputRequests key of a multi-round-trip round (2026-07-28).
        elicitations.append((context.request_id, params))
        return types.ElicitResult(action="accept", content={"command": "session show"})

    async def scenario():
        async with mcp.Client(
            url,
            client_info=types.Implementation(name=name, version="4.2"),
            elicitation_callback=on_elicit,
            read_timeout_seconds=20,
            **options,
        ) as client:
            seen = {
                "version": client.protocol_version,
                "discover": client.session.discover_result,
                "initialize": client.session.initialize_result,
                "tools": await client.list_tools(),
            }
            seen["result"] = await client.call_tool("ze_execute", {})
            return seen

    seen = asyncio.run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
    seen["elicitations"] = elicitations
    return seen


def assert_completed(seen: dict, name: str, version: str) -> str:
    """The call listed ze_execute, asked once, and ran ``session show`` for this client; returns the text."""
    assert "ze_execute" in [tool.name for tool in seen["tools"].tools]
    assert len(seen["elicitations"]) == 1, seen["elicitations"]
    assert seen["elicitations"][0][1].message == ELICIT_MESSAGE
    result = seen["result"]
    assert result.is_error is False, result
    text = result.content[0].text
    assert f"client: {name} 4.2" in text, text
    assert f"protocol version: {version}" in text, text
    assert "elicitation: yes" in text, text
    return text


def assert_stateless(records, methods: list[str]) -> None:
    """Exactly these requests, each a POST in the 2026-07-28 era, none with a session id either way."""
    assert [r.mcp_method for r in records] == methods, records
    for record in records:
        assert record.http == "POST" and record.status == 200, record
        assert record.version == MODERN_VERSION, record
        assert record.session_in is None and record.session_out is None, record
        assert (record.content_type or "").startswith("application/json"), record
    calls = [r for r in records if r.mcp_method == "tools/call"]
    assert calls and all(r.mcp_name == "ze_execute" for r in calls), records


def test_sdk_client_pinned_2026_elicits_by_round_trips_without_session(traced_server):
    """mode="2026-07-28": no probe, no initialize, no session id; the elicitation is a second tools/call round."""
    since = len(traced_server.log())
    seen = run_client(traced_server.url, "zemcp-sdk-pinned", mode=MODERN_VERSION)

    assert seen["version"] == MODERN_VERSION
    assert seen["initialize"] is None
    text = assert_completed(seen, "zemcp-sdk-pinned", MODERN_VERSION)
    assert "session: none" in text, text
    # The question came inside an InputRequiredResult under its key, not as a pushed request.
    assert seen["elicitations"][0][0] == "command", seen["elicitations"]
    # Every request carried Mcp-Method (so none was an initialize, which has none in this
    # client), no Mcp-Session-Id travelled, and the call took two rounds.
    records = wait_trace(traced_server, since, 3)
    assert_stateless(records, ["tools/list", "tools/call", "tools/call"])


def test_sdk_client_default_mode_discovers_and_picks_2026(traced_server):
    """Default mode (auto): server/discover succeeds, so the client adopts 2026-07-28 and elicits by round trips."""
    since = len(traced_server.log())
    seen = run_client(traced_server.url, "zemcp-sdk-auto")

    assert seen["discover"] is not None
    assert MODERN_VERSION in seen["discover"].supported_versions, seen["discover"]
    assert seen["initialize"] is None
    assert seen["version"] == MODERN_VERSION
    text = assert_completed(seen, "zemcp-sdk-auto", MODERN_VERSION)
    assert "session: none" in text, text
    assert seen["elicitations"][0][0] == "command", seen["elicitations"]
    records = wait_trace(traced_server, since, 4)
    assert_stateless(records, ["server/discover", "tools/list", "tools/call", "tools/call"])


def test_sdk_client_legacy_mode_initializes_and_answers_pushed_elicitation(traced_server):
    """mode="legacy": initialize mints a session, the elicitation is pushed on the call's SSE stream and answered."""
    since = len(traced_server.log())
    seen = run_client(traced_server.url, "zemcp-sdk-legacy", mode="legacy")

    assert seen["initialize"] is not None and seen["discover"] is None
    version = seen["version"]
    assert version == seen["initialize"].protocol_version
    assert version in ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"), version
    text = assert_completed(seen, "zemcp-sdk-legacy", version)
    # A handshake-era session: the command reports its age, not "session: none".
    assert "age: " in text and "session: none" not in text, text
    # The question was a JSON-RPC request the server sent, with its own id (not an inputRequests key).
    request_id = seen["elicitations"][0][0]
    assert request_id is not None and request_id != "command", seen["elicitations"]

    records = wait_trace(traced_server, since, 6, until=lambda r: r.http == "DELETE")
    assert all(r.mcp_method is None for r in records), records
    posts = [r for r in records if r.http == "POST"]
    # The first POST, the initialize, came without a session and got the session id.
    initialize = posts[0]
    assert initialize.session_in is None and initialize.session_out, records
    session = initialize.session_out
    assert all(r.session_in == session for r in records if r is not initialize), records
    # The tools/call was answered with an event stream (the pushed elicitation/create), the
    # client's answer with 202, and the client ended the session with DELETE.
    assert any(r.status == 200 and (r.content_type or "").startswith("text/event-stream") for r in posts), records
    assert sum(1 for r in posts if r.status == 202) >= 2, records  # notifications/initialized + the answer
    assert [r.status for r in records if r.http == "DELETE"] == [204], records
