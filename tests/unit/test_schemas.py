"""JSON Schemas from type hints and JSON back to Python values (zemcp.core.schemas, zemcp.core.type_schemas,
zemcp.core.forms, zemcp.core.docstrings)."""

import enum
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, Optional, Required, TypedDict

import jsonschema
import pytest

import zemcp
from zemcp.core import docstrings, forms, schemas, type_schemas
from zemcp.protocol.elicitation import check_requested_schema


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclass
class Point:
    """A point on the plane.

    Attributes:
        x: horizontal position
        y: vertical position,
            counted downwards.
    """

    x: int
    y: int = 0


@dataclass
class Shape:
    name: Annotated[str, "what to call it"]
    points: list[Point]
    color: Color = Color.RED
    tags: list[str] = field(default_factory=list)


class Options(TypedDict, total=False):
    verbose: bool
    depth: Required[int]


class Query(TypedDict):
    text: str
    limit: NotRequired[int]


class Late(TypedDict):
    # String annotations: Python 3.11 counts NotRequired inside them as required.
    a: "int"
    b: "NotRequired[int]"


class Tree(TypedDict):
    children: list["Tree"]


def schema_of(annotation, default=None) -> dict:
    """The property schema of one parameter of type ``annotation``."""

    def handler(value): ...

    handler.__annotations__ = {"value": annotation}
    if default is not None:
        handler.__defaults__ = (default,)
    return schemas.input_schema(handler)[0]["properties"]["value"]


# -- input schemas: type mapping ------------------------------------------------------------


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


def test_unannotated_parameter_has_no_constraint():
    """A parameter without annotation accepts any JSON value."""

    def handler(anything): ...

    assert schemas.input_schema(handler)[0]["properties"] == {"anything": {}}


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


def test_signature_gives_required_defaults_and_closed_object():
    """Required exactly when there is no default; JSON-serializable defaults are shown."""

    def search(
        query: str,
        limit: int = 10,
        color: Color = Color.GREEN,
        at: Point = Point(1, 2),
        since: int | None = None,
        required_maybe: int | None = object,
    ): ...

    schema, ctx = schemas.input_schema(search)
    assert ctx is None
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["limit"]["default"] == 10
    assert props["color"]["default"] == "green"
    assert props["at"]["default"] == {"x": 1, "y": 2}
    assert props["since"]["default"] is None
    assert "default" not in props["required_maybe"]


def test_optional_without_default_is_required():
    """``X | None`` allows null but does not make the argument optional."""

    def handler(a: int | None, b: int | None = None): ...

    assert schemas.input_schema(handler)[0]["required"] == ["a"]


def test_no_parameters_gives_the_recommended_empty_schema():
    """A handler without arguments gets {"type": "object", "additionalProperties": false}."""

    def handler(): ...

    assert schemas.input_schema(handler) == ({"type": "object", "additionalProperties": False}, None)


def test_context_parameter_is_found_and_left_out():
    """A parameter annotated Context (any name), or ctx without annotation, is the context."""

    def annotated(n: int, context: zemcp.Context): ...
    def named(ctx, n: int): ...
    def typed_ctx(ctx: int): ...

    assert schemas.input_schema(annotated) == (
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False},
        "context",
    )
    assert schemas.input_schema(named)[1] == "ctx"
    assert schemas.input_schema(typed_ctx)[0]["properties"] == {"ctx": {"type": "integer"}}
    assert schemas.input_schema(typed_ctx)[1] is None


def test_string_annotations_resolve():
    """Annotations written as strings (or under ``from __future__ import annotations``) resolve."""

    def handler(ctx: "zemcp.Context", p: "Point", n: "int | None" = None): ...

    schema, ctx = schemas.input_schema(handler)
    assert ctx == "ctx" and schema["properties"]["p"] == schema_of(Point)


def test_unresolvable_annotation_names_the_function():
    """A name only imported under TYPE_CHECKING is reported with what to do."""

    def handler(p: "Undefined"): ...  # noqa: F821

    with pytest.raises(
        TypeError, match=r"cannot resolve the type hints of .*handler\(\): name 'Undefined' is not defined"
    ):
        schemas.input_schema(handler)


# -- input schemas: descriptions ------------------------------------------------------------


