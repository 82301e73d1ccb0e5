"""Python types as JSON Schema, and JSON back to Python values (zemcp.core.type_schemas)."""

import enum
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict

import jsonschema
import pytest

from tests.support.schema_examples import Color, Options, Point, Query, Shape, schema_of
from zemcp.core import schemas, type_schemas


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Late(TypedDict):
    # String annotations: Python 3.11 counts NotRequired inside them as required.
    a: "int"
    b: "NotRequired[int]"


class Tree(TypedDict):
    children: list["Tree"]


# -- type mapping ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "annotation, expected",
    [
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (str, {"type": "string"}),
        (bool, {"type": "boolean"}),
        (Any, {}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal["a", 1, None], {"type": ["string", "integer", "null"], "enum": ["a", 1, None]}),
        (Color, {"type": "string", "enum": ["red", "green"]}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (Optional[str], {"anyOf": [{"type": "string"}, {"type": "null"}]}),
        (Any | None, {}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (list, {"type": "array"}),
        (typing.List[str], {"type": "array", "items": {"type": "string"}}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "items": False,
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (tuple, {"type": "array"}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (dict[str, Any], {"type": "object"}),
        (dict, {"type": "object"}),
        (
            list[Literal["x"]] | None,
            {"anyOf": [{"type": "array", "items": {"type": "string", "enum": ["x"]}}, {"type": "null"}]},
        ),
    ],
)
def test_type_mapping(annotation, expected):
    """Each supported annotation maps to its JSON Schema."""
    assert schema_of(annotation) == expected


def test_dataclass_becomes_a_closed_object_with_field_docs():
    """Dataclass fields become properties; fields without default are required; the class
    docstring's Attributes section and Annotated give descriptions; nesting recurses."""
    assert schema_of(Point) == {
        "type": "object",
        "properties": {
            "x": {"type": "integer", "description": "horizontal position"},
            "y": {"type": "integer", "description": "vertical position, counted downwards.", "default": 0},
        },
        "required": ["x"],
        "additionalProperties": False,
    }
    shape = schema_of(Shape)
    assert shape["required"] == ["name", "points"]
    assert shape["properties"]["name"] == {"type": "string", "description": "what to call it"}
    assert shape["properties"]["points"]["items"] == schema_of(Point)
    assert shape["properties"]["color"] == {"type": "string", "enum": ["red", "green"], "default": "red"}
    assert shape["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}


def test_typeddict_respects_totality_and_required_markers():
    """total=False, Required and NotRequired decide the required keys, string annotations too."""
    assert schema_of(Options) == {
        "type": "object",
        "properties": {"verbose": {"type": "boolean"}, "depth": {"type": "integer"}},
        "required": ["depth"],
        "additionalProperties": False,
    }
    assert schema_of(Query)["required"] == ["text"]
    assert schema_of(Late)["required"] == ["a"]


def test_unresolvable_annotation_names_the_function():
    """A name only imported under TYPE_CHECKING is reported with what to do."""

    def handler(p: "Undefined"): ...  # noqa: F821

    with pytest.raises(
        TypeError, match=r"cannot resolve the type hints of .*handler\(\): name 'Undefined' is not defined"
    ):
        schemas.input_schema(handler)


# -- refused types -----------------------------------------------------------------------


class Opaque:
    pass


@dataclass
class HasOpaque:
    inner: Opaque


@dataclass
class Loop:
    next: "Loop | None" = None


@pytest.mark.parametrize(
    "annotation, message",
    [
        (
            Opaque,
            r"handler\(\) parameter 'value': type <class '.*Opaque'> is not supported; supported types: int, float",
        ),
        (int | str, r"the union int \| str is not supported, only X \| None"),
        (dict[int, str], r"dict keys must be str"),
        (list[Opaque], r"parameter 'value' items: type .*Opaque"),
        (HasOpaque, r"parameter 'value' field 'inner' of HasOpaque: type .*Opaque"),
        (Loop, r"Loop contains itself; recursive types need an explicit schema"),
        (Literal[1.5j], r"Literal\[1.5j\] has the value 1.5j; enum values must be"),
        (set[int], r"type set\[int\] is not supported"),
        (Tree, r"Tree contains itself"),
    ],
)
def test_unsupported_types_are_refused_naming_the_parameter(annotation, message):
    """Types outside the mapping raise TypeError naming the parameter, the type and what is supported."""
    with pytest.raises(TypeError, match=message):
        schema_of(annotation)


# -- to_python and to_json ---------------------------------------------------------------


@pytest.mark.parametrize(
    "annotation, value, expected",
    [
        (int, 3, 3),
        (int, 3.0, 3),
        (float, 2, 2.0),
        (str, "s", "s"),
        (bool, True, True),
        (Any, {"k": [1]}, {"k": [1]}),
        (Literal["a"], "a", "a"),
        (Color, "green", Color.GREEN),
        (Level, 2, Level.HIGH),
        (Color | None, None, None),
        (Optional[Color], "red", Color.RED),
        (list[Color], ["red", "green"], [Color.RED, Color.GREEN]),
        (tuple[int, Color], [1, "red"], (1, Color.RED)),
        (tuple[float, ...], [1, 2], (1.0, 2.0)),
        (dict[str, Color], {"a": "red"}, {"a": Color.RED}),
        (Point, {"x": 1}, Point(1, 0)),
        (Shape, {"name": "s", "points": [{"x": 1, "y": 2}], "color": "green"}, Shape("s", [Point(1, 2)], Color.GREEN)),
        (Query, {"text": "t", "limit": 3}, {"text": "t", "limit": 3}),
        (Annotated[Color, "text"], "red", Color.RED),
    ],
)
def test_to_python(annotation, value, expected):
    """Validated JSON becomes the declared Python value, recursively."""
    result = type_schemas.to_python(annotation, value)
    assert result == expected and type(result) is type(expected)


def test_to_python_typeddict_converts_values_but_stays_a_dict():
    """A TypedDict stays a plain dict; its Enum and dataclass values are converted."""

    class Pick(TypedDict):
        color: Color
        at: Point

    assert type_schemas.to_python(Pick, {"color": "red", "at": {"x": 2}}) == {"color": Color.RED, "at": Point(2)}


@pytest.mark.parametrize(
    "annotation, value",
    [
        (Shape, Shape("s", [Point(1, 2)], Color.GREEN, ["t"])),
        (list[Point], [Point(1), Point(2, 3)]),
        (dict[str, Color], {"k": Color.GREEN}),
        (tuple[int, str], (1, "a")),
    ],
)
def test_round_trip(annotation, value):
    """to_python(to_json(v)) gives v back, and to_json(v) matches the annotation's schema."""
    data = type_schemas.to_json(value)
    jsonschema.validate(data, schema_of(annotation))
    assert type_schemas.to_python(annotation, data) == value


def test_to_json_refuses_values_without_json_form():
    """Objects JSON cannot carry, and non-str dict keys, raise TypeError saying what is allowed."""
    with pytest.raises(TypeError, match="a Opaque has no JSON form; use str, int"):
        type_schemas.to_json([Opaque()])
    with pytest.raises(TypeError, match="dict key 1 is not a str"):
        type_schemas.to_json({1: "a"})
