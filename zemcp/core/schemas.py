"""JSON Schemas (dialect 2020-12) from Python declarations, and JSON values back to Python.

Tools declare their arguments as typed parameters and elicitations as typed classes; this
module turns those declarations into the schemas MCP sends (a tool's ``inputSchema`` and
``outputSchema``, an elicitation's ``requestedSchema``) and turns the validated JSON that
comes back into the values the code declared (Enum members, dataclass instances, tuples).

Type mapping (Python -> JSON Schema):

- ``int`` -> ``integer``; ``float`` -> ``number`` (integers accepted); ``str`` -> ``string``;
  ``bool`` -> ``boolean``;
- ``Literal[...]`` and ``enum.Enum`` subclasses -> ``enum`` of the (members') values, with
  their ``type``;
- ``X | None`` and ``Optional[X]`` -> ``anyOf`` X and ``null``;
- ``list[X]`` and ``tuple[X, ...]`` -> ``array`` with ``items``; ``tuple[X, Y]`` -> ``array``
  with ``prefixItems`` and a fixed length;
- ``dict[str, X]`` -> ``object`` with ``additionalProperties``;
- dataclasses and ``TypedDict`` -> ``object`` with ``properties``, ``required`` and
  ``additionalProperties: false``;
- ``Any`` or no annotation -> no constraint.

``Annotated[X, "text"]`` sets the ``description``; ``Annotated[X, {...}]`` merges the dict's
keywords into the schema (``{"minimum": 0}``, ``{"title": "Count"}``);
``Annotated[X, McpHeader("Region")]`` adds ``"x-mcp-header": "Region"`` (see
:mod:`zemcp.protocol.param_headers`). Without them, the description comes from the Google-style ``Args:``
section of a function's docstring or the ``Attributes:`` section of a class's. Pure Python:
no HTTP here.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, NotRequired, Required, Union, cast

# zemcp.core.context imports this module only inside Context.elicit, so this import is not circular.
from zemcp.core.context import Context
from zemcp.protocol.param_headers import X_MCP_HEADER, McpHeader

_SUPPORTED = (
    "int, float, str, bool, Literal[...], an Enum, X | None, list[X], tuple[...], dict[str, X], "
    "a dataclass, a TypedDict or Any"
)
_ELICITABLE = "str, int, float, bool, Literal of str values, an Enum of str values, or X | None of these"
_NONE = type(None)
_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (_NONE, "null"))
_SECTION = re.compile(r"^[A-Z][A-Za-z ]*:$")
_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_ENTRY_SECTIONS = {"Args:", "Arguments:", "Parameters:", "Attributes:"}


# -- tools -------------------------------------------------------------------------------


def type_hints(obj: Any) -> dict[str, Any]:
    """The resolved annotations of a function or class, ``Annotated`` metadata kept.

    Args:
        obj: a function, dataclass or TypedDict.
    Returns:
        ``{name: annotation}``; a function's return annotation is under ``"return"``.
    Raises:
        TypeError: an annotation names something that is not importable at run time.
    """
    try:
        return typing.get_type_hints(obj, include_extras=True)
    except NameError as exc:
        raise TypeError(
            f"cannot resolve the type hints of {_label(obj)}: {exc}; import the names used in "
            "its annotations at module level (not only under TYPE_CHECKING)"
        ) from None


def context_parameter(func: Callable[..., Any]) -> str | None:
    """The name of the parameter that receives the call's :class:`zemcp.Context`.

    That is a parameter annotated ``Context`` (under any name), or one named ``ctx`` without
    an annotation.

    Args:
        func: a tool handler.
    Returns:
        the parameter's name, or None when the handler takes no context.
    Raises:
        TypeError: the annotations cannot be resolved (see :func:`type_hints`).
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
        where = f"{_label(func)} parameter {param.name!r}"
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
        properties[param.name] = _property(hints.get(param.name, Any), where, notes.get(param.name), param.default)
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
    schema = _schema(hints["return"], f"{_label(func)} return value", frozenset())
    if _is_object(schema):
        return schema
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}


