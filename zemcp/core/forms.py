"""Elicitation forms (MCP client/elicitation, form mode, "Requested Schema"): the
``requestedSchema`` of a dataclass, TypedDict or pydantic model and the instance for its
accepted content, and the form fields that ask for a tool's missing arguments.

A form asks only for primitive values (a string, a number, a boolean, one of several
strings), so its schema is a flat object schema within the subset each protocol version
allows (checked by :mod:`zemcp.protocol.elicitation`). Field types come from
:mod:`zemcp.core.type_schemas`, a pydantic model's fields from pydantic's own schema
(:mod:`zemcp.core.pydantic_types`). Pure Python: no HTTP here.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from typing import Any, Literal, Union

from zemcp.core import pydantic_types
from zemcp.core.docstrings import docstring_entries
from zemcp.core.type_schemas import (
    JSON_TYPES,
    NONE_TYPE,
    is_typeddict,
    json_default,
    member_hints,
    members,
    to_python,
    unannotate,
)
from zemcp.protocol import elicitation, versions

_ELICITABLE = "str, int, float, bool, Literal of str values, an Enum of str values, or X | None of these"
_DEFS = "#/$defs/"


# -- typed elicitation -------------------------------------------------------------------


def elicitation_schema(cls: type) -> dict[str, Any]:
    """A ``requestedSchema`` from a dataclass, TypedDict or pydantic model of primitive fields.

    Allowed field types: str, int, float, bool, ``Literal`` of str values, an Enum of str
    values, and ``X | None`` of these, which makes the field optional. A field is required
    when it has no default and is not ``X | None``; defaults other than None become
    ``default``. Descriptions come from ``Annotated[X, "text"]`` or the class docstring's
    ``Attributes:`` section; ``Annotated[X, {"title": ..., "format": "email", ...}]`` adds
    keywords. A pydantic model's fields are those of its own JSON Schema (see
    :func:`_model_schema`).

    Args:
        cls: the dataclass, TypedDict or pydantic model class.
    Returns:
        ``{"type": "object", "properties": {...}, "required": [...]}``.
    Raises:
        TypeError: ``cls`` is none of these, has no fields, or a field has another type
            (a nested model, a list ...); the message names the field.
    """
    if pydantic_types.is_model(cls):
        return _model_schema(cls)
    if not (is_typeddict(cls) or (isinstance(cls, type) and dataclasses.is_dataclass(cls))):
        raise TypeError(f"an elicitation schema comes from a dataclass or TypedDict class, not {cls!r}")
    notes = docstring_entries(cls)
    properties: dict[str, dict[str, Any]] = {}
    required: list[str] = []
    for name, hint, needed, default in members(cls):
        where = f"{cls.__qualname__}.{name}"
        schema, optional = _primitive(hint, where)
        if default is not dataclasses.MISSING and default is not None:
            schema["default"] = json_default(default, where)
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
        cls: the dataclass, TypedDict or pydantic model class the schema came from.
        content: the accepted content.
    Returns:
        a ``cls`` instance (a dict for a TypedDict). A field the user left empty gets its
        default, or None when it is ``X | None`` without one.
    Raises:
        ValueError: a value that the schema does not cover (an Enum value that is not a member).
        zemcp.ElicitMalformed: pydantic refused the content for the model (a constraint or
            validator the form could not carry); the message names the field.
    """
    if pydantic_types.is_model(cls):
        return _model_instance(cls, content)
    hints = member_hints(cls)
    # Content may carry keys the class does not have (the schema allows them); drop them.
    values = {key: to_python(hints[key], item) for key, item in content.items() if key in hints}
    if is_typeddict(cls):
        return values
    for name, _, needed, _ in members(cls):
        if needed and name not in values:
            values[name] = None
    return cls(**values)


def _primitive(annotation: Any, where: str) -> tuple[dict[str, Any], bool]:
    """An elicitation field's schema, and whether the field is optional (``X | None``)."""
    tp, keywords = unannotate(annotation)
    optional = False
    if typing.get_origin(tp) in (Union, types.UnionType):
        others = [a for a in typing.get_args(tp) if a is not NONE_TYPE]
        if len(others) == 1 and len(typing.get_args(tp)) == 2:
            tp, inner = unannotate(others[0])
            keywords = {**inner, **keywords}
            optional = True
    schema: dict[str, Any] | None = None
    for py, name in JSON_TYPES[:4]:
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


def _model_schema(cls: type) -> dict[str, Any]:
    """The form of a pydantic model: each property of pydantic's schema as a form field.

    An Enum's definition is put in place of its reference (its title becomes the field's when
    the field has none) and ``X | None`` becomes X's field, not required, as for a dataclass. The keywords a form cannot carry (``pattern``,
    ``exclusiveMinimum`` ...) are left out, as for a missing argument's field
    (:func:`form_field`): the model validates the answer afterwards (:func:`_model_instance`).
    """
    name = cls.__qualname__
    schema = pydantic_types.json_schema(cls, "validation", name)
    defs = schema.get("$defs", {})
    needed = schema.get("required", ())
    properties: dict[str, dict[str, Any]] = {}
    required: list[str] = []
    for key, prop in schema.get("properties", {}).items():
        prop, optional, named = _flat_property(prop, defs)
        field = form_field(prop, False)
        if field is None:
            raise TypeError(f"field {name}.{key}: {_unelicitable(prop, named, name)}")
        properties[key] = field
        if key in needed and not optional:
            required.append(key)
    if not properties:
        raise TypeError(f"{name} has no fields; an elicitation asks for at least one")
    form: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        form["required"] = required
    return form


