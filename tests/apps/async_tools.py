"""A server of ``async def`` handlers for the tests (``tests.apps.async_tools:app``).

``ask`` awaits ``ctx.aelicit`` for a name while another task of its event loop ticks every
5 ms, then answers with a JSON object: the name, the ids of its loop and thread, the process
id and how often the loop ticked while the answer was awaited.
"""

import asyncio
import json
import os
import threading

import zemcp

server = zemcp.Server("zemcp-async-tests", "1.0")
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool
async def ask(ctx: zemcp.Context) -> str:
    """Ask the user for a name; say which loop, thread and process asked."""
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        answer = await ctx.aelicit("Your name?", NAME, key="name")
    finally:
        ticker.cancel()
    where = {"loop": id(asyncio.get_running_loop()), "thread": threading.get_ident(), "pid": os.getpid()}
    return json.dumps({"name": answer["name"], **where, "ticks": ticks})


app = zemcp.McpApp(server)
