"""A tool's schemas from its handler (MCP server/tools): the ``inputSchema`` from the
signature, the ``outputSchema`` from the return annotation, the parameter that takes the
call's :class:`~zemcp.core.context.Context`, and the ``structuredContent`` of a return value.

Each parameter's and the return value's schema is its type's (:mod:`zemcp.core.type_schemas`
gives the type mapping), described by ``Annotated`` or the handler's ``Args:`` docstring
section. Pure Python: no HTTP here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from zemcp.core.context import Context
from zemcp.core.docstrings import docstring_entries
from zemcp.core.type_schemas import (
    annotation_schema,
    label,
    property_schema,
    to_json,
    type_hints,
)


def context_parameter(func: Callable[..., Any]) -> str | None:
    """The name of the parameter that receives the call's :class:`zemcp.Context`.

    That is a parameter annotated ``Context`` (under any name), or one named ``ctx`` without
    an annotation.

    Args:
        func: a tool handler.
    Returns:
        the parameter's name, or None when the handler takes no context.
    Raises:
        TypeError: the annotations cannot be resolved (see :func:`zemcp.core.type_schemas.type_hints`).
    """
    hints = type_hints(func)
    for param in inspect.signature(func).parameters.values():
        if hints.get(param.name) is Context or (param.name == "ctx" and param.annotation is param.empty):
            return param.name
    return None


def input_schema(func: Callable[..., Any]) -> tuple[dict[str, Any], str | None]:
    """A tool's ``inputSchema`` from the handler's signature.

    A parameter is required exactly when it has no default; JSON-serializable defaults are
    given as ``default``. Unknown arguments are refused (``additionalProperties: false``).
    A handler without parameters gets ``{"type": "object", "additionalProperties": false}``.

    Args:
        func: the handler; its parameters must be keyword-passable.
    Returns:
        the schema, and the name of the context parameter (left out of the schema) or None.
    Raises:
        TypeError: a ``*args``, ``**kwargs`` or positional-only parameter, or a parameter of
            a type outside the mapping; the message names the parameter and the type.
    """
    hints = type_hints(func)
    context = context_parameter(func)
    notes = docstring_entries(func)
    properties: dict[str, dict[str, Any]] = {}
    required: list[str] = []
    for param in inspect.signature(func).parameters.values():
        if param.name == context:
            continue
        where = f"{label(func)} parameter {param.name!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            kind = (
                "*args"
                if param.kind is param.VAR_POSITIONAL
                else "**kwargs"
                if param.kind is param.VAR_KEYWORD
                else "positional-only"
            )
            raise TypeError(
                f"{where}: {kind} parameters cannot be tool arguments; declare each argument as a "
                "named parameter, or pass input_schema and take the arguments as keywords"
            )
        properties[param.name] = property_schema(
            hints.get(param.name, Any), where, notes.get(param.name), param.default
        )
        if param.default is param.empty:
            required.append(param.name)
    schema: dict[str, Any] = {"type": "object"}
    if properties:
        schema["properties"] = properties
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema, context


def output_schema(func: Callable[..., Any]) -> dict[str, Any] | None:
    """A tool's ``outputSchema`` from the handler's return annotation.

    A dataclass, TypedDict or ``dict[str, X]`` gives an object schema as is; any other type
    is wrapped as ``{"type": "object", "properties": {"result": ...}, "required": ["result"]}``
    (see :func:`wraps_result`).

    Args:
        func: the handler.
    Returns:
        the schema, or None when the handler has no return annotation.
    Raises:
        TypeError: the return type is outside the mapping.
    """
    hints = type_hints(func)
    if "return" not in hints:
        return None
    schema = annotation_schema(hints["return"], f"{label(func)} return value", frozenset())
    if _is_object(schema):
        return schema
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}


def wraps_result(func: Callable[..., Any]) -> bool:
    """True when :func:`output_schema` wraps the handler's return value under ``result``.

    Raises:
        TypeError: the return type is outside the mapping.
    """
    returned = type_hints(func).get("return", Any)
    return not _is_object(annotation_schema(returned, f"{label(func)} return value", frozenset()))


def structured_content(value: Any, wrapped: bool) -> Any:
    """The ``structuredContent`` for a handler's return value: its JSON form (see
    :func:`zemcp.core.type_schemas.to_json`), as ``{"result": ...}`` when ``wrapped``.

    Raises:
        TypeError: ``value`` has no JSON form.
    """
    data = to_json(value)
    return {"result": data} if wrapped else data


def _is_object(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "object"
