"""An ``async def`` tool over the stdio transport: ``zemcp run tests/apps/async_tools.py
--transport stdio`` as a subprocess of the official MCP Python SDK's stdio client, whose
elicitation callback answers the tool's ``await ctx.aelicit`` in each era."""

import asyncio
import json
import sys

import mcp
import pytest
from mcp import types
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.support import REPO
from tests.support.clients import MODERN_VERSION

#: [seconds] bound on each whole client scenario (the subprocess starts in it).
SCENARIO_TIMEOUT = 40


@pytest.mark.parametrize("mode", ["legacy", MODERN_VERSION])
def test_sdk_stdio_client_answers_an_awaited_elicitation(mode):
    """legacy: elicitation/create written to stdout while the tool's loop ticks, answered on stdin;
    2026-07-28: the question in an input_required round, the tool replayed with the answer."""
    asked = []

    async def on_elicit(context, params):
        asked.append((context.request_id, params.message))
        await asyncio.sleep(0.1)  # the user thinks: the server's loop ticks meanwhile
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def scenario():
        params = StdioServerParameters(
            command=sys.executable,
            cwd=REPO,
            args=["-m", "zemcp", "run", "tests/apps/async_tools.py", "--transport", "stdio", "--log-level", "warning"],
            # Merged over the client's bare default environment: no bytecode written into the checkout.
            env={"PYTHONDONTWRITEBYTECODE": "1"},
        )
        async with mcp.Client(
            stdio_client(params), mode=mode, elicitation_callback=on_elicit, read_timeout_seconds=20
        ) as client:
            return await client.call_tool("ask", {})

    result = asyncio.run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
    assert result.is_error is False, result
    assert len(asked) == 1 and asked[0][1] == "Your name?"
    seen = json.loads(result.content[0].text)
    assert seen["name"] == "Ada"
    if mode == "legacy":
        assert seen["ticks"] > 0, seen
    else:
        assert asked[0][0] == "name", asked
