"""One ``tools/call`` in this process, for the frameworks' ``call`` commands
(``manage.py zemcp call``, ``flask zemcp call``).

:func:`call_tool` runs the call over an in-memory stdio connection (:mod:`zemcp.cli.stdio`):
``initialize`` without capabilities, ``notifications/initialized``, then the call, in the
handshake era. Its input stays open until the call is answered, so the call runs to its end
as it would for a client (an ``async def`` tool included), then the connection closes. A tool
that asks the user gets the answer of a client that cannot be asked.
"""

from __future__ import annotations

import json
import os
import threading
from typing import IO, Any, cast

from zemcp.cli.stdio import StdioTransport
from zemcp.core.server import Server
from zemcp.protocol.versions import LATEST

#: The JSON-RPC id of the call (``initialize`` is 1).
CALL_ID = 2


def call_tool(
    server: Server, tool: str, arguments: dict[str, Any], user: Any = None, client: str = "zemcp call"
) -> dict[str, Any]:
    """Call ``tool`` of ``server`` with ``arguments``, acting for ``user``.

    Args:
        server: the server.
        tool: the tool's name.
        arguments: its arguments.
        user: whom the call acts for (``ctx.user``, asked by ``permission=`` rules), or None.
        client: the ``clientInfo.name`` the call is made with (the command's name).
    Returns:
        the JSON-RPC response to the call: ``{"result": {...}}`` or ``{"error": {...}}``.
    Raises:
        RuntimeError: the connection closed without an answer to the call (the server's log says why).
    """
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": LATEST, "capabilities": {}, "clientInfo": {"name": client, "version": "1"}},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": CALL_ID, "method": "tools/call", "params": {"name": tool, "arguments": arguments}},
    ]
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as reader:
        writer = _Replies(write_end)
        # A few hundred bytes: the pipe holds them before anything reads.
        os.write(write_end, b"".join(json.dumps(message).encode() + b"\n" for message in messages))
        try:
            StdioTransport(server, reader, cast(IO[bytes], writer), user).serve()
        finally:
            writer.close_input()
    if writer.answer is None:
        raise RuntimeError(f"the call of {tool!r} was not answered (the server's log on stderr says why)")
    return writer.answer


class _Replies:
    """Where the in-memory connection's server writes: keeps the call's answer and then ends
    the connection's input, so that the transport closes once the call is answered."""

    def __init__(self, input_end: int):
        self._input_end: int | None = input_end
        self._pending = b""
        self._lock = threading.Lock()
        self.answer: dict[str, Any] | None = None

    def write(self, data: bytes) -> int:
        self._pending += data
        while b"\n" in self._pending:
            line, self._pending = self._pending.split(b"\n", 1)
            message = json.loads(line)
            if message.get("id") == CALL_ID and ("result" in message or "error" in message):
                self.answer = message
                self.close_input()
        return len(data)

    def flush(self) -> None:
        """Nothing is buffered beyond a line."""

    def close_input(self) -> None:
        """End the connection's input (once)."""
        with self._lock:
            if self._input_end is not None:
                os.close(self._input_end)
                self._input_end = None
