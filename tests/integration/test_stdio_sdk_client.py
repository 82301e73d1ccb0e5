"""The stdio transport: ``zemcp run wsgi.py --transport stdio`` as a subprocess of the official
MCP Python SDK's stdio client, completing an eliciting call in each of the client's modes."""

import asyncio
import sys

import mcp
import pytest
from mcp import types
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.support import REPO
from tests.support.clients import MODERN_VERSION

#: [seconds] bound on each whole client scenario (the subprocess starts in it).
SCENARIO_TIMEOUT = 40


def run_stdio(mode: str, target: str = "wsgi.py") -> dict:
    """Start the server as the client's subprocess, call ze_execute ``{}``, answer its question."""
    elicitations = []

    async def on_elicit(context, params):
        elicitations.append((context.request_id, params.message))
        return types.ElicitResult(action="accept", content={"command": "session show"})

    async def scenario():
        params = StdioServerParameters(
            command=sys.executable,
            cwd=REPO,
            args=["-m", "zemcp", "run", target, "--transport", "stdio", "--log-level", "warning"],
            # Merged over the client's bare default environment: no bytecode written into the checkout.
            env={"PYTHONDONTWRITEBYTECODE": "1"},
        )
        async with mcp.Client(
            stdio_client(params),
            mode=mode,
            elicitation_callback=on_elicit,
            client_info=types.Implementation(name="stdio-test", version="1"),
            read_timeout_seconds=20,
        ) as client:
            tools = await client.list_tools()
            result = await client.call_tool("ze_execute", {})
            return {"version": client.protocol_version, "tools": [t.name for t in tools.tools], "result": result}

    seen = asyncio.run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
    seen["elicitations"] = elicitations
    return seen


@pytest.mark.parametrize("mode", ["legacy", "auto", MODERN_VERSION])
def test_sdk_stdio_client_completes_an_eliciting_call(mode):
    """legacy: initialize, then elicitation/create written to stdout and answered on stdin;
    auto and 2026-07-28: no session, the question travels in an input_required round."""
    seen = run_stdio(mode)
    assert "ze_execute" in seen["tools"]
    assert len(seen["elicitations"]) == 1 and seen["elicitations"][0][1] == "Which command would you like to run?"
    result = seen["result"]
    assert result.is_error is False, result
    text = result.content[0].text
    assert "client: stdio-test 1" in text and "elicitation: yes" in text, text
    if mode == "legacy":
        assert seen["version"] != MODERN_VERSION and "session: none" not in text, text
        assert seen["elicitations"][0][0] != "command"  # a pushed request's own id
    else:
        assert seen["version"] == MODERN_VERSION and "session: none" in text, text
        assert seen["elicitations"][0][0] == "command"  # the inputRequests key


NOISY = '''
import os
import subprocess
import sys

import zemcp

print("printed at import")
server = zemcp.Server("noisy", "1")


@server.tool
def noisy() -> str:
    """Writes to descriptor 1, to sys.stdout and from a child process."""
    os.write(1, b"written to descriptor 1\\n")
    print("printed by the handler")
    subprocess.run([sys.executable, "-c", "print('printed by a child process')"], check=True)
    return "done"
'''


@pytest.mark.parametrize("mode", ["legacy", MODERN_VERSION])
def test_stray_output_of_the_target_goes_to_stderr_not_into_the_protocol(mode, tmp_path):
    """A print at import time, os.write(1, ...) and a child process's output all reach stderr;
    stdout carries MCP messages only, so every call of the SDK's client succeeds."""
    (tmp_path / "noisy.py").write_text(NOISY)
    errlog = tmp_path / "stderr.log"

    async def scenario():
        params = StdioServerParameters(
            command=sys.executable,
            cwd=REPO,
            args=["-m", "zemcp", "run", str(tmp_path / "noisy.py"), "--transport", "stdio", "--log-level", "warning"],
            # Merged over the client's bare default environment: no bytecode written into the checkout.
            env={"PYTHONDONTWRITEBYTECODE": "1"},
        )
        with errlog.open("w") as err:
            async with mcp.Client(stdio_client(params, errlog=err), mode=mode, read_timeout_seconds=20) as client:
                tools = await client.list_tools()
                results = [await client.call_tool("noisy", {}) for _ in range(2)]
                return [t.name for t in tools.tools], results

    names, results = asyncio.run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
    assert names == ["noisy"]
    for result in results:
        assert result.is_error is False and result.content[0].text == "done", result
    stderr = errlog.read_text()
    for stray in ("printed at import", "written to descriptor 1", "printed by the handler", "printed by a child"):
        assert stray in stderr, stderr
