"""Tools built from functions: definitions, argument checks, conversion and results (zemcp.core.tools)."""

import copy
import enum
import json
import logging
from dataclasses import dataclass
from typing import Annotated, Literal, TypedDict

import jsonschema
import pytest

import zemcp
from zemcp.cli.commands import CommandRegistry, add_builtin_commands, add_execute_tool
from zemcp.core.results import to_result
from zemcp.core.tools import Tool, ToolError, ToolRegistry
from zemcp.protocol.elicitation import SessionEnded

CTX = object()  # stands in for the call's Context: these tests only check it is passed through


class Unit(enum.Enum):
    CELSIUS = "C"
    FAHRENHEIT = "F"


@dataclass
class Reading:
    value: float
    unit: Unit


@dataclass
class Positive:
    n: int

    def __post_init__(self):
        if self.n <= 0:
            raise ValueError("n must be positive")


class Stats(TypedDict):
    count: int
    mean: float


def add(a: int, b: Annotated[int, "the second number"] = 1) -> int:
    """Add two integers.

    The sum is exact.

    Args:
        a: the first number
    """
    return a + b


# -- definitions --------------------------------------------------------------------------


def test_definition_from_a_typed_function():
    """Name, description (first paragraph) and inputSchema come from the function."""
    assert Tool(None, add).definition() == {
        "name": "add",
        "description": "Add two integers.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "the first number"},
                "b": {"type": "integer", "description": "the second number", "default": 1},
            },
            "required": ["a"],
            "additionalProperties": False,
        },
    }


def test_definition_passes_title_annotations_and_output_schema_through():
    """title, annotations and outputSchema are listed as given."""
    hints = {
        "title": "Adder",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    tool = Tool("sum", add, "Sum.", title="Add numbers", annotations=hints, structured_output=True)
    assert tool.definition() == {
        "name": "sum",
        "title": "Add numbers",
        "description": "Sum.",
        "inputSchema": tool.input_schema,
        "outputSchema": {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]},
        "annotations": hints,
    }


def test_description_falls_back_to_the_name():
    def bare(): ...

    assert Tool(None, bare).description == "bare"


