"""The official MCP Python SDK client (PyPI ``mcp``, default mode) against the gunicorn-served server."""

import asyncio

import mcp
from mcp import types

SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")


def test_official_sdk_client_probes_falls_back_and_completes_elicitation(server):
    """The SDK client probes server/discover, falls back to initialize, lists tools and answers an elicitation."""
    elicitations = []

    async def on_elicit(context, params):
        elicitations.append(params)
        return types.ElicitResult(action="accept", content={"command": "session show"})

    async def scenario():
        async with mcp.Client(
            server.url,
            client_info=types.Implementation(name="zemcp-sdk-check", version="4.2"),
            elicitation_callback=on_elicit,
            read_timeout_seconds=20,
        ) as client:
            # Default mode: the probe failed, so the session comes from the initialize handshake.
            assert client.session.discover_result is None
            assert client.session.initialize_result is not None
            version = client.protocol_version
            tools = await client.list_tools()
            result = await client.call_tool("ze_execute", {})
            return version, tools, result

    log_before = len(server.log())
    version, tools, result = asyncio.run(asyncio.wait_for(scenario(), 30))

    assert version in SUPPORTED_VERSIONS
    assert "ze_execute" in [tool.name for tool in tools.tools]
    assert len(elicitations) == 1
    assert elicitations[0].message == "Which command would you like to run?"
    assert result.is_error is False, result
    text = result.content[0].text
    assert "zemcp-sdk-check 4.2" in text, text
    assert "elicitation: yes" in text and f"protocol version: {version}" in text
    # The access log shows the probe refused with 400 before the successful initialize.
    requests_seen = [line for line in server.log()[log_before:].splitlines() if '"POST /mcp' in line]
    assert requests_seen and '" 400 ' in requests_seen[0], requests_seen