def _flat_property(prop: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any], bool, str | None]:
    """A property with its reference resolved and ``X | None`` unwrapped; whether it was
    nullable; the name of the definition it referred to."""
    options = prop.get("anyOf")
    optional = False
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        optional = True
        outer = {k: v for k, v in prop.items() if k != "anyOf" and not (k == "default" and v is None)}
        prop = {**next(o for o in options if o != {"type": "null"}), **outer}
    ref = prop.get("$ref")
    named = ref.removeprefix(_DEFS) if isinstance(ref, str) and ref.startswith(_DEFS) else None
    if named in defs:
        # The description is the class's docstring, not this field's. The title is the field's
        # when it has one; pydantic leaves a field that refers to a definition untitled, so the
        # definition's (the Enum's name) is the title it has.
        definition = {k: v for k, v in defs[named].items() if k != "description"}
        prop = {**definition, **{k: v for k, v in prop.items() if k != "$ref"}}
    return prop, optional, named


def _unelicitable(prop: dict[str, Any], named: str | None, model: str) -> str:
    kind = prop.get("type")
    if named and (kind == "object" or "$ref" in prop):
        what, instead = (
            f"a nested model ({named})",
            f"ask for it with a ctx.elicit of its own, or make its fields fields of {model}",
        )
    elif kind == "object":
        what, instead = "a dict", "declare one field per key"
    elif kind == "array":
        what, instead = (
            "a list",
            "declare one field per value, or pass a dict requestedSchema (multi-select arrays, 2025-11-25)",
        )
    else:
        return f"{json.dumps(prop)} cannot be elicited; allowed: {_ELICITABLE}"
    return (
        f"{what} cannot be elicited: an elicitation form is flat, each field a string, number, integer, "
        f"boolean or string enum (MCP client/elicitation, Requested Schema); {instead}"
    )


def _model_instance(cls: type, content: dict[str, Any]) -> Any:
    fields: dict[str, Any] = getattr(cls, "model_fields", {})
    keys = {field.alias or name: field for name, field in fields.items()}
    # Unknown keys are dropped as for a dataclass; a nullable field left empty is None.
    values = {key: value for key, value in content.items() if key in keys}
    for key, field in keys.items():
        if key not in values and field.is_required():
            values[key] = None
    try:
        return pydantic_types.validate(cls, values)
    except pydantic_types.ModelInvalid as exc:
        name = cls.__qualname__
        raise elicitation.ElicitMalformed(
            "; ".join(
                f"content does not fit {name}{' at ' + pydantic_types.path_text(loc) if loc else ''}: {text}"
                for loc, text in exc.problems
            )
        ) from None


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


def elicited_fields(
    tool: str, input_schema: dict[str, Any], elicit_missing: Any
) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """The form field of each argument to ask for when missing: ``{name: (legacy, titled)}``.

    Each field is checked against the elicitation schema subset of both kinds of version
    here, so that a call never fails on a form the tool's own schema made.

    Args:
        tool: the tool's name, for messages.
        input_schema: the tool's ``inputSchema``.
        elicit_missing: as given to :class:`zemcp.core.tools.Tool`: True, False or a list of
            argument names.
    Returns:
        the fields by argument name, in schema order: the field for the 2025-06-18 subset and
        the one for 2025-11-25 on (see :func:`form_field`).
    Raises:
        ValueError: as :class:`zemcp.core.tools.Tool` says for ``elicit_missing``.
    """
    properties = input_schema.get("properties", {})
    if not isinstance(properties, dict):
        properties = {}
    if elicit_missing is False:
        return {}
    if elicit_missing is True:
        required = set(input_schema.get("required", ()))
        names = [name for name in properties if name in required and _askable(properties[name])]
        if not names:
            raise ValueError(
                f"tool {tool!r}: elicit_missing=True asks for missing required arguments, and none of this tool's "
                "is a string, number, integer or boolean a form can ask for; list the names to ask for instead"
            )
    elif (
        isinstance(elicit_missing, (list, tuple))
        and elicit_missing
        and all(isinstance(n, str) for n in elicit_missing)
        and len(set(elicit_missing)) == len(elicit_missing)
    ):
        for name in elicit_missing:
            if name not in properties:
                raise ValueError(
                    f"tool {tool!r}: elicit_missing names {name!r}, which is not an argument of the tool "
                    f"(its arguments: {', '.join(properties) or 'none'})"
                )
            if not _askable(properties[name]):
                raise ValueError(
                    f"tool {tool!r}: elicit_missing names {name!r}, which a form cannot ask for: a form field is a "
                    "string, number, integer or boolean (a string may have enum options); give it a default instead"
                )
        names = [name for name in properties if name in elicit_missing]
    else:
        raise ValueError(
            f"tool {tool!r}: elicit_missing must be True, False or a non-empty list of distinct argument "
            f"names, got {elicit_missing!r}"
        )
    return {name: (_form_field(properties[name], False), _form_field(properties[name], True)) for name in names}


def _form_field(prop: Any, titled_one_of: bool) -> dict[str, Any]:
    field = form_field(prop, titled_one_of)
    assert field is not None  # only properties that _askable accepted get here
    return field


def _askable(prop: Any) -> bool:
    """True when a form can ask for the property in every protocol version's schema subset."""
    # The oldest version has the strict subset; 2025-11-25 the wider one with titled options.
    for titled, version in ((False, versions.HANDSHAKE[-1]), (True, versions.ELICITATION_MODES)):
        field = form_field(prop, titled)
        if field is None:
            return False
        try:
            elicitation.check_requested_schema({"type": "object", "properties": {"x": field}}, version)
        except elicitation.ElicitSchemaInvalid:
            return False
    return True
