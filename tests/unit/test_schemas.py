"""A tool's input and output schemas from its handler, its context parameter and structured content (zemcp.core.schemas)."""

from typing import Annotated

import jsonschema
import pytest

import zemcp
from tests.support.schema_examples import Color, Options, Point, Query, Shape, schema_of
from zemcp.core import schemas

# -- input schemas -----------------------------------------------------------------------


def test_unannotated_parameter_has_no_constraint():
    """A parameter without annotation accepts any JSON value."""

    def handler(anything): ...

    assert schemas.input_schema(handler)[0]["properties"] == {"anything": {}}


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


# -- output schemas ----------------------------------------------------------------------


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
