"""Handlers that misbehave: the server still answers every request and leaks nothing."""

import json
import threading
import time
from dataclasses import dataclass

import pytest

import zemcp
from tests.support.clients import LATEST_VERSION, HandshakeClient, inprocess_session
from tests.support.wires import InProcessWire
from zemcp import Settings


@dataclass
class Pick:
    """A typed elicitation form."""

    name: str
    ok: bool | None = None


@pytest.fixture
def server():
    server = zemcp.Server("robust", "1", settings=Settings(threads=8, keepalive_interval=0.05, elicitation_timeout=5))
    late = {}

    @server.tool
    def exits() -> str:
        """Raises SystemExit, as argparse does on bad input."""
        raise SystemExit(2)

    @server.resource("cli://{args}")
    def cli(args: str) -> str:
        raise SystemExit(2)

    @server.tool
    def leaves_a_thread(ctx: zemcp.Context) -> str:
        """Returns at once; a thread it started uses ctx later."""

        def later():
            time.sleep(0.05)
            for name, use in (("log", lambda: ctx.log("error", "late")), ("elicit", lambda: ctx.elicit("late?", Pick))):
                try:
                    use()
                    late[name] = "no error"
                except zemcp.ElicitError as exc:
                    late[name] = str(exc)

        late["thread"] = threading.Thread(target=later)
        late["thread"].start()
        return "returned"

    @server.tool
    def typed(ctx: zemcp.Context) -> str:
        """Elicits a dataclass."""
        return repr(ctx.elicit("Who?", Pick))

    @server.tool
    def progress(ctx: zemcp.Context, which: str) -> str:
        """Reports a bad progress value."""
        ctx.report_progress(True if which == "bool" else 1, total="x" if which == "total" else None)
        return "ok"

    @server.tool
    def malformed() -> dict:
        """Returns a CallToolResult whose content is not a list."""
        return {"content": "hello"}

    @server.tool
    def nan() -> dict:
        """Returns NaN in a plain dict."""
        return {"x": float("nan")}

    @server.tool(structured_output=True)
    def structured() -> dict[str, int]:
        """Returns structured content."""
        return {"a": 1}

    server.late = late
    return server


def test_system_exit_in_a_tool_is_a_tool_error(server):
    """SystemExit from a tool becomes an isError result, and the server keeps serving."""
    peer = inprocess_session(zemcp.McpApp(server))
    result = peer.call_tool("exits", {})[1].get_json()["result"]
    assert result["isError"] and result["content"][0]["text"] == "2"
    assert peer.post({"jsonrpc": "2.0", "id": 99, "method": "ping"}).get_json()["result"] == {}


def test_system_exit_in_a_resource_is_an_internal_error(server):
    """SystemExit from a resource handler is -32603 naming the resource, not a dead worker."""
    peer = inprocess_session(zemcp.McpApp(server))
    body = peer.post({"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": "cli://x"}}).get_json()
    assert body["error"]["code"] == -32603 and "cli://x" in body["error"]["message"]


def test_ctx_after_the_handler_returned_raises_and_holds_nothing(server):
    """A thread left behind cannot log or elicit on the finished request, and takes no pending slot."""
    peer = inprocess_session(zemcp.McpApp(server))
    assert peer.call_tool("leaves_a_thread", {})[1].get_json()["result"]["content"][0]["text"] == "returned"
    server.late["thread"].join(5)
    assert "ctx cannot be used after the handler returned" in server.late["log"]
    assert "ctx cannot be used after the handler returned" in server.late["elicit"]
    assert server.pending.count() == 0


@pytest.mark.parametrize(
    "content, expected",
    [
        ({"name": "a", "extra": 1}, "Pick(name='a', ok=None)"),
        ({"name": "a", "ok": None}, "Pick(name='a', ok=None)"),
        ({"name": "a", "ok": True}, "Pick(name='a', ok=True)"),
    ],
)
def test_typed_elicitation_ignores_unknown_keys_and_null(server, content, expected):
    """Extra keys in an accepted answer are dropped and null leaves an optional field empty."""
    peer = inprocess_session(zemcp.McpApp(server))
    _, r, stream = peer.open_call("typed", {})
    ask = stream.next_message()
    peer.answer(ask["id"], {"action": "accept", "content": content})
    assert stream.rest()[-1]["result"]["content"][0]["text"] == expected


