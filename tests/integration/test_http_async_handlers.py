"""``async def`` tools under gunicorn: the official MCP Python SDK client (PyPI ``mcp``) answers
an ``await ctx.aelicit`` in each era, and two such elicitations waiting at once in one worker
run in loops of their own and do not wait for each other (``tests.apps.async_tools:app``)."""

import asyncio
import json
import time

import mcp
import pytest
from mcp import types

from tests.support.clients import MODERN_VERSION
from tests.support.gunicorn import GunicornServer, lend

APP = "tests.apps.async_tools:app"
#: [seconds] bound on each whole client scenario.
SCENARIO_TIMEOUT = 30


@pytest.fixture(scope="module")
def _async_server(_log_dir):
    server = GunicornServer({"workers": "1", "keepalive_interval": "0.5"}, _log_dir, app=APP)
    yield server
    server.stop()


@pytest.fixture
def async_server(request, _async_server):
    """One single-worker gunicorn serving the async tools, shared by this module's tests."""
    yield from lend(request, _async_server)


def run_sdk_client(url: str, mode: str) -> tuple[list, types.CallToolResult]:
    """``mcp.Client`` in ``mode`` calls ``ask`` and accepts its elicitation with the name Ada."""
    asked = []

    async def on_elicit(context, params):
        asked.append((context.request_id, params.message))
        await asyncio.sleep(0.1)  # the user thinks: the server's loop ticks meanwhile
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def scenario():
        async with mcp.Client(url, mode=mode, elicitation_callback=on_elicit, read_timeout_seconds=20) as client:
            return await client.call_tool("ask", {})

    return asked, asyncio.run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))


@pytest.mark.parametrize("mode", ["legacy", MODERN_VERSION])
def test_sdk_client_answers_an_awaited_elicitation(async_server, mode):
    """legacy: elicitation/create pushed on the call's stream while the loop keeps ticking;
    2026-07-28: the question in an input_required round, the handler replayed with the answer."""
    asked, result = run_sdk_client(async_server.url, mode)
    assert result.is_error is False, result
    assert len(asked) == 1 and asked[0][1] == "Your name?"
    seen = json.loads(result.content[0].text)
    assert seen["name"] == "Ada"
    if mode == "legacy":
        assert isinstance(asked[0][0], str) and seen["ticks"] > 0, seen
    else:
        assert asked[0][0] == "name", asked


def test_two_waiting_async_elicitations_in_one_worker(async_server):
    """Answered in reverse order, the second call completes while the first still waits; each ran
    in its own event loop, on its own thread of the same worker."""
    client = async_server.session()
    first_call = client.call_message({}, name="ask")
    second_call = client.call_message({}, name="ask")
    _, first = client.open_stream(first_call)
    _, second = client.open_stream(second_call)
    first_ask, second_ask = first.next_message(), second.next_message()
    assert first_ask["method"] == second_ask["method"] == "elicitation/create"
    time.sleep(0.1)  # both loops tick while both wait
    assert client.accept(second_ask["id"], {"name": "Bo"}).status_code == 202
    second_done = second.next_message()
    assert second_done["id"] == second_call["id"]
    time.sleep(0.1)  # the first still waits, its loop still ticking
    assert client.accept(first_ask["id"], {"name": "Ada"}).status_code == 202
    first_done = first.next_message()
    assert first_done["id"] == first_call["id"]
    a, b = (json.loads(done["result"]["content"][0]["text"]) for done in (first_done, second_done))
    assert (a["name"], b["name"]) == ("Ada", "Bo")
    assert a["pid"] == b["pid"], "one worker served both"
    assert a["loop"] != b["loop"] and a["thread"] != b["thread"]
    assert a["ticks"] > b["ticks"] > 0, (a, b)
