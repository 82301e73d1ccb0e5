"""Tools (MCP 2025-06-18 server/tools): the registry, the handler context and call results.

A handler is a plain blocking function. It receives the call's arguments as keyword
arguments and, if it declares a parameter named ``ctx`` (or annotated :class:`Context`), the
:class:`Context` of the call. It returns a ``str`` (one text item), a list of content items,
or a full ``CallToolResult`` dict; raising an exception turns into an ``isError`` result
carrying the exception's message. Pure Python: no HTTP here.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match

from zemcp import elicitation
from zemcp.context import Context

log = logging.getLogger("zemcp.tools")

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


class ToolError(Exception):
    """Raise from a handler to return an ``isError`` result whose text is exactly the message."""


@dataclass
class Tool:
    """A registered tool.

    Attributes:
        name: unique name, 1-128 characters of ``A-Za-z0-9_.-``.
        handler: the function called with the arguments as keywords.
        description: what the tool does (shown to the model).
        input_schema: JSON Schema of the arguments, rooted at ``type: object``.
        title: optional display name.
    """

    name: str
    handler: Callable[..., Any]
    description: str
    input_schema: dict
    title: str | None = None
    context_param: str | None = field(default=None, init=False)
    _validator: jsonschema.Draft202012Validator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must be 1-128 characters of A-Z, a-z, 0-9, '_', '.', '-'")
        if self.input_schema.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: input_schema must have type 'object'")
        jsonschema.Draft202012Validator.check_schema(self.input_schema)
        self._validator = jsonschema.Draft202012Validator(self.input_schema)
        for param in inspect.signature(self.handler).parameters.values():
            if param.name == "ctx" or param.annotation in (Context, "Context"):
                self.context_param = param.name

    def definition(self) -> dict:
        """The tool as ``tools/list`` shows it."""
        tool = {"name": self.name, "description": self.description, "inputSchema": self.input_schema}
        if self.title:
            tool["title"] = self.title
        return tool

    def check_arguments(self, arguments: dict) -> str | None:
        """Validate arguments; returns what is wrong (naming the argument), or None."""
        error = best_match(self._validator.iter_errors(arguments))
        if error is None:
            return None
        where = ".".join(str(p) for p in error.absolute_path)
        return f"invalid arguments for tool {self.name!r}{' at ' + where if where else ''}: {error.message}"

    def run(self, arguments: dict, ctx: Context) -> dict:
        """Call the handler and shape its outcome as a ``CallToolResult``.

        Raises:
            zemcp.ElicitAborted: the request can no longer be answered (the caller sends
                nothing, or nothing reaches the client).
        """
        kwargs = dict(arguments)
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        try:
            return to_result(self.handler(**kwargs))
        except elicitation.ElicitAborted:
            raise
        except ToolError as exc:
            return error_result(str(exc))
        except Exception as exc:
            log.exception("tool %r raised", self.name)
            return error_result(str(exc) or type(exc).__name__)


def error_result(text: str) -> dict:
    """An ``isError`` result with one text item."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


def to_result(value: Any) -> dict:
    """Shape a handler's return value as a ``CallToolResult``.

    ``str`` becomes one text item; a list is taken as content items; a dict with
    ``content`` is passed through; anything else is sent as JSON text.
    """
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}], "isError": False}
    if isinstance(value, list):
        return {"content": value, "isError": False}
    if isinstance(value, dict) and "content" in value:
        return {"isError": False, **value}
    return {"content": [{"type": "text", "text": json.dumps(value)}], "isError": False}


class ToolRegistry:
    """Tools by name, in registration order."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def add(self, tool: Tool) -> Tool:
        """Register ``tool``; raises ValueError when the name is taken."""
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def definitions(self) -> list[dict]:
        """Every tool as ``tools/list`` shows it."""
        return [tool.definition() for tool in self._tools.values()]
