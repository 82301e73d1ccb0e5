"""A server for the resumable-stream tests (``tests.apps.streams:app``).

``ask`` elicits one word after ``chatter`` log messages (each an event of the call's stream);
``talk`` logs messages of a given size at a given pace, then returns;
``poll_then_ask`` ends its stream's connection on purpose first (SSE polling);
``add_tool`` registers a tool at run time (``notifications/tools/list_changed``);
``announce`` announces ``notifications/tools/list_changed``; it and ``pid`` return the pid of
the worker that served them;
``touch`` announces that a resource changed (``notifications/resources/updated``);
``ze_execute`` runs the built-in commands (``server status``).

A worker sent SIGUSR2 announces ``notifications/tools/list_changed`` from a thread of its own,
as an application's background job (a configuration watcher, say) would, whatever requests
it served before.
"""

import itertools
import os
import signal
import threading
import time

import zemcp
from zemcp.cli.commands import CommandRegistry, add_builtin_commands, add_execute_tool

server = zemcp.Server("zemcp-stream-tests", "1.0")
# ze_execute with the built-in commands: the tests read ``server status``.
_commands = CommandRegistry()
add_builtin_commands(_commands)
add_execute_tool(server, _commands)
WORD = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}
_added = itertools.count(1)


@server.tool
def ask(ctx: zemcp.Context, chatter: int = 0) -> str:
    """Log ``chatter`` messages, then ask the user for a word and echo it."""
    for n in range(chatter):
        ctx.log("info", f"chatter {n + 1}")
    return "word: " + ctx.elicit("A word?", WORD)["word"]


@server.tool
def talk(ctx: zemcp.Context, count: int = 10, size: int = 10, delay: float = 0.2) -> str:
    """Log ``count`` messages of ``size`` characters, ``delay`` seconds apart, then return."""
    for n in range(count):
        ctx.log("info", f"{n}:" + "x" * size)
        time.sleep(delay)
    return f"talked {count} times"


@server.tool
def poll_then_ask(ctx: zemcp.Context) -> str:
    """End this stream's connection (the client reconnects), then ask for a word."""
    ctx.close_sse_stream()
    return "word: " + ctx.elicit("A word?", WORD)["word"]


@server.tool
def add_tool() -> str:
    """Register one more tool while the server runs; returns its name."""
    name = f"added_{next(_added)}"

    def added() -> str:
        return name

    server.tool(name=name, description="A tool added at run time.")(added)
    return name


@server.tool
def announce() -> str:
    """Announce that the tool list changed; returns this worker's pid."""
    server.notify_list_changed("tools")
    return str(os.getpid())


@server.tool
def pid() -> str:
    """This worker's pid."""
    return str(os.getpid())


@server.tool
def touch(uri: str) -> str:
    """Tell the clients subscribed to ``uri`` that it changed; returns how many streams were told."""
    return str(server.notify_resource_updated(uri))


@server.resource("test://watched", mime_type="text/plain")
def watched() -> str:
    """A resource clients may subscribe to."""
    return "watched"


@server.resource("test://other", mime_type="text/plain")
def other() -> str:
    """Another resource."""
    return "other"


app = zemcp.McpApp(server)


_announce_now = threading.Event()


def _announce_on_signal() -> None:
    while True:
        _announce_now.wait()
        _announce_now.clear()
        server.notify_list_changed("tools")


# gunicorn loads the app in each worker after it set its own signal handlers; SIGUSR2 is not one.
signal.signal(signal.SIGUSR2, lambda signum, frame: _announce_now.set())
threading.Thread(target=_announce_on_signal, name="announcer", daemon=True).start()
