"""A tool handler's return value shaped as a ``CallToolResult`` (MCP server/tools, "Tool Result").

A handler returns a ``str`` (one text item), a list of content items, a full
``CallToolResult`` dict (which may carry ``_meta``, checked by
:func:`zemcp.protocol.metadata.checked_meta`), or any other value (sent as JSON text). A tool with an output
schema returns the structured value itself, sent as ``structuredContent`` and as its JSON
text, as is a pydantic model without one. Pure Python: no HTTP here.
"""

from __future__ import annotations

import json
from typing import Any

from zemcp.core import pydantic_types
from zemcp.core.schemas import structured_content
from zemcp.core.type_schemas import to_json
from zemcp.protocol.metadata import checked_meta


def error_result(text: str) -> dict[str, Any]:
    """An ``isError`` result with one text item."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


def to_result(value: Any) -> dict[str, Any]:
    """Shape a handler's return value as a ``CallToolResult``.

    ``str`` becomes one text item; a list of content items (dicts with ``type``) is taken as
    the content; a dict with ``content`` is passed through (its ``_meta`` with it); a pydantic model that dumps to an
    object is that object as ``structuredContent`` (MCP server/tools, "Structured Content":
    allowed without an ``outputSchema``) and its JSON text; anything else (numbers, other
    lists and dicts, dataclasses, Enums, None) is sent as its JSON text.

    Raises:
        TypeError: the value has no JSON form (see :func:`zemcp.core.type_schemas.to_json`),
            or is a malformed ``CallToolResult``.
        ValueError: the value holds NaN, an infinity or a reference cycle, or a ``_meta``
            key breaks the rules of :func:`zemcp.protocol.metadata.checked_meta`.
    """
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}], "isError": False}
    if isinstance(value, list) and all(isinstance(item, dict) and "type" in item for item in value):
        return {"content": value, "isError": False}
    if isinstance(value, dict) and "content" in value:
        _check_result(value)
        return {"isError": False, **value}
    data = to_json(value)
    if pydantic_types.is_model_instance(value) and isinstance(data, dict):
        return _structured(data)
    return {"content": [{"type": "text", "text": json.dumps(data, allow_nan=False)}], "isError": False}


def structured_result(value: Any, wrapped: bool) -> dict[str, Any]:
    """Shape the return value of a tool with an output schema as a ``CallToolResult``.

    A dict with ``structuredContent`` is the result as it is (``isError`` false added, its
    ``_meta`` checked); any
    other value becomes the ``structuredContent`` (see
    :func:`zemcp.core.schemas.structured_content`), with its JSON text as the one text item.
    The tool checks the result against its output schema.

    Args:
        value: the handler's return value.
        wrapped: the output schema has the value under ``result`` (see
            :func:`zemcp.core.schemas.wraps_result`).
    Raises:
        TypeError: the value has no JSON form.
        ValueError: the value holds NaN, an infinity or a reference cycle, or a bad ``_meta`` key.
    """
    if isinstance(value, dict) and "structuredContent" in value:
        _check_meta(value)
        return {"isError": False, **value}
    return _structured(structured_content(value, wrapped))


def _structured(structured: Any) -> dict[str, Any]:
    # The JSON text too, for clients that read only content (MCP server/tools, "Structured Content").
    return {
        "content": [{"type": "text", "text": json.dumps(structured, allow_nan=False)}],
        "structuredContent": structured,
        "isError": False,
    }


def _check_result(result: dict[str, Any]) -> None:
    # A malformed CallToolResult would reach the client as a protocol violation.
    content = result["content"]
    if not isinstance(content, list) or not all(
        isinstance(item, dict) and isinstance(item.get("type"), str) for item in content
    ):
        raise TypeError("a CallToolResult's content must be a list of content items (dicts with a 'type')")
    if not isinstance(result.get("isError", False), bool):
        raise TypeError("a CallToolResult's isError must be true or false")
    _check_meta(result)


def _check_meta(result: dict[str, Any]) -> None:
    if "_meta" in result:
        checked_meta(result["_meta"], "the CallToolResult")