def test_descriptions_from_docstring_args_and_annotated():
    """Google-style Args entries describe parameters (continuation lines joined);
    Annotated text wins over the docstring; Annotated dicts add keywords."""

    def handler(
        a: int,
        b: Annotated[int, "from Annotated"],
        c: Annotated[int, {"minimum": 0, "title": "C"}],
        d: Annotated[int, "text"] | None = None,
    ):
        """Summary line.

        Args:
            a: the first number,
                spread over two lines.
            b (int): overridden by Annotated.
            c: keeps its keywords.
            d: unused, Annotated wins.

        Returns:
            nothing.
        """

    props = schemas.input_schema(handler)[0]["properties"]
    assert props["a"] == {"type": "integer", "description": "the first number, spread over two lines."}
    assert props["b"] == {"type": "integer", "description": "from Annotated"}
    assert props["c"] == {"type": "integer", "minimum": 0, "title": "C", "description": "keeps its keywords."}
    assert props["d"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "text", "default": None}


@pytest.mark.parametrize(
    "doc, summary",
    [
        ("One line.", "One line."),
        ("First paragraph\nwrapped.\n\nSecond paragraph.", "First paragraph wrapped."),
        ("Summary.\nArgs:\n    a: text", "Summary."),
        ("Args:\n    a: text", None),
        (None, None),
    ],
)
def test_docstring_summary(doc, summary):
    """The description is the first paragraph before any section, on one line."""

    def handler(): ...

    handler.__doc__ = doc
    assert docstrings.docstring_summary(handler) == summary


# -- input schemas: refused declarations -----------------------------------------------------


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


@pytest.mark.parametrize(
    "source, kind",
    [
        ("def handler(*args: int): ...", r"\*args"),
        ("def handler(**kwargs: int): ...", r"\*\*kwargs"),
        ("def handler(a: int, /): ...", "positional-only"),
    ],
)
def test_variadic_and_positional_only_parameters_are_refused(source, kind):
    """Parameters that cannot be passed by name cannot be tool arguments."""
    namespace: dict = {}
    exec(source, namespace)
    with pytest.raises(TypeError, match=rf"parameter '\w+': {kind} parameters cannot be tool arguments"):
        schemas.input_schema(namespace["handler"])


def test_generated_schemas_are_valid_2020_12():
    """Every generated schema passes the 2020-12 meta-schema and accepts its own defaults."""

    def handler(a: Shape, b: Options, c: tuple[int, str] = (1, "x"), d: dict[str, list[Color]] | None = None): ...

    schema = schemas.input_schema(handler)[0]
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate({"a": {"name": "n", "points": [{"x": 1}]}, "b": {"depth": 1}, "d": {"k": ["red"]}})
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"a": {"name": "n", "points": [], "extra": 1}, "b": {"depth": 1}})


# -- to_python -------------------------------------------------------------------------------


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


# -- output schemas ------------------------------------------------------------------------


def test_object_return_types_are_the_output_schema():
    """A dataclass, TypedDict or dict[str, X] return type is the output schema as is."""

    def point() -> Point: ...
    def query() -> Query: ...
    def table() -> dict[str, int]: ...

    assert schemas.output_schema(point) == schema_of(Point) and not schemas.wraps_result(point)
    assert schemas.output_schema(query) == schema_of(Query) and not schemas.wraps_result(query)
    assert schemas.output_schema(table) == {"type": "object", "additionalProperties": {"type": "integer"}}


@pytest.mark.parametrize(
    "returns, inner",
    [
        (int, {"type": "integer"}),
        (str, {"type": "string"}),
        (list[Point], {"type": "array", "items": schema_of(Point)}),
        (Point | None, {"anyOf": [schema_of(Point), {"type": "null"}]}),
    ],
)
def test_other_return_types_are_wrapped_under_result(returns, inner):
    """Any other return type is wrapped as {"result": ...}, required."""

    def handler(): ...

    handler.__annotations__ = {"return": returns}
    assert schemas.output_schema(handler) == {
        "type": "object",
        "properties": {"result": inner},
        "required": ["result"],
    }
    assert schemas.wraps_result(handler)


def test_no_return_annotation_has_no_output_schema():
    def handler(): ...

    assert schemas.output_schema(handler) is None


def test_structured_content():
    """The JSON form of the value, wrapped under result when the schema wraps it."""
    assert schemas.structured_content(Point(1, 2), False) == {"x": 1, "y": 2}
    assert schemas.structured_content([Color.RED], True) == {"result": ["red"]}


# -- typed elicitation ---------------------------------------------------------------------


