"""JSON Schemas (dialect 2020-12) of Python types, and JSON values back to Python.

The schemas MCP sends from Python declarations (a tool's ``inputSchema`` and ``outputSchema``
in :mod:`zemcp.core.schemas`, an elicitation's ``requestedSchema`` in :mod:`zemcp.core.forms`)
are built from the schema of each declared type made here, and the validated JSON that comes
back is turned here into the values the code declared (Enum members, dataclass instances,
tuples).

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
:mod:`zemcp.protocol.headers`). Without them, the description comes from the Google-style ``Args:``
section of a function's docstring or the ``Attributes:`` section of a class's
(:mod:`zemcp.core.docstrings`).

pydantic's types (models, ``Annotated[X, Field(...)]``, and ``datetime``, ``date``, ``time``,
``UUID`` and ``Decimal`` where the application imported pydantic: see
:mod:`zemcp.core.pydantic_types`) get pydantic's own schema, validation and JSON form,
wherever they appear in the mapping; without pydantic those five are refused, the message
saying how to get them. Pure Python: no HTTP here.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, Required, Union, cast

from zemcp.core import pydantic_types
from zemcp.core.docstrings import docstring_entries
from zemcp.protocol.param_headers import X_MCP_HEADER, McpHeader

_SUPPORTED = (
    "int, float, str, bool, Literal[...], an Enum, X | None, list[X], tuple[...], dict[str, X], "
    "a dataclass, a TypedDict, a pydantic model or Any (with pydantic also datetime, date, time, UUID, Decimal)"
)
_THROUGH_PYDANTIC = (
    "datetime, date, time, UUID and Decimal are supported through pydantic: install it "
    "(pip install pydantic, or '.[pydantic]' in a zemcp checkout) and import pydantic in the application before "
    "the tool is "
    "registered (zemcp never imports it itself), or take a str (ISO 8601 text for a date or "
    "time) and convert it in the handler"
)
#: The type of None: the ``null`` of ``X | None``.
NONE_TYPE = type(None)
#: Each Python type that is a JSON Schema ``type``, and that type; ``null`` last.
JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (NONE_TYPE, "null"))


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
            f"cannot resolve the type hints of {label(obj)}: {exc}; import the names used in "
            "its annotations at module level (not only under TYPE_CHECKING)"
        ) from None


def to_json(value: Any) -> Any:
    """The JSON form of a Python value: dataclasses as objects of their fields, Enums by value,
    tuples as lists, pydantic models as their ``model_dump`` in JSON mode, recursively.

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
    if pydantic_types.is_model_instance(value):
        return pydantic_types.dump(value)
    text = pydantic_types.standard_json(value)
    if text is not None:
        return text
    raise TypeError(
        f"a {type(value).__qualname__} has no JSON form; use str, int, float, bool, None, "
        "an Enum, a dataclass, or lists and dicts of these"
        + (f"; {_THROUGH_PYDANTIC}" if type(value) in pydantic_types.STANDARD_TYPES else "")
    )


def to_python(annotation: Any, value: Any) -> Any:
    """Turn a JSON value that passed the annotation's schema into what the annotation declares.

    Enums become members, dataclasses instances (recursively), tuples tuples, ``float`` a
    float even when the JSON had an integer; a TypedDict stays a dict (its values converted);
    pydantic validates the types that are its own (a model becomes an instance).

    Args:
        annotation: the declared type (as in a signature, ``Annotated`` allowed).
        value: the validated JSON value.
    Returns:
        the Python value.
    Raises:
        ValueError, TypeError: a value the schema did not check (an Enum value that is
            not a member, or whatever a dataclass's ``__post_init__`` raises);
            :class:`~zemcp.core.pydantic_types.ModelInvalid` (a ValueError) when pydantic
            refuses it.
    """
    if pydantic_types.involves(annotation):
        return pydantic_types.validate(annotation, value)
    tp, _ = unannotate(annotation)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if value is None:
        return None
    if tp is float:
        return float(value)
    if tp is int:
        return int(value)
    if origin in (Union, types.UnionType):
        return to_python(next(a for a in args if a is not NONE_TYPE), value)
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
    if is_typeddict(tp):
        hints = member_hints(tp)
        return {key: to_python(hints.get(key, Any), item) for key, item in value.items()}
    if dataclasses.is_dataclass(tp):
        cls = cast(type, tp)  # an annotation: the dataclass itself, not an instance
        hints = member_hints(cls)
        return cls(**{key: to_python(hints.get(key, Any), item) for key, item in value.items()})
    return value


