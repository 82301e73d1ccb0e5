"""``Server.around_handlers``: a scope entered around every handler run, on the handler's thread.

A server with two scopes serves a tool, an ``async def`` tool and a tool whose scope fails
through werkzeug's test client (2026-07-28 requests): the scopes nest in the order they were
registered, see the handler's Context, hold while an async handler's loop runs, and a scope
that raises on entry fails the call as an internal error.
"""

import contextlib
import contextvars
import threading

import zemcp
from tests.support.clients import inprocess_modern

SCOPE: contextvars.ContextVar[str] = contextvars.ContextVar("scope", default="none")


def test_scopes_nest_around_each_handler_on_its_thread():
    server = zemcp.Server("scopes", "1")
    events = []

    def scope(name):
        @contextlib.contextmanager
        def enter(ctx):
            if ctx.request_id == "fail" and name == "outer":
                raise RuntimeError("the scope broke")
            token = SCOPE.set(f"{SCOPE.get()}>{name}")
            events.append((name, "in", threading.current_thread().name))
            try:
                yield
            finally:
                SCOPE.reset(token)
                events.append((name, "out"))

        return enter

    server.around_handlers(scope("outer"))
    server.around_handlers(scope("inner"))

    @server.tool
    def where() -> str:
        """The scopes the handler runs in."""
        return SCOPE.get()

    @server.tool
    async def where_async() -> str:
        """The scopes an async handler's loop runs in."""
        return SCOPE.get()

    client = inprocess_modern(zemcp.McpApp(server))
    for tool in ("where", "where_async"):
        events.clear()
        _, response = client.call_tool(tool)
        assert client.result(response)["content"][0]["text"] == "none>outer>inner"
        assert [e[:2] for e in events] == [("outer", "in"), ("inner", "in"), ("inner", "out"), ("outer", "out")]
        assert events[0][2] != threading.current_thread().name, "entered on the handler's thread"
    failed = client.post(client.tool_message("where") | {"id": "fail"})
    assert failed.status_code == 200
    assert client.wire.json(failed)["error"]["message"] == "Internal error while serving tools/call"