def wraps_result(func: Callable[..., Any]) -> bool:
    """True when :func:`output_schema` wraps the handler's return value under ``result``.

    Raises:
        TypeError: the return type is outside the mapping.
    """
    returned = type_hints(func).get("return", Any)
    return not _is_object(_schema(returned, f"{_label(func)} return value", frozenset()))


def structured_content(value: Any, wrapped: bool) -> Any:
    """The ``structuredContent`` for a handler's return value: its JSON form (see
    :func:`to_json`), as ``{"result": ...}`` when ``wrapped``.

    Raises:
        TypeError: ``value`` has no JSON form.
    """
    data = to_json(value)
    return {"result": data} if wrapped else data


def to_json(value: Any) -> Any:
    """The JSON form of a Python value: dataclasses as objects of their fields, Enums by value,
    tuples as lists, recursively.

    Raises:
        TypeError: a value that JSON cannot carry (including dict keys that are not str).
    """
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"dict key {key!r} is not a str; JSON objects have string keys")
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    raise TypeError(
        f"a {type(value).__qualname__} has no JSON form; use str, int, float, bool, None, "
        "an Enum, a dataclass, or lists and dicts of these"
    )


def to_python(annotation: Any, value: Any) -> Any:
    """Turn a JSON value that passed the annotation's schema into what the annotation declares.

    Enums become members, dataclasses instances (recursively), tuples tuples, ``float`` a
    float even when the JSON had an integer; a TypedDict stays a dict (its values converted).

    Args:
        annotation: the declared type (as in a signature, ``Annotated`` allowed).
        value: the validated JSON value.
    Returns:
        the Python value.
    Raises:
        ValueError, TypeError: a value the schema did not check (an Enum value that is
            not a member, or whatever a dataclass's ``__post_init__`` raises).
    """
    tp, _ = _unannotate(annotation)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if value is None:
        return None
    if tp is float:
        return float(value)
    if tp is int:
        return int(value)
    if origin in (Union, types.UnionType):
        return to_python(next(a for a in args if a is not _NONE), value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if tp is list or origin is list:
        return [to_python(args[0] if args else Any, item) for item in value]
    if tp is tuple or origin is tuple:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            return tuple(to_python(args[0] if args else Any, item) for item in value)
        return tuple(to_python(t, item) for t, item in zip(args, value))
    if tp is dict or origin is dict:
        return {key: to_python(args[1] if args else Any, item) for key, item in value.items()}
    if _is_typeddict(tp):
        hints = _member_hints(tp)
        return {key: to_python(hints.get(key, Any), item) for key, item in value.items()}
    if dataclasses.is_dataclass(tp):
        cls = cast(type, tp)  # an annotation: the dataclass itself, not an instance
        hints = _member_hints(cls)
        return cls(**{key: to_python(hints.get(key, Any), item) for key, item in value.items()})
    return value


# -- typed elicitation -------------------------------------------------------------------


def elicitation_schema(cls: type) -> dict[str, Any]:
    """A ``requestedSchema`` from a dataclass or TypedDict of primitive fields.

    Allowed field types: str, int, float, bool, ``Literal`` of str values, an Enum of str
    values, and ``X | None`` of these, which makes the field optional. A field is required
    when it has no default and is not ``X | None``; defaults other than None become
    ``default``. Descriptions come from ``Annotated[X, "text"]`` or the class docstring's
    ``Attributes:`` section; ``Annotated[X, {"title": ..., "format": "email", ...}]`` adds
    keywords.

    Args:
        cls: the dataclass or TypedDict class.
    Returns:
        ``{"type": "object", "properties": {...}, "required": [...]}``.
    Raises:
        TypeError: ``cls`` is neither, has no fields, or a field has another type; the
            message names the field.
    """
    if not (_is_typeddict(cls) or (isinstance(cls, type) and dataclasses.is_dataclass(cls))):
        raise TypeError(f"an elicitation schema comes from a dataclass or TypedDict class, not {cls!r}")
    notes = docstring_entries(cls)
    properties: dict[str, dict[str, Any]] = {}
    required: list[str] = []
    for name, hint, needed, default in _members(cls):
        where = f"{cls.__qualname__}.{name}"
        schema, optional = _primitive(hint, where)
        if default is not dataclasses.MISSING and default is not None:
            schema["default"] = _json_default(default, where)
        if notes.get(name) and "description" not in schema:
            schema["description"] = notes[name]
        properties[name] = schema
        if needed and not optional:
            required.append(name)
    if not properties:
        raise TypeError(f"{cls.__qualname__} has no fields; an elicitation asks for at least one")
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def from_content(cls: type, content: dict[str, Any]) -> Any:
    """The instance for accepted elicitation content already validated against
    :func:`elicitation_schema` of ``cls``.

    Args:
        cls: the dataclass or TypedDict class the schema came from.
        content: the accepted content.
    Returns:
        a ``cls`` instance (a dict for a TypedDict). A dataclass field the user left empty
        gets its default, or None when it is ``X | None`` without one.
    Raises:
        ValueError: a value that the schema does not cover (an Enum value that is not a member).
    """
    hints = _member_hints(cls)
    # Content may carry keys the class does not have (the schema allows them); drop them.
    values = {key: to_python(hints[key], item) for key, item in content.items() if key in hints}
    if _is_typeddict(cls):
        return values
    for name, _, needed, _ in _members(cls):
        if needed and name not in values:
            values[name] = None
    return cls(**values)


# -- asking for missing tool arguments ---------------------------------------------------

#: The ``format`` values the elicitation schema subset allows (MCP client/elicitation).
_FORM_FORMATS = ("email", "uri", "date", "date-time")


def form_field(prop: Any, titled_one_of: bool) -> dict[str, Any] | None:
    """The ``requestedSchema`` field that asks for a tool argument, from its input schema property.

    Only a primitive property can be asked for in a form (MCP client/elicitation,
    "Requested Schema"): ``type`` exactly ``"string"``, ``"number"``, ``"integer"`` or
    ``"boolean"``, and for a string ``enum`` only of non-empty strings (a number ``enum``
    has no form). Kept from the property: ``title``, ``description``, ``default`` (when it
    fits the type and the options); for strings ``minLength``, ``maxLength``, ``format``
    (``email``, ``uri``, ``date``, ``date-time`` only) and the options; for numbers
    ``minimum`` and ``maximum``. Other keywords (``pattern``, ``multipleOf`` ...) have no
    place in the form; the answer is checked against the whole input schema afterwards.

    Options with display titles come from ``enumNames`` (as many as ``enum`` has members) or
    from a ``oneOf`` of ``{"const", "title"}``, and are sent in the form the protocol
    version has: a titled ``oneOf`` from 2025-11-25 (SEP-1330), ``enum`` with ``enumNames``
    before.

    Args:
        prop: the property's schema in the tool's ``inputSchema``.
        titled_one_of: the client's version has titled single-select (2025-11-25 on).
    Returns:
        the field's schema, or None when the property cannot be asked for in a form.
    """
    if not isinstance(prop, dict) or prop.get("type") not in ("string", "number", "integer", "boolean"):
        return None
    kind = prop["type"]
    field: dict[str, Any] = {"type": kind}
    for key in ("title", "description"):
        if isinstance(prop.get(key), str):
            field[key] = prop[key]
    if kind == "string":
        options = _string_options(prop)
        if options is False:
            return None
        for key in ("minLength", "maxLength"):
            if isinstance(prop.get(key), int) and not isinstance(prop[key], bool) and prop[key] >= 0:
                field[key] = prop[key]
        if prop.get("format") in _FORM_FORMATS:
            field["format"] = prop["format"]
        if options is not None:
            values, titles = options
            if titles is None:
                field["enum"] = values
            elif titled_one_of:
                field["oneOf"] = [{"const": v, "title": t} for v, t in zip(values, titles)]
            else:
                field["enum"], field["enumNames"] = values, titles
        default = prop.get("default")
        if isinstance(default, str) and (options is None or default in options[0]):
            field["default"] = default
    elif kind == "boolean":
        if isinstance(prop.get("default"), bool):
            field["default"] = prop["default"]
    else:
        if "enum" in prop or "const" in prop:
            return None
        for key in ("minimum", "maximum", "default"):
            if isinstance(prop.get(key), (int, float)) and not isinstance(prop[key], bool):
                field[key] = prop[key]
    return field


def _string_options(prop: dict[str, Any]) -> tuple[list[str], list[str] | None] | Literal[False] | None:
    # (values, titles or None) of a string select; None for free text; False when the
    # options cannot be offered in a form (empty or non-string values, or a const).
    if "const" in prop:
        return False
    if "enum" in prop:
        values = prop["enum"]
        if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
            return False
        names = prop.get("enumNames")
        titled = isinstance(names, list) and len(names) == len(values) and all(isinstance(n, str) for n in names)
        return values, list(names) if titled and isinstance(names, list) else None
    if "oneOf" in prop:
        choices = prop["oneOf"]
        if (
            not isinstance(choices, list)
            or not choices
            or not all(
                isinstance(c, dict)
                and set(c) == {"const", "title"}
                and isinstance(c["const"], str)
                and c["const"]
                and isinstance(c["title"], str)
                for c in choices
            )
        ):
            return False
        return [c["const"] for c in choices], [c["title"] for c in choices]
    return None


# -- internals ---------------------------------------------------------------------------


def _label(obj: Any) -> str:
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
    return f"{name}()" if callable(obj) and not isinstance(obj, type) else name


def _unannotate(tp: Any) -> tuple[Any, dict[str, Any]]:
    """Strip ``Annotated`` and ``Required``/``NotRequired``; the keywords their metadata gives."""
    keywords: dict[str, Any] = {}
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            for item in tp.__metadata__:
                if isinstance(item, str):
                    keywords["description"] = item
                elif isinstance(item, dict):
                    keywords.update(item)
                elif isinstance(item, McpHeader):
                    keywords[X_MCP_HEADER] = item.name
            tp = tp.__origin__
        elif origin in (Required, NotRequired):
            tp = typing.get_args(tp)[0]
        else:
            return tp, keywords


def _is_typeddict(tp: Any) -> bool:
    # Duck-typed so that typing_extensions.TypedDict classes count too.
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _is_object(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "object"


def _member_hints(cls: type) -> dict[str, Any]:
    return type_hints(cls) if (_is_typeddict(cls) or dataclasses.is_dataclass(cls)) else {}


def _members(cls: type) -> list[tuple[str, Any, bool, Any]]:
    """``(name, annotation, required, default or MISSING)`` of each field set at construction."""
    hints = type_hints(cls)
    if _is_typeddict(cls):
        members = []
        for name, hint in hints.items():
            # Required/NotRequired inside string annotations escape __required_keys__ before
            # Python 3.12, so the resolved hint decides when it says.
            marker = typing.get_origin(_strip_annotated(hint))
            needed = marker is Required or (marker is not NotRequired and name in cls.__required_keys__)  # type: ignore[attr-defined]  # a TypedDict class
            members.append((name, hint, needed, dataclasses.MISSING))
        return members
    return [
        (
            f.name,
            hints.get(f.name, Any),
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            f.default,
        )
        for f in dataclasses.fields(cls)
        if f.init
    ]


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = tp.__origin__
    return tp


def _json_default(value: Any, where: str) -> Any:
    try:
        data = to_json(value)
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{where}: the default {value!r} has no JSON form ({exc})") from None
    return data


def _accepts_null(schema: dict[str, Any]) -> bool:
    if "type" not in schema and "anyOf" not in schema:
        return True
    return schema.get("type") == "null" or any(option.get("type") == "null" for option in schema.get("anyOf", ()))


def _property(
    annotation: Any, where: str, note: str | None, default: Any, seen: frozenset[type] = frozenset()
) -> dict[str, Any]:
    schema = _schema(annotation, where, seen)
    if note and "description" not in schema:
        schema["description"] = note
    if default is None and not _accepts_null(schema):
        # ``x: str = None`` means "a str, or left out": let an explicit null through too.
        header = schema.pop(X_MCP_HEADER, None)
        schema = {"anyOf": [schema, {"type": "null"}]}
        if header is not None:
            # Kept on the property, where registration refuses it for having no single type.
            schema[X_MCP_HEADER] = header
    if default is not inspect.Parameter.empty and default is not dataclasses.MISSING:
        try:
            schema["default"] = _json_default(default, where)
        except TypeError:
            # Such a default still applies when the argument is left out; it just isn't shown.
            pass
    return schema


def _schema(annotation: Any, where: str, seen: frozenset[type]) -> dict[str, Any]:
    tp, keywords = _unannotate(annotation)
    schema = _bare_schema(tp, where, seen)
    schema.update(keywords)
    return schema


def _bare_schema(tp: Any, where: str, seen: frozenset[type]) -> dict[str, Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any or tp is inspect.Parameter.empty:
        return {}
    for py, name in _JSON_TYPES:
        if tp is py:
            return {"type": name}
    if origin is Literal:
        return _enum_schema(list(args), where, f"Literal{list(args)}")
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema([m.value for m in tp], where, tp.__qualname__)
    if origin in (Union, types.UnionType):
        others = [a for a in args if a is not _NONE]
        if len(others) != 1:
            raise TypeError(f"{where}: the union {tp!r} is not supported, only X | None; supported types: {_SUPPORTED}")
        return _nullable(_schema(others[0], where, seen))
    if tp is list or origin is list:
        return {"type": "array", "items": _schema(args[0], f"{where} items", seen)} if args else {"type": "array"}
    if tp is tuple or origin is tuple:
        return _tuple_schema(args, where, seen)
    if tp is dict or origin is dict:
        return _dict_schema(args, where, seen)
    if isinstance(tp, type) and (dataclasses.is_dataclass(tp) or _is_typeddict(tp)):
        return _object_schema(tp, where, seen)
    raise TypeError(f"{where}: type {tp!r} is not supported; supported types: {_SUPPORTED}")


def _enum_schema(values: list[Any], where: str, what: str) -> dict[str, Any]:
    if not values:
        raise TypeError(f"{where}: {what} has no values to choose from")
    kinds = []
    for value in values:
        kind = next((name for py, name in _JSON_TYPES if type(value) is py), None)
        if kind is None:
            raise TypeError(
                f"{where}: {what} has the value {value!r}; enum values must be str, int, float, bool or None"
            )
        if kind not in kinds:
            kinds.append(kind)
    return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": values}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if not schema:
        return schema
    # Text, titles and the header mark belong to the parameter, not to one branch of it.
    outer = {k: schema.pop(k) for k in ("title", "description", X_MCP_HEADER) if k in schema}
    return {"anyOf": [schema, {"type": "null"}], **outer}


def _tuple_schema(args: tuple[Any, ...], where: str, seen: frozenset[type]) -> dict[str, Any]:
    if not args:
        return {"type": "array"}
    if len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": _schema(args[0], f"{where} items", seen)}
    return {
        "type": "array",
        "prefixItems": [_schema(t, f"{where} item {i}", seen) for i, t in enumerate(args)],
        "items": False,
        "minItems": len(args),
        "maxItems": len(args),
    }


def _dict_schema(args: tuple[Any, ...], where: str, seen: frozenset[type]) -> dict[str, Any]:
    if not args:
        return {"type": "object"}
    key, _ = _unannotate(args[0])
    if key is not str:
        raise TypeError(f"{where}: dict keys must be str (JSON object keys are strings), not {key!r}")
    values = _schema(args[1], f"{where} values", seen)
    return {"type": "object", "additionalProperties": values} if values else {"type": "object"}


def _object_schema(cls: type, where: str, seen: frozenset[type]) -> dict[str, Any]:
    if cls in seen:
        raise TypeError(f"{where}: {cls.__qualname__} contains itself; recursive types need an explicit schema")
    seen = seen | {cls}
    notes = docstring_entries(cls)
    properties: dict[str, dict[str, Any]] = {}
    required: list[str] = []
    for name, hint, needed, default in _members(cls):
        properties[name] = _property(
            hint, f"{where} field {name!r} of {cls.__qualname__}", notes.get(name), default, seen
        )
        if needed:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _primitive(annotation: Any, where: str) -> tuple[dict[str, Any], bool]:
    """An elicitation field's schema, and whether the field is optional (``X | None``)."""
    tp, keywords = _unannotate(annotation)
    optional = False
    if typing.get_origin(tp) in (Union, types.UnionType):
        others = [a for a in typing.get_args(tp) if a is not _NONE]
        if len(others) == 1 and len(typing.get_args(tp)) == 2:
            tp, inner = _unannotate(others[0])
            keywords = {**inner, **keywords}
            optional = True
    schema: dict[str, Any] | None = None
    for py, name in _JSON_TYPES[:4]:
        if tp is py:
            schema = {"type": name}
    if typing.get_origin(tp) is Literal:
        values = list(typing.get_args(tp))
        if all(isinstance(v, str) for v in values):
            schema = {"type": "string", "enum": values}
    elif isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        if all(isinstance(v, str) for v in values):
            schema = {"type": "string", "enum": values}
    if schema is None:
        raise TypeError(f"field {where}: type {tp!r} cannot be elicited; allowed: {_ELICITABLE}")
    schema.update(keywords)
    return schema, optional


def docstring_entries(obj: Any) -> dict[str, str]:
    """Descriptions by name from the ``Args:``/``Attributes:`` sections of a Google-style docstring."""
    entries: dict[str, str] = {}
    current: str | None = None
    depth: int | None = None
    for line in _doc_lines(obj):
        indent = len(line) - len(line.lstrip())
        text = line.strip()
        if indent == 0 and text:
            current, depth = None, None
            if text in _ENTRY_SECTIONS:
                current = ""
            continue
        if current is None or not text:
            continue
        if depth is None:
            depth = indent
        match = _ENTRY.match(text) if indent == depth else None
        if match:
            current = match.group(1)
            entries[current] = match.group(2)
        elif current:
            entries[current] = f"{entries[current]} {text}".strip()
    return entries


def docstring_summary(obj: Any) -> str | None:
    """The first paragraph of a docstring, before any section such as ``Args:``, on one line.

    Args:
        obj: a function or class.
    Returns:
        the text, or None when there is none.
    """
    paragraph: list[str] = []
    for line in _doc_lines(obj):
        text = line.strip()
        if _SECTION.match(text) and line == text:
            break
        if not text:
            if paragraph:
                break
            continue
        paragraph.append(text)
    return " ".join(paragraph) or None


def _doc_lines(obj: Any) -> list[str]:
    # __doc__ itself: inspect.getdoc would borrow a base class's text (dict's for a TypedDict).
    doc = getattr(obj, "__doc__", None)
    if not isinstance(doc, str):
        return []
    return inspect.cleandoc(doc).splitlines()