# -- schemas of types -------------------------------------------------------------------


def annotation_schema(annotation: Any, where: str, seen: frozenset[type]) -> dict[str, Any]:
    """The schema of a declared type, with the keywords of its ``Annotated`` metadata.

    Args:
        annotation: the type, as in a signature.
        where: what declares it, for messages (``"f() return value"``).
        seen: the dataclasses and TypedDicts being expanded (empty at the top), against recursion.
    Returns:
        the schema; ``{}`` for ``Any``. A pydantic type's may hold ``$defs`` (its models),
        which :func:`zemcp.core.schemas.lift_defs` moves to the root of the tool's schema.
    Raises:
        TypeError: the type is outside the mapping, or a class contains itself; the message
            names ``where``.
    """
    tp, keywords = unannotate(annotation)
    if pydantic_types.involves(annotation):
        # pydantic ignores zemcp's own metadata (text, keyword dicts, McpHeader), merged here as for any type.
        schema = pydantic_types.json_schema(annotation, "validation", where)
    else:
        schema = _bare_schema(tp, where, seen)
    schema.update(keywords)
    return schema


def property_schema(
    annotation: Any, where: str, note: str | None, default: Any, seen: frozenset[type] = frozenset()
) -> dict[str, Any]:
    """The schema of one parameter or field: its type's schema with its description and default.

    Args:
        annotation: the declared type (``Annotated`` allowed).
        where: what declares it, for messages.
        note: the description from the docstring, used when ``Annotated`` gave none.
        default: the default, or ``inspect.Parameter.empty`` or ``dataclasses.MISSING`` for
            none; a None default lets null through too, and a default without a JSON form is
            left out of the schema.
        seen: the dataclasses and TypedDicts being expanded, against recursion.
    Returns:
        the property's schema.
    Raises:
        TypeError: the type is outside the mapping; the message names ``where``.
    """
    schema = annotation_schema(annotation, where, seen)
    if note and "description" not in schema:
        schema["description"] = note
    if default is not inspect.Parameter.empty and default is not dataclasses.MISSING:
        # The default is the parameter's, shown once, outside any null branch (pydantic's
        # schema of Annotated[X, Field(default=...)] has it too).
        schema.pop("default", None)
    if default is None and not _accepts_null(schema):
        # ``x: str = None`` means "a str, or left out": let an explicit null through too.
        header = schema.pop(X_MCP_HEADER, None)
        schema = {"anyOf": [schema, {"type": "null"}]}
        if header is not None:
            # Kept on the property, where registration refuses it for having no single type.
            schema[X_MCP_HEADER] = header
    if default is not inspect.Parameter.empty and default is not dataclasses.MISSING:
        try:
            schema["default"] = json_default(default, where)
        except TypeError:
            # Such a default still applies when the argument is left out; it just isn't shown.
            pass
    return schema


def _accepts_null(schema: dict[str, Any]) -> bool:
    if "type" not in schema and "anyOf" not in schema:
        return True
    return schema.get("type") == "null" or any(option.get("type") == "null" for option in schema.get("anyOf", ()))


