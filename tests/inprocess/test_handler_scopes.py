"""``Server.around_handlers``: a scope entered around every handler run, on the thread that runs it.

A framework integration uses it to do around a handler what the framework does around a
request of its own (zemcp.django closes stale database connections). The scope wraps plain and
``async def`` handlers, each round of a 2026-07-28 call, and a task's run on its task thread,
in both eras; a scope that fails on entry fails that call as an internal error.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Iterator

import zemcp
from tests.support.clients import ModernClient, inprocess_modern, inprocess_session
from tests.support.wires import InProcessWire
from zemcp.protocol.tasks import EXTENSION

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class Recorder:
    """A scope factory that records ``(event, scope, thread)`` entries: ``enter``, ``exit`` and
    the handler's own ``run``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, int]] = []
        self.lock = threading.Lock()

    def note(self, event: str, scope: str = "") -> None:
        with self.lock:
            self.events.append((event, scope, threading.get_ident()))

    def scope(self, name: str):
        @contextlib.contextmanager
        def scoped(ctx: zemcp.Context) -> Iterator[None]:
            self.note("enter", name)
            try:
                yield
            finally:
                self.note("exit", name)

        return scoped

    def kinds(self) -> list[str]:
        return [f"{event}{':' + scope if scope else ''}" for event, scope, _ in self.events]

    def threads(self) -> set[int]:
        return {thread for _, _, thread in self.events}


def make_server(recorder: Recorder) -> zemcp.Server:
    server = zemcp.Server("scopes", "1")
    server.around_handlers(recorder.scope("a"))

    @server.tool
    def plain() -> str:
        recorder.note("run")
        return "plain"

    @server.tool
    async def coroutine() -> str:
        await asyncio.sleep(0)
        recorder.note("run")
        return "coroutine"

    @server.tool
    def ask(ctx: zemcp.Context) -> str:
        recorder.note("run")
        return "hello " + ctx.elicit("Name?", NAME, key="name")["name"]

    @server.tool(task="optional")
    def report() -> str:
        recorder.note("run")
        return "reported"

    return server


def test_a_plain_and_an_async_handler_run_inside_the_scope_on_their_thread():
    recorder = Recorder()
    client = inprocess_session(zemcp.McpApp(make_server(recorder)))
    assert client.rpc("tools/call", {"name": "plain", "arguments": {}})["content"][0]["text"] == "plain"
    assert recorder.kinds() == ["enter:a", "run", "exit:a"]
    assert len(recorder.threads()) == 1, "entered, run and exited on the thread that ran the handler"
    recorder.events.clear()
    assert client.rpc("tools/call", {"name": "coroutine", "arguments": {}})["content"][0]["text"] == "coroutine"
    assert recorder.kinds() == ["enter:a", "run", "exit:a"], "the handler's event loop runs inside the scope"
    assert len(recorder.threads()) == 1


def test_each_round_of_a_2026_call_is_a_run_of_its_own():
    recorder = Recorder()
    client = inprocess_modern(zemcp.McpApp(make_server(recorder)))
    first = client.result(client.call_tool("ask")[1])
    assert first["resultType"] == "input_required", first
    assert recorder.kinds() == ["enter:a", "run", "exit:a"], "the round ended to ask, and the scope with it"
    answer = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    final = client.result(client.answer("ask", first, answer)[1])
    assert final["content"][0]["text"] == "hello Ada", final
    assert recorder.kinds() == ["enter:a", "run", "exit:a"] * 2


def test_a_task_runs_inside_the_scope_on_its_task_thread():
    recorder = Recorder()
    client = ModernClient(
        InProcessWire(zemcp.McpApp(make_server(recorder))), capabilities={"extensions": {EXTENSION: {}}}
    )
    created = client.wire.json(client.request("tools/call", {"name": "report", "arguments": {}}))
    assert created["result"]["resultType"] == "task", created
    deadline = time.monotonic() + 10
    while recorder.kinds() != ["enter:a", "run", "exit:a"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert recorder.kinds() == ["enter:a", "run", "exit:a"]
    (thread,) = recorder.threads()
    assert thread != threading.get_ident(), "a task thread, not the request's"


def test_scopes_nest_in_registration_order_and_register_once():
    recorder = Recorder()
    server = make_server(recorder)
    second = recorder.scope("b")
    server.around_handlers(second)
    server.around_handlers(second)
    client = inprocess_session(zemcp.McpApp(server))
    client.rpc("tools/call", {"name": "plain", "arguments": {}})
    assert recorder.kinds() == ["enter:a", "enter:b", "run", "exit:b", "exit:a"]


def test_a_scope_that_fails_on_entry_fails_the_call_and_the_handler_never_runs():
    recorder = Recorder()
    server = make_server(recorder)

    @contextlib.contextmanager
    def failing(ctx: zemcp.Context) -> Iterator[None]:
        raise RuntimeError("the database is out of reach")
        yield

    server.around_handlers(failing)
    client = inprocess_session(zemcp.McpApp(server))
    error = client.rpc_error("tools/call", {"name": "plain", "arguments": {}})
    assert error["message"] == "Internal error while serving tools/call", error
    assert "run" not in recorder.kinds()
    assert recorder.kinds() == ["enter:a", "exit:a"], "the scopes entered before it are exited"


def test_a_scope_is_given_the_handlers_context():
    """The factory gets the run's Context (a framework scope reads ``ctx.request`` from it), and
    what it sets up is what the handler, plain or async, sees."""
    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="outside")
    server = zemcp.Server("scopes", "1")

    @contextlib.contextmanager
    def scoped(ctx: zemcp.Context) -> Iterator[None]:
        token = seen.set(f"request {ctx.request_id} of {ctx.client.client_info['name']}")
        try:
            yield
        finally:
            seen.reset(token)

    server.around_handlers(scoped)

    @server.tool
    def plain() -> str:
        """What the scope set up."""
        return seen.get()

    @server.tool
    async def waiting() -> str:
        """What the scope set up, in the handler's event loop."""
        return seen.get()

    client = inprocess_modern(zemcp.McpApp(server))
    for tool in ("plain", "waiting"):
        request_id, response = client.call_tool(tool)
        assert client.result(response)["content"][0]["text"] == f"request {request_id} of zemcp-modern-tests"
