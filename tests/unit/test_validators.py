"""Schema validators: jsonschema-rs (zemcp[speed]) answers yes exactly where jsonschema does, and
every message is jsonschema's."""

from collections import OrderedDict

import jsonschema
import pytest
from jsonschema.exceptions import best_match

from zemcp.protocol import validators
from zemcp.protocol.validators import SchemaValidator

needs_rs = pytest.mark.skipif(
    validators.ENGINE != "jsonschema-rs",
    reason="jsonschema-rs is not in use here (zemcp[speed] not installed, or ZEMCP_SPEED=off): "
    "the CI run with the extra compares the two validators",
)

CASES = [
    ({"type": "integer"}, [1, 1.0, 1.5, True, 2**70, -(2**70), "1", None]),
    ({"type": "number", "maximum": 10, "exclusiveMinimum": 0}, [0, 0.0, 1e-300, 10, 10.0, 10.5, 2**70, True]),
    ({"enum": [1, "a", None]}, [1, 1.0, True, "a", None, False]),
    ({"const": [1, {"a": 2}]}, [[1, {"a": 2}], [1.0, {"a": 2.0}], [True, {"a": 2}]]),
    ({"type": "array", "uniqueItems": True}, [[1, 1.0], [1, True], [0, False], [{"a": 1}, {"a": 1.0}]]),
    ({"type": "string", "minLength": 2, "maxLength": 3}, ["ab", "é", "ée", "😀😀", "😀😀😀😀", "\ud800x"]),
    (
        {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "a line"}},
            "required": ["command"],
            "additionalProperties": False,
        },
        [{"command": "help"}, {}, {"command": 1}, {"command": "x", "other": 1}, []],
    ),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, ["x", None, 1]),
    (
        {
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/X"}},
            "$defs": {"X": {"type": "integer", "minimum": 0}},
        },
        [{"x": 1}, {"x": -1}, {"x": "1"}],
    ),
    ({"type": "array", "items": {"type": "integer"}, "maxItems": 2}, [[1, 2], [1, 2, 3], [1, "a"]]),
    ({"type": "object", "dependentRequired": {"a": ["b"]}}, [{"a": 1}, {"a": 1, "b": 2}]),
    ({"type": "object", "unevaluatedProperties": False, "properties": {"a": {}}}, [{"a": 1}, {"b": 1}]),
    ({"type": "string", "format": "date-time"}, ["nope", "2026-01-02T03:04:05Z"]),
    # Values the two read differently (jsonschema decides): infinity and NaN (the standard library
    # parses the Infinity and NaN literals), and tuples (a handler's structured output).
    ({"maximum": 1e308}, [float("inf"), float("nan"), 1e308, {"a": float("inf")}]),
    ({"minimum": 0}, [float("-inf"), 0.0, [float("-inf")]]),
    ({"type": "array", "items": {"type": "integer"}}, [(1, 2), [1, 2], [(1,)]]),
    ({"type": "object", "properties": {"xs": {"type": "array"}}}, [{"xs": (1, 2)}, {"xs": [1]}]),
    (
        {"type": "object", "properties": {"p": {"type": "array"}, "m": {"maximum": 1}}},
        [OrderedDict(p=(1, 2)), OrderedDict(m=float("inf")), OrderedDict(p=[1], m=0)],
    ),
]


@needs_rs
@pytest.mark.parametrize(("schema", "instances"), CASES, ids=lambda v: str(v)[:40])
def test_the_fast_validator_agrees_with_jsonschema(schema, instances):
    validator = SchemaValidator(schema)
    assert validator._fast is not None
    reference = jsonschema.Draft202012Validator(schema)
    for instance in instances:
        assert validator.is_valid(instance) is reference.is_valid(instance), instance


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "^\\d$"},
        {"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
        {"type": "number", "multipleOf": 0.1},
        {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}},
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "string"},
    ],
)
def test_keywords_the_libraries_read_differently_stay_with_jsonschema(schema):
    assert SchemaValidator(schema)._fast is None


def test_asserted_formats_stay_with_jsonschema():
    schema = {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}}
    assert SchemaValidator(schema, formats=True)._fast is None
    checked = SchemaValidator(schema, formats=True)
    assert not checked.is_valid({"when": "tomorrow"})
    assert SchemaValidator(schema).is_valid({"when": "tomorrow"})  # an annotation only


def test_differences_in_reading_are_jsonschemas():
    # Python's \\d matches every Unicode digit; ECMA-262's only 0-9: jsonschema decides.
    assert SchemaValidator({"type": "string", "pattern": "^\\d$"}).is_valid("٣")
    # Python's float division: 0.3 is no multiple of 0.1 for jsonschema.
    assert SchemaValidator({"multipleOf": 0.1}).is_valid(0.3) is jsonschema.Draft202012Validator(
        {"multipleOf": 0.1}
    ).is_valid(0.3)


def test_messages_are_jsonschemas():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    validator = SchemaValidator(schema)
    error = best_match(validator.iter_errors({"n": "x"}))
    assert error is not None and error.message == "'x' is not of type 'integer'"
    assert list(error.absolute_path) == ["n"]


@needs_rs
def test_a_schema_with_an_infinite_number_stays_with_jsonschema():
    schema = {"enum": [float("inf"), 1]}
    assert SchemaValidator(schema)._fast is None
    assert SchemaValidator(schema).is_valid(None) is False


def test_deeply_nested_arguments_get_an_answer_not_a_recursion_error():
    """Deeper than the JSON parser lets a client send: the check before jsonschema-rs loops, it does not recurse."""
    schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    deep: list = []
    for _ in range(2000):
        deep = [deep]
    assert SchemaValidator(schema).is_valid({"command": "x", "extra": deep}) is True
