"""elicit_missing without a server: form fields from input schema properties, registration
checks, what counts as missing, and the partial check of the arguments given."""

from typing import Annotated, Literal

import pytest

import zemcp
from zemcp.cli.commands import CommandRegistry, add_builtin_commands, add_execute_tool
from zemcp.core import forms
from zemcp.core.tools import Tool


@pytest.mark.parametrize(
    "prop, legacy, titled",
    [
        (
            {
                "type": "string",
                "title": "City",
                "description": "where",
                "minLength": 1,
                "maxLength": 40,
                "format": "email",
                "default": "a@b.c",
            },
            {
                "type": "string",
                "title": "City",
                "description": "where",
                "minLength": 1,
                "maxLength": 40,
                "format": "email",
                "default": "a@b.c",
            },
            None,
        ),
        ({"type": "string", "format": "uuid", "pattern": "^x"}, {"type": "string"}, None),
        (
            {"type": "string", "enum": ["s", "l"], "default": "l"},
            {"type": "string", "enum": ["s", "l"], "default": "l"},
            None,
        ),
        ({"type": "string", "enum": ["s", "l"], "default": "m"}, {"type": "string", "enum": ["s", "l"]}, None),
        (
            {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"]},
            {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"]},
            {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
        ),
        (
            {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
            {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"]},
            {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
        ),
        (
            {"type": "integer", "minimum": 1, "maximum": 9, "default": 2, "multipleOf": 2},
            {"type": "integer", "minimum": 1, "maximum": 9, "default": 2},
            None,
        ),
        ({"type": "number", "default": True}, {"type": "number"}, None),
        (
            {"type": "boolean", "default": False, "title": "Ok?"},
            {"type": "boolean", "default": False, "title": "Ok?"},
            None,
        ),
    ],
    ids=[
        "string-keywords",
        "string-unknown-format",
        "enum",
        "enum-default-outside",
        "enum-names",
        "titled-oneof",
        "integer",
        "number-bool-default",
        "boolean",
    ],
)
def test_form_field_keeps_what_the_subset_allows(prop, legacy, titled):
    """Form fields keep the subset's keywords; titled options follow the version (enumNames before 2025-11-25)."""
    assert forms.form_field(prop, titled_one_of=False) == legacy
    assert forms.form_field(prop, titled_one_of=True) == (legacy if titled is None else titled)


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "object"},
        {"type": "array", "items": {"type": "string"}},
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        {"type": ["string", "null"]},
        {"type": "integer", "enum": [1, 2]},
        {"type": "string", "enum": ["", "x"]},
        {"type": "string", "const": "x"},
        {},
        {"$ref": "#/$defs/x"},
    ],
    ids=["object", "array", "nullable", "type-list", "integer-enum", "empty-option", "const", "any", "ref"],
)
def test_form_field_refuses_what_a_form_cannot_ask(prop):
    """Non-primitive properties (and selects a form cannot offer) have no form field."""
    assert forms.form_field(prop, titled_one_of=False) is None
    assert forms.form_field(prop, titled_one_of=True) is None


def book(
    city: str,
    nights: Annotated[int, {"title": "Nights", "minimum": 1}],
    size: Literal["s", "l"],
    guests: list[str],
    note: str = "",
) -> str:
    """Book a room."""
    return city


def test_true_asks_for_the_required_primitive_arguments_in_schema_order():
    """elicit_missing=True selects the required primitives; a list (guests) is not among them."""
    tool = Tool(None, book, elicit_missing=True)
    assert tool.elicited == ("city", "nights", "size")
    assert tool.question(["city", "nights", "size"]) == "book needs: city, Nights, size"
    titled = Tool("t", book, title="Book a room", elicit_missing=True)
    assert titled.question(["nights"]) == "Book a room needs: Nights"


def test_a_list_names_what_to_ask_required_or_not():
    """A listed optional argument is asked for too; the message may be given."""
    tool = Tool(None, book, elicit_missing=["note", "city"], elicit_message="Where and why?")
    assert tool.elicited == ("city", "note")
    assert tool.question(["city"]) == "Where and why?"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"elicit_missing": ["nowhere"]}, "names 'nowhere', which is not an argument of the tool"),
        ({"elicit_missing": ["guests"]}, "names 'guests', which a form cannot ask for"),
        ({"elicit_missing": []}, "must be True, False or a non-empty list"),
        ({"elicit_missing": ["city", "city"]}, "distinct argument names"),
        ({"elicit_missing": "city"}, "must be True, False or a non-empty list"),
        ({"elicit_missing": True, "elicit_message": " "}, "elicit_message must be a non-empty string"),
    ],
)
def test_registration_refuses_what_cannot_work(kwargs, message):
    """Unknown or unaskable names, odd values and a blank message raise ValueError at registration."""
    with pytest.raises(ValueError, match=message):
        Tool(None, book, **kwargs)


def test_true_without_an_askable_required_argument_is_refused():
    """elicit_missing=True on a tool whose required arguments are not primitives is a mistake."""

    def tag(labels: list[str], limit: int = 3) -> str:
        return ""

    with pytest.raises(ValueError, match="none of this tool's is a string, number, integer or boolean"):
        Tool(None, tag, elicit_missing=True)


def test_missing_means_absent_or_blank():
    """Absent and blank strings are missing; other values (even wrong ones) are left to validation."""
    tool = Tool(None, book, elicit_missing=True)
    assert tool.missing({}) == ["city", "nights", "size"]
    assert tool.missing({"city": "  ", "nights": 2, "size": ""}) == ["city", "size"]
    assert tool.missing({"city": None, "nights": "x", "size": "s"}) == []
    assert Tool(None, book).missing({}) == []


def test_check_partial_validates_what_was_given():
    """The given arguments must be valid; a missing unaskable one keeps the full message of the call."""
    tool = Tool(None, book, elicit_missing=True)
    assert tool.check_partial({"guests": ["a"]}, ["city", "nights", "size"]) is None
    assert tool.check_partial({"guests": ["a"], "city": ""}, ["city", "nights", "size"]) is None
    assert tool.check_partial({"guests": [1]}, ["city", "nights", "size"]) == (
        "invalid arguments for tool 'book': argument 'guests' at guests[0]: 1 is not of type 'string'"
    )
    assert tool.check_partial({}, ["city", "nights", "size"]) == (
        "invalid arguments for tool 'book': missing required arguments 'city', 'nights', 'size', 'guests'"
    )
    assert "unexpected argument 'x'" in tool.check_partial({"guests": [], "x": 1}, ["city", "nights", "size"])


def test_ze_execute_declares_command_and_a_title():
    """ze_execute asks for command by the mechanism and is titled for people."""
    server = zemcp.Server("ref", settings=zemcp.Settings(threads=3))
    commands = CommandRegistry()
    add_builtin_commands(commands)
    add_execute_tool(server, commands)
    tool = server.tools.get("ze_execute")
    assert tool.elicited == ("command",)
    assert tool.question(["command"]) == "Which command would you like to run?"
    assert tool.definition()["title"] == "Run a command"
