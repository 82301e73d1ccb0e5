"""Elicitation forms of dataclasses and TypedDicts, and instances of their accepted content (zemcp.core.forms)."""

import enum
from dataclasses import dataclass
from typing import Annotated, Literal, Required, TypedDict

import jsonschema
import pytest

from tests.support.schema_examples import Point
from zemcp.core import forms
from zemcp.protocol.elicitation import check_requested_schema


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
