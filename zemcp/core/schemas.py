"""A tool's schemas from its handler (MCP server/tools): the ``inputSchema`` from the
signature, the ``outputSchema`` from the return annotation, the parameter that takes the
call's :class:`~zemcp.core.context.Context`, and the ``structuredContent`` of a return value.

Each parameter's and the return value's schema is its type's (:mod:`zemcp.core.type_schemas`
gives the type mapping), described by ``Annotated`` or the handler's ``Args:`` docstring
section. The named definitions of pydantic's schemas (``$defs``) are lifted to the root of the
tool's schema, where their references resolve. Pure Python: no HTTP here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from zemcp.core import pydantic_types
from zemcp.core.context import Context
from zemcp.core.docstrings import docstring_entries
from zemcp.core.type_schemas import (
    annotation_schema,
    label,
    property_schema,
    to_json,
    type_hints,
    unannotate,
)

#: Keywords whose values are JSON data, not schemas: no ``$defs`` is looked for inside them.
_DATA_KEYWORDS = ("default", "const", "enum", "examples")


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

    A parameter is required exactly when it has no default, in the signature or in a pydantic
    ``Field(default=...)`` or ``Field(default_factory=...)`` of its annotation;
    JSON-serializable defaults are given as ``default``. Unknown arguments are refused (``additionalProperties: false``).
    A handler without parameters gets ``{"type": "object", "additionalProperties": false}``.
    The ``$defs`` of pydantic models among the parameters are at the root (:func:`lift_defs`).

    Args:
        func: the handler; its parameters must be keyword-passable.
    Returns:
        the schema, and the name of the context parameter (left out of the schema) or None.
    Raises:
        TypeError: a ``*args``, ``**kwargs`` or positional-only parameter, a parameter of
            a type outside the mapping, a pydantic ``Field(...)`` as a default, a default given
            twice (see :func:`zemcp.core.pydantic_types.parameter_default`) or a pydantic alias
            (:func:`zemcp.core.pydantic_types.check_parameter_field`); the message names the
            parameter and the type.
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
        annotation = hints.get(param.name, Any)
        pydantic_types.check_parameter_field(annotation, where)
        default, factory = pydantic_types.parameter_default(annotation, param.default, where)
        properties[param.name] = property_schema(annotation, where, notes.get(param.name), default)
        if default is param.empty and factory is None:
            required.append(param.name)
    schema: dict[str, Any] = {"type": "object"}
    if properties:
        schema["properties"] = properties
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return lift_defs(schema, label(func)), context


def field_defaults(func: Callable[..., Any]) -> dict[str, Callable[[], Any]]:
    """What makes the default of each parameter whose default is a pydantic ``Field``'s
    (``Annotated[int, Field(default=7)]``), for a call that leaves the argument out: the
    signature has none, so the handler is given it.

    Args:
        func: the handler (its schema derived by :func:`input_schema`, which checked it).
    Returns:
        ``{parameter name: a callable of no arguments returning the default}``: the
        ``default_factory``, or one that returns the ``default``.
    """
    hints = type_hints(func)
    made: dict[str, Callable[[], Any]] = {}
    for param in inspect.signature(func).parameters.values():
        if param.default is not param.empty:
            continue
        default, factory = pydantic_types.parameter_default(hints.get(param.name, Any), param.default, param.name)
        if factory is not None:
            made[param.name] = factory
        elif default is not param.empty:
            made[param.name] = _constant(default)
    return made


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


def output_schema(func: Callable[..., Any]) -> dict[str, Any] | None:
    """A tool's ``outputSchema`` from the handler's return annotation.

    A dataclass, TypedDict, pydantic model or ``dict[str, X]`` gives an object schema as is;
    any other type is wrapped as ``{"type": "object", "properties": {"result": ...},
    "required": ["result"]}`` (see :func:`wraps_result`). A type of pydantic's gets pydantic's
    serialization schema, the shape of what the handler's value is sent as.

    Args:
        func: the handler.
    Returns:
        the schema, or None when the handler has no return annotation.
    Raises:
        TypeError: the return type is outside the mapping.
    """
    if "return" not in type_hints(func):
        return None
    schema = _return_schema(func)
    if not _is_object(schema):
        schema = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    return lift_defs(schema, label(func))


def wraps_result(func: Callable[..., Any]) -> bool:
    """True when :func:`output_schema` wraps the handler's return value under ``result``.

    Raises:
        TypeError: the return type is outside the mapping.
    """
    return not _is_object(_return_schema(func))


def returns_model(func: Callable[..., Any]) -> bool:
    """True when the handler's return annotation is a pydantic model (``-> Model``), whose
    ``outputSchema`` is then derived without ``structured_output=True``.

    Raises:
        TypeError: the annotations cannot be resolved.
    """
    returned, _ = unannotate(type_hints(func).get("return", Any))
    return pydantic_types.is_model(returned)


def _return_schema(func: Callable[..., Any]) -> dict[str, Any]:
    returned = type_hints(func).get("return", Any)
    where = f"{label(func)} return value"
    if pydantic_types.involves(returned):
        # Serialization mode: a model's computed fields are part of what is sent.
        return pydantic_types.json_schema(returned, "serialization", where)
    return annotation_schema(returned, where, frozenset())


def lift_defs(schema: dict[str, Any], where: str) -> dict[str, Any]:
    """The schema with every ``$defs`` inside it merged into one at its root.

    pydantic's references are ``#/$defs/<name>``, relative to the root of the document: a
    model's schema placed under ``properties`` keeps them only when its definitions move to
    the root. Nothing else changes; the schema given is not modified.

    Args:
        schema: a tool's ``inputSchema`` or ``outputSchema``, as composed.
        where: the handler, for the message.
    Returns:
        a new schema when there were definitions, else ``schema`` itself.
    Raises:
        TypeError: two different definitions have one name (two models of one name from
            different modules).
    """
    lifted: dict[str, Any] = {}

    def lift(node: Any) -> Any:
        if isinstance(node, list):
            return [lift(item) for item in node]
        if not isinstance(node, dict):
            return node
        kept = {}
        for key, value in node.items():
            if key == "$defs" and isinstance(value, dict):
                for name, definition in value.items():
                    definition = lift(definition)
                    if lifted.setdefault(name, definition) != definition:
                        raise TypeError(
                            f"{where}: two different types are both named {name!r} in the schema's $defs; "
                            "rename one of them"
                        )
            else:
                kept[key] = value if key in _DATA_KEYWORDS else lift(value)
        return kept

    result: dict[str, Any] = lift(schema)
    if not lifted:
        return schema
    result["$defs"] = lifted
    return result


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
