"""The comparison server of benchmarks/calls.py: the official MCP Python SDK's own server.

An ``ze_execute`` tool with the reference server's shape (called without ``command``, it asks
for one by elicitation, then answers), served by the SDK's Streamable HTTP app under uvicorn,
so that the elicitation round trip can be measured beside zemcp's with the same client::

    python -m uvicorn benchmarks.sdk_server:app --host 127.0.0.1 --port 8002
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

server = MCPServer("sdk-comparison")


class Command(BaseModel):
    command: str


@server.tool()
async def ze_execute(ctx: Context, command: str = "") -> str:
    """Run a command; asks for one when it is missing."""
    if not command:
        answer = await ctx.elicit("Which command would you like to run?", Command)
        if answer.action != "accept":
            raise ValueError("no command")
        command = answer.data.command
    return f"ran {command}"


app = server.streamable_http_app()