def test_explicit_input_schema_is_listed_verbatim():
    """An explicit schema keeps $schema, $defs and additionalProperties unchanged, and is enforced."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    expected = copy.deepcopy(schema)

    def json_schema_2020_12_tool(name, address=None):
        return f"{name} {address}"

    tool = Tool(None, json_schema_2020_12_tool, "Schema test.", schema)
    assert tool.definition()["inputSchema"] == expected
    assert tool.check_arguments({"name": "n", "address": {"city": "Oslo"}}) is None
    assert "missing required field 'city'" in tool.check_arguments({"name": "n", "address": {}})
    # Arguments of an explicit schema arrive as the JSON values they are.
    assert tool.run({"name": "n", "address": {"city": "Oslo"}}, CTX)["content"][0]["text"] == "n {'city': 'Oslo'}"


def test_reference_tool_is_unchanged():
    """ze_execute keeps its explicit schema and its ctx parameter."""
    server = zemcp.Server("ref", settings=zemcp.Settings(threads=3))
    commands = CommandRegistry()
    add_builtin_commands(commands)
    add_execute_tool(server, commands)
    tool = server.tools.get("ze_execute")
    assert tool.context_param == "ctx"
    assert tool.definition()["inputSchema"] == {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line, e.g. 'server status' or 'session show'"},
        },
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"name": "no spaces"}, ValueError, "must be 1-128 characters"),
        ({"input_schema": {"type": "array"}}, ValueError, "input_schema must be a JSON Schema with type 'object'"),
        ({"input_schema": {"type": "object", "properties": 3}}, jsonschema.SchemaError, "is not of type 'object'"),
        ({"output_schema": {"type": "string"}}, ValueError, "output_schema must be a JSON Schema with type 'object'"),
        ({"output_schema": {"type": "object"}, "structured_output": True}, ValueError, "not both"),
        (
            {"annotations": {"readonlyHint": True}},
            ValueError,
            "unknown annotation 'readonlyHint'; known: title, readOnlyHint",
        ),
        ({"annotations": {"readOnlyHint": "yes"}}, ValueError, "annotation 'readOnlyHint' must be a bool"),
    ],
)
def test_bad_declarations_are_refused(kwargs, error, message):
    """Registration fails with a message saying what to fix."""
    name = kwargs.pop("name", None)
    with pytest.raises(error, match=message):
        Tool(name, add, **kwargs)


def test_structured_output_needs_a_return_annotation():
    def untyped(): ...

    with pytest.raises(
        TypeError, match="structured_output=True derives .* annotate its return type or pass output_schema"
    ):
        Tool(None, untyped, structured_output=True)


def test_unsupported_parameter_type_is_refused_at_registration():
    def handler(when: complex): ...

    with pytest.raises(TypeError, match=r"handler\(\) parameter 'when': type <class 'complex'> is not supported"):
        Tool(None, handler)


# -- argument checks -------------------------------------------------------------------------


def record(reading: Reading, tags: list[str] | None = None, mode: Literal["fast", "slow"] = "fast"):
    return reading


@pytest.mark.parametrize(
    "arguments, problem",
    [
        ({"a": "x"}, "argument 'a': 'x' is not of type 'integer'"),
        ({"a": 1, "c": 2}, "unexpected argument 'c'"),
        ({"a": 1, "c": 2, "d": 3}, "unexpected arguments 'c', 'd'"),
        ({"b": 2}, "missing required argument 'a'"),
    ],
)
def test_check_arguments_names_the_argument(arguments, problem):
    assert Tool(None, add).check_arguments(arguments) == f"invalid arguments for tool 'add': {problem}"


@pytest.mark.parametrize(
    "arguments, problem",
    [
        (
            {"reading": {"value": "hot", "unit": "C"}},
            "argument 'reading' at reading.value: 'hot' is not of type 'number'",
        ),
        ({"reading": {"value": 1, "unit": "K"}}, "argument 'reading' at reading.unit: 'K' is not one of ['C', 'F']"),
        ({"reading": {"value": 1}}, "argument 'reading': missing required field 'unit'"),
        ({"reading": {"value": 1, "unit": "C", "at": 0}}, "argument 'reading': unexpected field 'at'"),
        (
            {"reading": {"value": 1, "unit": "C"}, "tags": ["a", 2]},
            "argument 'tags' at tags[1]: 2 is not of type 'string'",
        ),
        (
            {"reading": {"value": 1, "unit": "C"}, "mode": "slowest"},
            "argument 'mode': 'slowest' is not one of ['fast', 'slow']",
        ),
    ],
)
def test_check_arguments_points_into_nested_values(arguments, problem):
    """Errors inside objects and arrays say where, also through ``X | None``."""
    assert Tool(None, record).check_arguments(arguments) == f"invalid arguments for tool 'record': {problem}"


def test_valid_arguments_pass():
    assert Tool(None, record).check_arguments({"reading": {"value": 1, "unit": "F"}, "tags": None}) is None


# -- running -----------------------------------------------------------------------------------


def test_arguments_are_converted_to_the_declared_types():
    """Enums, dataclasses and floats arrive as declared; defaults apply to missing arguments."""
    seen = {}

    def convert(reading: Reading, scale: float, unit: Unit = Unit.CELSIUS) -> str:
        seen.update(reading=reading, scale=scale, unit=unit)
        return "ok"

    Tool(None, convert).run({"reading": {"value": 20, "unit": "F"}, "scale": 2}, CTX)
    assert seen == {"reading": Reading(20.0, Unit.FAHRENHEIT), "scale": 2.0, "unit": Unit.CELSIUS}
    assert isinstance(seen["reading"].value, float) and isinstance(seen["scale"], float)


def test_context_is_passed_to_the_declared_parameter():
    def who(n: int, context: zemcp.Context):
        return context is CTX and n == 1

    assert Tool(None, who).run({"n": 1}, CTX)["content"][0]["text"] == "true"


def test_conversion_failure_is_an_error_result_naming_the_argument():
    """A dataclass that refuses its values gives an isError result, not a crash."""

    def handler(p: Positive): ...

    result = Tool(None, handler).run({"p": {"n": 0}}, CTX)
    assert result == {
        "content": [{"type": "text", "text": "invalid arguments for tool 'handler': argument 'p': n must be positive"}],
        "isError": True,
    }


def test_errors_become_error_results(caplog):
    """ToolError gives its message; other exceptions too, and are logged."""

    def refuses():
        raise ToolError("not today")

    def breaks():
        raise RuntimeError("disk on fire")

    assert Tool(None, refuses).run({}, CTX) == {"content": [{"type": "text", "text": "not today"}], "isError": True}
    with caplog.at_level(logging.ERROR, "zemcp.tools"):
        assert Tool(None, breaks).run({}, CTX)["content"][0]["text"] == "disk on fire"
    assert "tool 'breaks' raised" in caplog.text


@pytest.mark.parametrize(
    "exc", [SessionEnded("expired"), zemcp.URLElicitationRequired([("Log in", "https://example.com")])]
)
def test_exceptions_the_server_answers_itself_propagate(exc):
    """An aborted elicitation and a URL elicitation demand are answered by the server, not as results."""

    def handler():
        raise exc

    with pytest.raises(type(exc)):
        Tool(None, handler).run({}, CTX)


def test_value_without_json_form_is_an_error_result(caplog):
    def handler():
        return object()

    with caplog.at_level(logging.ERROR, "zemcp.tools"):
        result = Tool(None, handler).run({}, CTX)
    assert (
        result["isError"]
        and "returned a value that cannot be sent: a object has no JSON form" in result["content"][0]["text"]
    )


@pytest.mark.parametrize(
    "value, result",
    [
        ("hi", {"content": [{"type": "text", "text": "hi"}], "isError": False}),
        ([{"type": "text", "text": "a"}], {"content": [{"type": "text", "text": "a"}], "isError": False}),
        ({"content": [], "isError": True}, {"content": [], "isError": True}),
        ([1, 2], {"content": [{"type": "text", "text": "[1, 2]"}], "isError": False}),
        ({"a": Unit.CELSIUS}, {"content": [{"type": "text", "text": '{"a": "C"}'}], "isError": False}),
        (
            Reading(1.5, Unit.FAHRENHEIT),
            {"content": [{"type": "text", "text": '{"value": 1.5, "unit": "F"}'}], "isError": False},
        ),
        (None, {"content": [{"type": "text", "text": "null"}], "isError": False}),
    ],
)
def test_to_result_shapes(value, result):
    """str, content lists and full results pass; anything else is JSON text."""
    assert to_result(value) == result


# -- structured output ---------------------------------------------------------------------


def test_dataclass_return_is_structured_content():
    def measure() -> Reading:
        return Reading(21.5, Unit.CELSIUS)

    tool = Tool(None, measure, structured_output=True)
    assert tool.output_schema["required"] == ["value", "unit"]
    assert tool.run({}, CTX) == {
        "content": [{"type": "text", "text": '{"value": 21.5, "unit": "C"}'}],
        "structuredContent": {"value": 21.5, "unit": "C"},
        "isError": False,
    }


def test_typeddict_return_is_structured_content():
    def stats() -> Stats:
        return {"count": 2, "mean": 1.5}

    assert Tool(None, stats, structured_output=True).run({}, CTX)["structuredContent"] == {"count": 2, "mean": 1.5}


def test_other_returns_are_wrapped_under_result():
    tool = Tool(None, add, structured_output=True)
    assert tool.run({"a": 2, "b": 3}, CTX) == {
        "content": [{"type": "text", "text": '{"result": 5}'}],
        "structuredContent": {"result": 5},
        "isError": False,
    }


def test_explicit_output_schema_takes_the_return_value_as_is():
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

    def check():
        return {"ok": True}

    tool = Tool(None, check, output_schema=schema)
    assert tool.definition()["outputSchema"] == schema
    assert tool.run({}, CTX)["structuredContent"] == {"ok": True}


def test_format_is_an_annotation_in_the_input_and_output_checks():
    """JSON Schema 2020-12: ``format`` annotates; neither arguments nor the output are refused for it."""
    schema = {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}

    def stamp(mail: Annotated[str, {"format": "email"}]):
        return {"at": f"not a date, from {mail}"}

    tool = Tool(None, stamp, output_schema=schema)
    assert tool.check_arguments({"mail": "nobody"}) is None
    result = tool.run({"mail": "nobody"}, CTX)
    assert result["isError"] is False, result
    assert result["structuredContent"] == {"at": "not a date, from nobody"}


def test_full_result_with_structured_content_passes_through_checked():
    """A handler may build the whole result (extra content items) as long as it has structuredContent."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    def picture():
        return {"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}], "structuredContent": {"n": 1}}

    result = Tool(None, picture, output_schema=schema).run({}, CTX)
    assert result == {
        "isError": False,
        "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}],
        "structuredContent": {"n": 1},
    }


def test_output_that_breaks_its_schema_is_an_error_result_and_logged(caplog):
    """A handler that returns something else than its outputSchema says is a server bug."""

    def measure() -> Reading:
        return {"value": "warm", "unit": "C"}

    with caplog.at_level(logging.ERROR, "zemcp.tools"):
        result = Tool(None, measure, structured_output=True).run({}, CTX)
    text = "the output of tool 'measure' does not match its outputSchema: field 'value': 'warm' is not of type 'number'"
    assert result == {"content": [{"type": "text", "text": text}], "isError": True}
    assert "output does not match its outputSchema" in caplog.text


def test_errors_of_structured_tools_have_no_structured_content():
    def measure() -> Reading:
        raise ToolError("sensor offline")

    assert Tool(None, measure, structured_output=True).run({}, CTX) == {
        "content": [{"type": "text", "text": "sensor offline"}],
        "isError": True,
    }


# -- registry and the decorator ------------------------------------------------------------


def test_registry_keeps_order_and_refuses_duplicates():
    registry = ToolRegistry()
    registry.add(Tool(None, add))
    registry.add(Tool(None, record))
    assert [d["name"] for d in registry.definitions()] == ["add", "record"]
    with pytest.raises(ValueError, match="a tool named 'add' is already registered"):
        registry.add(Tool(None, add))


def test_server_tool_decorator_bare_and_called():
    """@server.tool and @server.tool(...) both register and return the function unchanged."""
    server = zemcp.Server("t", settings=zemcp.Settings(threads=3))

    @server.tool
    def first(x: int) -> int:
        """First tool."""
        return x

    @server.tool()
    def second() -> str:
        """Second tool."""
        return ""

    @server.tool(
        "third", title="Third", description="Explicit.", structured_output=True, annotations={"readOnlyHint": True}
    )
    def whatever() -> int:
        return 3

    assert first(4) == 4 and whatever() == 3
    definitions = server.tools.definitions()
    assert [(d["name"], d["description"]) for d in definitions] == [
        ("first", "First tool."),
        ("second", "Second tool."),
        ("third", "Explicit."),
    ]
    assert definitions[2]["title"] == "Third" and definitions[2]["annotations"] == {"readOnlyHint": True}
    assert definitions[2]["outputSchema"]["properties"]["result"] == {"type": "integer"}
    assert json.dumps(definitions)  # the whole list is JSON
