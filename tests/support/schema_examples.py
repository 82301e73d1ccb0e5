"""Types the schema tests of several modules declare, and schema_of(): one parameter's property schema."""

import enum
from dataclasses import dataclass, field
from typing import Annotated, NotRequired, Required, TypedDict

from zemcp.core import schemas


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


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


def schema_of(annotation, default=None) -> dict:
    """The property schema of one parameter of type ``annotation``."""

    def handler(value): ...

    handler.__annotations__ = {"value": annotation}
    if default is not None:
        handler.__defaults__ = (default,)
    return schemas.input_schema(handler)[0]["properties"]["value"]