@pytest.mark.parametrize(
    "which, text",
    [("bool", "progress must be a finite number, got True"), ("total", "total must be a finite number, got 'x'")],
)
def test_bad_progress_values_are_refused(server, which, text):
    """report_progress refuses booleans and non-numeric totals."""
    peer = inprocess_session(zemcp.McpApp(server), protocol_version=LATEST_VERSION, capabilities={})
    _, r, _ = peer.open_call("progress", {"which": which}, meta={"progressToken": 1})
    result = r.get_json()["result"]
    assert result["isError"] and text in result["content"][0]["text"]


@pytest.mark.parametrize(
    "tool, text", [("malformed", "content must be a list of content items"), ("nan", "Out of range float values")]
)
def test_results_that_cannot_be_sent_are_tool_errors(server, tool, text):
    """A malformed CallToolResult or a value with NaN is an isError result saying why."""
    peer = inprocess_session(zemcp.McpApp(server))
    result = peer.call_tool(tool, {})[1].get_json()["result"]
    assert result["isError"] and text in result["content"][0]["text"]


@pytest.mark.parametrize(
    "argument, text",
    [
        ([], "non-empty list"),
        ("https://x", "non-empty list"),
        ([{"foo": 1}], "needs mode 'url'"),
        ([("only message",)], "pair of strings"),
    ],
)
def test_url_elicitation_required_checks_its_argument(argument, text):
    """URLElicitationRequired refuses what would make a malformed -32042."""
    with pytest.raises(TypeError, match=text):
        zemcp.URLElicitationRequired(argument)


def test_nan_default_is_left_out_of_the_schema():
    """A default JSON cannot carry is not shown, so tools/list stays valid."""
    server = zemcp.Server("d", "1", settings=Settings(threads=4))

    @server.tool
    def f(x: float = float("nan")) -> str:
        """Has a NaN default."""
        return str(x)

    assert "default" not in server.tools.get("f").definition()["inputSchema"]["properties"]["x"]


def test_2024_11_05_sessions_get_only_what_that_version_has(server):
    """No completions capability, title, outputSchema or structuredContent for a 2024-11-05 client."""
    server.prompt("p", title="A prompt")(lambda: "hi")
    client = HandshakeClient(InProcessWire(zemcp.McpApp(server)), "old", "1")
    init = client.initialize(protocol_version="2024-11-05", capabilities={}, initialized=False)
    assert "completions" not in init.get_json()["result"]["capabilities"]
    tools = client.request("tools/list").get_json()
    assert all("outputSchema" not in t and "title" not in t for t in tools["result"]["tools"])
    prompts = client.request("prompts/list").get_json()
    assert "title" not in prompts["result"]["prompts"][0]
    call = client.call_tool("structured", {})[1].get_json()["result"]
    assert "structuredContent" not in call and json.loads(call["content"][0]["text"]) == {"a": 1}


def test_background_elicitation_ends_when_the_handler_returns():
    """A thread still waiting for an answer when its handler returns is woken at once."""
    server = zemcp.Server("bg", "1", settings=Settings(threads=8, keepalive_interval=0.05, elicitation_timeout=30))
    outcome = {}

    @server.tool
    def spawns(ctx: zemcp.Context) -> str:
        """Starts an elicitation on another thread, then returns."""

        def ask():
            try:
                ctx.elicit("Still there?", Pick)
            except zemcp.ElicitError as exc:
                outcome["error"] = (type(exc).__name__, str(exc))

        outcome["thread"] = threading.Thread(target=ask)
        outcome["thread"].start()
        deadline = time.monotonic() + 5
        while server.pending.count() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        return "done"

    peer = inprocess_session(zemcp.McpApp(server))
    _, r, stream = peer.open_call("spawns", {})
    got = stream.rest()
    assert got[-1]["result"]["content"][0]["text"] == "done"
    outcome["thread"].join(5)
    assert not outcome["thread"].is_alive()
    assert "ctx cannot be used after the handler returned" in outcome["error"][1]
    assert server.pending.count() == 0