def _bare_schema(tp: Any, where: str, seen: frozenset[type]) -> dict[str, Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any or tp is inspect.Parameter.empty:
        return {}
    for py, name in JSON_TYPES:
        if tp is py:
            return {"type": name}
    if origin is Literal:
        return _enum_schema(list(args), where, f"Literal{list(args)}")
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema([m.value for m in tp], where, tp.__qualname__)
    if origin in (Union, types.UnionType):
        others = [a for a in args if a is not NONE_TYPE]
        if len(others) != 1:
            raise TypeError(f"{where}: the union {tp!r} is not supported, only X | None; supported types: {_SUPPORTED}")
        return _nullable(annotation_schema(others[0], where, seen))
    if tp is list or origin is list:
        return (
            {"type": "array", "items": annotation_schema(args[0], f"{where} items", seen)}
            if args
            else {"type": "array"}
        )
    if tp is tuple or origin is tuple:
        return _tuple_schema(args, where, seen)
    if tp is dict or origin is dict:
        return _dict_schema(args, where, seen)
    if isinstance(tp, type) and (dataclasses.is_dataclass(tp) or is_typeddict(tp)):
        return _object_schema(tp, where, seen)
    if tp in pydantic_types.STANDARD_TYPES:
        raise TypeError(f"{where}: type {tp.__module__}.{tp.__qualname__} needs pydantic; {_THROUGH_PYDANTIC}")
    raise TypeError(f"{where}: type {tp!r} is not supported; supported types: {_SUPPORTED}")


def _enum_schema(values: list[Any], where: str, what: str) -> dict[str, Any]:
    if not values:
        raise TypeError(f"{where}: {what} has no values to choose from")
    kinds = []
    for value in values:
        kind = next((name for py, name in JSON_TYPES if type(value) is py), None)
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
        return {"type": "array", "items": annotation_schema(args[0], f"{where} items", seen)}
    return {
        "type": "array",
        "prefixItems": [annotation_schema(t, f"{where} item {i}", seen) for i, t in enumerate(args)],
        "items": False,
        "minItems": len(args),
        "maxItems": len(args),
    }


def _dict_schema(args: tuple[Any, ...], where: str, seen: frozenset[type]) -> dict[str, Any]:
    if not args:
        return {"type": "object"}
    key, _ = unannotate(args[0])
    if key is not str:
        raise TypeError(f"{where}: dict keys must be str (JSON object keys are strings), not {key!r}")
    values = annotation_schema(args[1], f"{where} values", seen)
    return {"type": "object", "additionalProperties": values} if values else {"type": "object"}


def _object_schema(cls: type, where: str, seen: frozenset[type]) -> dict[str, Any]:
    if cls in seen:
        raise TypeError(f"{where}: {cls.__qualname__} contains itself; recursive types need an explicit schema")
    seen = seen | {cls}
    notes = docstring_entries(cls)
    properties: dict[str, dict[str, Any]] = {}
    required: list[str] = []
    for name, hint, needed, default in members(cls):
        properties[name] = property_schema(
            hint, f"{where} field {name!r} of {cls.__qualname__}", notes.get(name), default, seen
        )
        if needed:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


# -- declarations ------------------------------------------------------------------------


def label(obj: Any) -> str:
    """How messages name a declaration: ``"name()"`` for a function, the qualified name of a class.

    Args:
        obj: a function, class or other object (its ``repr`` when it has no name).
    Returns:
        the name, followed by ``()`` for a callable that is not a class.
    """
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
    return f"{name}()" if callable(obj) and not isinstance(obj, type) else name


def unannotate(tp: Any) -> tuple[Any, dict[str, Any]]:
    """Strip ``Annotated`` and ``Required``/``NotRequired``; the keywords their metadata gives.

    Args:
        tp: an annotation.
    Returns:
        ``(the bare type, {keyword: value})``: ``description`` from a string, the items of a
        dict, ``x-mcp-header`` from an :class:`~zemcp.protocol.param_headers.McpHeader`.
    """
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


def is_typeddict(tp: Any) -> bool:
    """True when ``tp`` is a TypedDict class."""
    # Duck-typed so that typing_extensions.TypedDict classes count too.
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def member_hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of a dataclass's or TypedDict's fields (see :func:`type_hints`).

    Returns:
        ``{field name: annotation}``; empty for any other class.
    Raises:
        TypeError: an annotation cannot be resolved.
    """
    return type_hints(cls) if (is_typeddict(cls) or dataclasses.is_dataclass(cls)) else {}


def members(cls: type) -> list[tuple[str, Any, bool, Any]]:
    """``(name, annotation, required, default or MISSING)`` of each field set at construction.

    Args:
        cls: a dataclass or TypedDict class.
    Raises:
        TypeError: an annotation cannot be resolved (see :func:`type_hints`).
    """
    hints = type_hints(cls)
    if is_typeddict(cls):
        found = []
        for name, hint in hints.items():
            # Required/NotRequired inside string annotations escape __required_keys__ before
            # Python 3.12, so the resolved hint decides when it says.
            marker = typing.get_origin(_strip_annotated(hint))
            needed = marker is Required or (marker is not NotRequired and name in cls.__required_keys__)  # type: ignore[attr-defined]  # a TypedDict class
            found.append((name, hint, needed, dataclasses.MISSING))
        return found
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


def json_default(value: Any, where: str) -> Any:
    """The JSON form of a default value, for a schema's ``default``.

    Args:
        value: the default.
        where: what declares it, for the message (``"f() parameter 'x'"``).
    Returns:
        the JSON value (see :func:`to_json`).
    Raises:
        TypeError: the value has no JSON form, or holds NaN or an infinity; the message names ``where``.
    """
    try:
        data = to_json(value)
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{where}: the default {value!r} has no JSON form ({exc})") from None
    return data
