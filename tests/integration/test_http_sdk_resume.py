"""The official MCP Python SDK client resumes a stream across a dropped connection, and gets
``list_changed`` on its standalone GET stream.

The client talks to gunicorn through a loopback TCP relay (tests/support/relay.py). While the
elicitation callback runs, the relay cuts every connection: the call's SSE stream breaks
mid-call. The SDK reconnects with ``Last-Event-ID`` after the server's ``retry``, the answer
it POSTs reaches the waiting handler, and the result arrives on the resumed stream.
"""

import asyncio
import re

import mcp
from mcp import types

from tests.support.relay import Relay

STREAMS_APP = "tests.apps.streams:app"
#: [seconds] bound on the whole client scenario.
SCENARIO_TIMEOUT = 40


def test_the_sdk_client_resumes_an_eliciting_call_across_a_dropped_connection(start_server):
    server = start_server(app=STREAMS_APP, keepalive_interval=0.5, stream_retry=0.3)
    notifications = []
    cuts = []

    with Relay(server.port) as relay:

        async def on_elicit(context, params):
            # The call's stream is open through the relay now: cut it (and every other connection).
            cuts.append(relay.drop())
            await asyncio.sleep(0.5)
            return types.ElicitResult(action="accept", content={"word": "resumed"})

        async def on_message(message):
            if isinstance(message, types.ServerNotification | types.ToolListChangedNotification):
                notifications.append(message)

        async def scenario():
            async with mcp.Client(
                relay.url,
                mode="legacy",
                elicitation_callback=on_elicit,
                message_handler=on_message,
                read_timeout_seconds=30,
            ) as client:
                result = await client.call_tool("ask", {})
                added = await client.call_tool("add_tool", {})
                for _ in range(100):
                    if any(_is_tools_list_changed(n) for n in notifications):
                        break
                    await asyncio.sleep(0.1)
                return result, added

        result, added = asyncio.run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))

    assert cuts and cuts[0] >= 1, "the relay cut no connection"
    assert result.is_error is False, result
    assert result.content[0].text == "word: resumed"
    assert added.content[0].text.startswith("added_")
    assert any(_is_tools_list_changed(n) for n in notifications), notifications
    log = server.log()
    assert re.search(r"session \w+: request stream resumed after event \d+", log), log
    assert re.search(r"session \w+: standalone stream resumed after event \d+", log), log
    assert "client disconnected" not in log.lower()


def _is_tools_list_changed(message) -> bool:
    root = getattr(message, "root", message)
    return getattr(root, "method", None) == "notifications/tools/list_changed"
