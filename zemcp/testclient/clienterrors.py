"""The failures that end a ``zemcp-test mcp`` run, under one base, :class:`ClientError`."""

from __future__ import annotations

from typing import Any


class ClientError(Exception):
    """Base of every failure that ends a run; ``str(exc)`` is the text after ``error: ``."""


class DirectiveError(ClientError):
    """An input line that is not a valid directive.

    Attributes:
        lineno: 1-based number of the offending input line (0 when parsed outside a script).
    """

    def __init__(self, lineno: int, message: str):
        super().__init__(f"line {lineno}: {message}" if lineno else message)
        self.lineno = lineno


class TransportError(ClientError):
    """HTTP-level failure: connection refused, timeout, unexpected status or content type,
    a body that is not JSON-RPC, or a stream that ended without the response."""


class RpcError(ClientError):
    """The server answered a request with a JSON-RPC error.

    Attributes:
        code: the JSON-RPC error code.
        message: the error's message.
    """

    def __init__(self, code: Any, message: Any):
        super().__init__(f"RPC error {code}: {message}")
        self.code = code
        self.message = message


class CommandError(ClientError):
    """A tool call returned a result with ``isError: true``.

    Attributes:
        text: the text of the result's text content items, joined with newlines.
    """

    def __init__(self, text: str):
        super().__init__(f"command error: {text}")
        self.text = text