class Status(enum.StrEnum):
    ACTIVE = "active"
    INACTIVE = "inactive"


@dataclass
class Signup:
    """Who is signing up.

    Attributes:
        name: your full name
    """

    name: str
    email: Annotated[str, {"title": "E-mail", "format": "email"}]
    age: int | None
    score: float = 95.5
    status: Status = Status.ACTIVE
    plan: Literal["free", "pro"] = "free"
    newsletter: Annotated[bool, "send me news"] = False
    nickname: str | None = None


class Answer(TypedDict, total=False):
    colour: Required[Literal["red", "blue"]]
    comment: str
    note: str | None


def test_elicitation_schema_from_dataclass():
    """Primitive fields map to the flat subset; X | None and defaults make a field optional."""
    schema = forms.elicitation_schema(Signup)
    assert schema == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "your full name"},
            "email": {"type": "string", "title": "E-mail", "format": "email"},
            "age": {"type": "integer"},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
            "plan": {"type": "string", "enum": ["free", "pro"], "default": "free"},
            "newsletter": {"type": "boolean", "description": "send me news", "default": False},
            "nickname": {"type": "string"},
        },
        "required": ["name", "email"],
    }
    check_requested_schema(schema)


def test_elicitation_schema_from_typeddict():
    """A TypedDict's required keys are required unless the value may be None."""
    schema = forms.elicitation_schema(Answer)
    assert schema == {
        "type": "object",
        "properties": {
            "colour": {"type": "string", "enum": ["red", "blue"]},
            "comment": {"type": "string"},
            "note": {"type": "string"},
        },
        "required": ["colour"],
    }
    check_requested_schema(schema)


class Mood(enum.Enum):
    HAPPY = 1


@dataclass
class Nested:
    where: Point


@dataclass
class Listy:
    tags: list[str]


@dataclass
class IntChoice:
    level: Literal[1, 2]


@dataclass
class IntEnumField:
    mood: Mood


@dataclass
class Empty:
    pass


@pytest.mark.parametrize(
    "cls, message",
    [
        (Nested, r"field Nested.where: type <class '.*Point'> cannot be elicited; allowed: str, int, float, bool"),
        (Listy, r"field Listy.tags: type list\[str\] cannot be elicited"),
        (IntChoice, r"field IntChoice.level: type typing.Literal\[1, 2\] cannot be elicited"),
        (IntEnumField, r"field IntEnumField.mood: .*Mood.* cannot be elicited"),
        (Empty, r"Empty has no fields"),
        (Point(1), r"comes from a dataclass or TypedDict class"),
        (dict, r"comes from a dataclass or TypedDict class"),
    ],
)
def test_elicitation_schema_refuses_other_types(cls, message):
    """Anything but flat primitive fields raises TypeError naming the field."""
    with pytest.raises(TypeError, match=message):
        forms.elicitation_schema(cls)


def test_from_content_builds_the_instance():
    """Accepted content becomes an instance: Enums converted, defaults and None filled in."""
    content = {"name": "Ada", "email": "ada@example.com", "score": 3, "status": "inactive"}
    jsonschema.validate(content, forms.elicitation_schema(Signup))
    signup = forms.from_content(Signup, content)
    assert signup == Signup("Ada", "ada@example.com", None, 3.0, Status.INACTIVE)
    assert isinstance(signup.score, float) and signup.status is Status.INACTIVE


def test_from_content_typeddict_is_a_dict_of_the_given_keys():
    assert forms.from_content(Answer, {"colour": "red"}) == {"colour": "red"}


def test_conformance_defaults_fixture_as_a_dataclass():
    """The SEP-1034 defaults fixture is expressible as a typed class."""

    @dataclass
    class Defaults:
        name: str = "John Doe"
        age: int = 30
        score: float = 95.5
        status: Literal["active", "inactive", "pending"] = "active"
        verified: bool = True

    assert forms.elicitation_schema(Defaults)["properties"] == {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    }


def test_none_default_on_a_plain_type_accepts_null():
    """``x: str = None`` is listed as a string or null with default null, and null is accepted."""
    from zemcp.core.tools import Tool

    def f(x: str = None) -> str:
        return repr(x)

    tool = Tool(None, f, "t")
    assert tool.definition()["inputSchema"]["properties"]["x"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "default": None,
    }
    assert tool.check_arguments({"x": None}) is None and tool.check_arguments({"x": "a"}) is None
