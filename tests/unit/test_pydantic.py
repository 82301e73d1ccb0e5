"""pydantic models and Field metadata in tools and elicitation forms, without a server; and
zemcp without pydantic, which it never imports on its own."""

import enum
import json
import subprocess
import sys
import uuid
from datetime import date, datetime, time
from decimal import Decimal
from typing import Annotated

import jsonschema
import pytest

pytest.importorskip("pydantic", reason="the pydantic package is not installed (pip install '.[pydantic]')")

from pydantic import BaseModel, Field, computed_field

from tests.apps.pydantic_orders import Address, Confirmation, Delivery, Order, Receipt, Size
from tests.support import REPO
from zemcp.core.forms import elicitation_schema, from_content
from zemcp.core.questions import Elicit
from zemcp.core.results import to_result
from zemcp.core.tools import Tool
from zemcp.protocol import jsonrpc
from zemcp.protocol.elicitation import ElicitMalformed, check_requested_schema

ORDER = {"sku": "AB-100", "quantity": 12}


def place(order: Order, note: Annotated[str, Field(description="a note for the courier", max_length=40)] = "") -> str:
    """Place an order."""
    return f"{order.quantity} of {order.sku} ({order.size.value}) {note}".strip()


def test_a_model_parameter_is_an_object_property_with_pydantics_schema():
    schema = Tool(None, place).input_schema
    order = schema["properties"]["order"]
    assert order == {k: v for k, v in Order.model_json_schema().items() if k != "$defs"}
    assert order["type"] == "object" and order["required"] == ["sku", "quantity"]
    assert order["properties"]["sku"]["pattern"] == r"^[A-Z]+-[0-9]+$"
    assert order["properties"]["quantity"] == {
        "description": "how many pieces",
        "exclusiveMinimum": 0,
        "maximum": 600,
        "title": "Quantity",
        "type": "integer",
    }
    # The models' definitions are at the root, where pydantic's #/$defs/ references resolve.
    assert "$defs" not in order
    assert set(schema["$defs"]) == {"Address", "Size"}
    assert order["properties"]["size"] == {"$ref": "#/$defs/Size", "default": "s"}
    assert schema["required"] == ["order"] and schema["additionalProperties"] is False
    jsonschema.Draft202012Validator.check_schema(schema)


def test_annotated_field_keeps_its_description_and_constraints():
    note = Tool(None, place).input_schema["properties"]["note"]
    assert note == {"type": "string", "description": "a note for the courier", "maxLength": 40, "default": ""}

    def count(n: Annotated[int, Field(ge=1, le=9), "how many"], label: Annotated[str, Field(min_length=1)]) -> str:
        return label * n

    properties = Tool(None, count).input_schema["properties"]
    # zemcp's own metadata (the text) is merged over pydantic's schema as for any type.
    assert properties["n"] == {"type": "integer", "minimum": 1, "maximum": 9, "description": "how many"}
    assert properties["label"] == {"type": "string", "minLength": 1}


def test_a_valid_model_argument_reaches_the_handler_as_an_instance():
    tool = Tool(None, place)
    arguments = {"order": {**ORDER, "size": "l", "ship_to": {"street": "1 Main St", "city": "Oslo"}}, "note": "ring"}
    assert tool.check_arguments(arguments) is None
    assert tool.run(arguments, None)["content"][0]["text"] == "12 of AB-100 (l) ring"


@pytest.mark.parametrize(
    "arguments, problem",
    [
        (
            {"order": {"sku": "AB-100", "quantity": "many"}},
            "argument 'order' at order.quantity: 'many' is not of type 'integer'",
        ),
        ({"order": {"sku": "ab", "quantity": 6}}, "argument 'order' at order.sku: 'ab' does not match"),
        ({"order": {"quantity": 6}}, "argument 'order': missing required field 'sku'"),
        (
            {"order": {**ORDER, "ship_to": {"street": "x"}}},
            "argument 'order' at order.ship_to: missing required field 'city'",
        ),
        ({"order": ORDER, "note": "x" * 41}, "argument 'note': '" + "x" * 41 + "' is too long"),
    ],
    ids=["type", "pattern", "required", "nested", "annotated-field"],
)
def test_arguments_outside_the_models_schema_are_refused_before_the_handler(arguments, problem):
    message = Tool(None, place).check_arguments(arguments)
    assert message is not None and message.startswith(f"invalid arguments for tool 'place': {problem}"), message


def test_a_validator_that_refuses_an_argument_names_it_and_the_field():
    """What only pydantic checks (a validator) is refused like a dataclass's __post_init__: an isError result."""
    tool = Tool(None, place)
    arguments = {"order": {"sku": "AB-100", "quantity": 7}}
    assert tool.check_arguments(arguments) is None
    result = tool.run(arguments, None)
    assert result == {
        "content": [
            {
                "type": "text",
                "text": "invalid arguments for tool 'place': argument 'order' at order.quantity: Value error, "
                "pieces come in boxes of 6: order a multiple of 6 (got 7)",
            }
        ],
        "isError": True,
    }


def test_a_field_as_a_default_is_refused_with_the_annotated_form():
    def bad(n: int = Field(default=1, ge=1)) -> int:
        return n

    with pytest.raises(
        TypeError,
        match=r"bad\(\) parameter 'n': a pydantic Field\(\.\.\.\) cannot be the default.*Annotated\[int, Field\(ge=1\)\] = 10",
    ):
        Tool(None, bad)


class Node(BaseModel):
    name: str
    children: list["Node"] = []


def test_a_field_default_in_the_annotation_makes_the_argument_optional():
    """As in a pydantic model: Field(default=...) or default_factory inside Annotated is the default."""
    seen = []

    def pick(
        k: Annotated[int, Field(default=7, description="k")],
        tags: Annotated[list[str], Field(default_factory=lambda: ["new"])],
        limit: Annotated[int, Field(default=None, ge=1)],
    ) -> str:
        seen.append((k, tags, limit))
        return "ok"

    tool = Tool(None, pick)
    schema = tool.input_schema
    assert "required" not in schema
    assert schema["properties"]["k"] == {"type": "integer", "description": "k", "default": 7}
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    # A None default lets null through, as `limit: int = None` does.
    assert schema["properties"]["limit"] == {
        "anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}],
        "default": None,
    }
    assert tool.check_arguments({}) is None
    assert tool.run({}, None)["isError"] is False
    assert tool.run({"k": 3, "tags": [], "limit": 2}, None)["isError"] is False
    tool.run({}, None)
    assert seen == [(7, ["new"], None), (3, [], 2), (7, ["new"], None)]
    assert seen[0][1] is not seen[2][1], "the factory makes a new list for each call"


def test_a_default_given_twice_is_refused():
    def twice(k: Annotated[int, Field(default=7)] = 8) -> int:
        return k

    with pytest.raises(TypeError, match=r"twice\(\) parameter 'k': the default is given twice, in Field"):
        Tool(None, twice)


def test_standard_types_json_has_no_type_for_go_through_pydantic():
    """datetime, date, time, UUID and Decimal need no Annotated[..., Field()] once pydantic is imported."""
    seen = []

    def book(
        at: datetime,
        day: date | None = None,
        start: time = time(9),
        ref: uuid.UUID = uuid.UUID(int=1),
        price: Decimal = Decimal("1.50"),
    ) -> dict[str, datetime]:
        seen.append((at, day, start, ref, price))
        return {"at": at}

    tool = Tool(None, book, structured_output=True)
    properties = tool.input_schema["properties"]
    assert properties["at"] == {"type": "string", "format": "date-time"}
    assert properties["day"] == {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}], "default": None}
    assert properties["start"] == {"type": "string", "format": "time", "default": "09:00:00"}
    assert properties["ref"]["default"] == "00000000-0000-0000-0000-000000000001"
    assert properties["price"]["default"] == "1.50"
    assert tool.input_schema["required"] == ["at"]
    arguments = {"at": "2026-12-02T07:12:46", "day": "2026-12-02", "ref": str(uuid.UUID(int=2)), "price": 2.5}
    assert tool.check_arguments(arguments) is None
    result = tool.run(arguments, None)
    assert result["structuredContent"] == {"at": "2026-12-02T07:12:46"}, result
    assert seen == [(datetime(2026, 12, 2, 7, 12, 46), date(2026, 12, 2), time(9), uuid.UUID(int=2), Decimal("2.5"))]
    refused = tool.run({"at": "soon"}, None)["content"][0]["text"]
    assert refused.startswith("invalid arguments for tool 'book': argument 'at': Input should be a valid datetime")
    # Returned without an output schema, they are sent as pydantic writes them.
    assert to_result([uuid.UUID(int=3), Decimal("0.10")])["content"][0]["text"] == json.dumps(
        [str(uuid.UUID(int=3)), "0.10"]
    )


@pytest.mark.parametrize("keyword", ["alias", "validation_alias", "serialization_alias"])
def test_an_alias_on_a_parameter_is_refused_at_registration(keyword, recwarn):
    """pydantic ignores an alias outside a model; a tool argument is named by its parameter."""

    def region(code: Annotated[str, Field(**{keyword: "X-Region"})]) -> str:
        return code

    with pytest.raises(TypeError) as info:
        Tool(None, region)
    assert str(info.value) == (
        "test_an_alias_on_a_parameter_is_refused_at_registration.<locals>.region() parameter 'code': a pydantic "
        "alias ('X-Region') cannot name a tool argument, which is named by its parameter; rename the parameter, "
        "or give an explicit input_schema and take the arguments as **kwargs (for a name that is not a Python "
        "identifier)"
    )
    assert not [w for w in recwarn if "alias" in str(w.message)], "refused before pydantic warns"


def test_nested_and_recursive_models_keep_their_defs_at_the_root():
    def tree(root: Node, extra: list[Order] | None = None) -> str:
        return root.children[0].name if root.children else root.name

    tool = Tool(None, tree)
    schema = tool.input_schema
    assert schema["properties"]["root"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert schema["properties"]["extra"]["anyOf"][0] == {"type": "array", "items": {"$ref": "#/$defs/Order"}}
    assert set(schema["$defs"]) == {"Node", "Order", "Address", "Size"}
    validator = jsonschema.Draft202012Validator(schema)
    deep = {"root": {"name": "a", "children": [{"name": "b", "children": [{"name": 3}]}]}}
    assert [list(e.absolute_path) for e in validator.iter_errors(deep)] == [
        ["root", "children", 0, "children", 0, "name"]
    ]
    assert tool.check_arguments(deep).endswith(
        "argument 'root' at root.children[0].children[0].name: 3 is not of type 'string'"
    )
    arguments = {"root": {"name": "a", "children": [{"name": "b"}]}, "extra": [ORDER]}
    assert tool.check_arguments(arguments) is None
    assert tool.run(arguments, None)["content"][0]["text"] == "b"


def test_two_different_models_of_one_name_are_refused():
    first = type("Item", (BaseModel,), {"__annotations__": {"a": int}})
    second = type("Item", (BaseModel,), {"__annotations__": {"b": str}})

    class Pair(BaseModel):
        x: first

    def pair(p: Pair, q: list[second]) -> str:
        return ""

    with pytest.raises(TypeError, match=r"two different types are both named 'Item' in the schema's \$defs"):
        Tool(None, pair)


def test_a_model_return_annotation_gives_the_output_schema_and_structured_content():
    def receipt(order: Order) -> Receipt:
        return Receipt(order_id="r-1", boxes=order.quantity // 6, order=order)

    tool = Tool(None, receipt)
    assert tool.output_schema["type"] == "object" and tool.output_schema["required"] == ["order_id", "boxes", "order"]
    assert tool.output_schema["properties"]["order"] == {"$ref": "#/$defs/Order"}
    assert set(tool.output_schema["$defs"]) == {"Order", "Address", "Size"}
    result = tool.run({"order": {**ORDER, "size": "l"}}, None)
    structured = {
        "order_id": "r-1",
        "boxes": 2,
        "order": {"sku": "AB-100", "quantity": 12, "size": "l", "ship_to": None},
    }
    assert result == {
        "content": [{"type": "text", "text": json.dumps(structured)}],
        "structuredContent": structured,
        "isError": False,
    }


def test_the_output_schema_is_pydantics_serialization_schema():
    """Computed fields are part of what is sent, so the output schema has them too."""

    class Total(BaseModel):
        net: float

        @computed_field
        @property
        def gross(self) -> float:
            return self.net * 1.25

    def total(net: float) -> Total:
        return Total(net=net)

    tool = Tool(None, total)
    assert tool.output_schema["properties"]["gross"]["readOnly"] is True
    assert tool.run({"net": 8}, None)["structuredContent"] == {"net": 8.0, "gross": 10.0}

    def totals(nets: list[float]) -> list[Total]:
        return [Total(net=n) for n in nets]

    wrapped = Tool(None, totals, structured_output=True)
    assert wrapped.output_schema["properties"]["result"] == {"type": "array", "items": {"$ref": "#/$defs/Total"}}
    assert wrapped.run({"nets": [4]}, None)["structuredContent"] == {"result": [{"net": 4.0, "gross": 5.0}]}


def test_a_naive_datetime_and_an_unchecked_email_pass_the_output_check():
    """pydantic names a naive datetime's schema "date-time"; the output check does not assert formats."""

    class Stamp(BaseModel):
        at: datetime
        contact: Annotated[str, Field(json_schema_extra={"format": "email"})]

    def stamp() -> Stamp:
        return Stamp(at=datetime(2026, 12, 2, 7, 12, 46, 573584), contact="the front desk")

    tool = Tool(None, stamp)
    assert tool.output_schema["properties"]["at"]["format"] == "date-time"
    result = tool.run({}, None)
    assert result["isError"] is False, result
    assert result["structuredContent"] == {"at": "2026-12-02T07:12:46.573584", "contact": "the front desk"}


def test_a_model_returned_without_an_output_schema_is_structured_content():
    result = to_result(Address(street="1 Main St", city="Oslo"))
    assert result["structuredContent"] == {"street": "1 Main St", "city": "Oslo"}
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


# -- elicitation --------------------------------------------------------------------------


def test_a_models_requested_schema_is_a_flat_form():
    schema = elicitation_schema(Confirmation)
    assert schema == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "description": "your name", "minLength": 2},
            # pattern has no place in a form: the model checks the answer afterwards.
            "postcode": {"type": "string", "title": "Postcode", "description": "the four-digit postcode"},
            "gift": {"type": "boolean", "title": "Gift", "default": False},
            # pydantic titles a field that refers to an Enum by the Enum's definition.
            "size": {"type": "string", "enum": ["s", "l"], "title": "Size"},
        },
        "required": ["name", "postcode"],
    }
    for version in ("2025-06-18", "2025-11-25"):
        check_requested_schema(schema, version)


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Paint(BaseModel):
    name: str
    colour: Colour = Colour.RED
    trim: Colour = Field(default=Colour.GREEN, title="Trim colour", description="the edges")


def test_an_enum_field_of_a_models_form_keeps_a_title():
    """The field's own title wins; else the Enum definition's, which pydantic gives such a field."""
    properties = elicitation_schema(Paint)["properties"]
    assert properties["name"]["title"] == "Name"
    assert properties["colour"] == {"type": "string", "enum": ["red", "green"], "title": "Colour", "default": "red"}
    assert properties["trim"] == {
        "type": "string",
        "enum": ["red", "green"],
        "title": "Trim colour",
        "description": "the edges",
        "default": "green",
    }


def test_accepted_content_becomes_a_validated_model_instance():
    form = from_content(Confirmation, {"name": "Ada", "postcode": "1234", "size": "l", "unknown": 1})
    assert form == Confirmation(name="Ada", postcode="1234", gift=False, size=Size.LARGE)


def test_content_the_model_refuses_is_a_malformed_answer():
    with pytest.raises(ElicitMalformed) as info:
        from_content(Confirmation, {"name": "Ada", "postcode": "12ab"})
    assert str(info.value) == (
        "malformed elicitation answer: content does not fit Confirmation at postcode: "
        "String should match pattern '^[0-9]{4}$' (got '12ab')"
    )


class Meeting(BaseModel):
    at: datetime
    organiser: Annotated[str, Field(json_schema_extra={"format": "email"})]


def test_a_models_form_accepts_what_the_model_accepts_not_what_a_format_checker_does():
    """The form names the formats; the model, not a strict format checker, validates the answer."""
    ask = Elicit("When?", Meeting)
    assert ask.schema["properties"]["at"]["format"] == "date-time"
    content = {"at": "2026-12-02T07:12:46", "organiser": "Ada"}
    meeting = ask.interpret(jsonrpc.Response("zemcp-1", {"action": "accept", "content": content}, None))
    assert meeting == Meeting(at=datetime(2026, 12, 2, 7, 12, 46), organiser="Ada")
    with pytest.raises(ElicitMalformed, match="content does not fit Meeting at at: Input should be a valid datetime"):
        ask.interpret(jsonrpc.Response("zemcp-1", {"action": "accept", "content": {**content, "at": "soon"}}, None))
    # A dict form has no other check of its values: its formats are asserted.
    plain = Elicit("When?", {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}})
    with pytest.raises(ElicitMalformed, match="is not a 'date-time'"):
        plain.interpret(
            jsonrpc.Response("zemcp-1", {"action": "accept", "content": {"at": "2026-12-02T07:12:46"}}, None)
        )


def test_a_nested_model_cannot_be_elicited():
    with pytest.raises(TypeError) as info:
        elicitation_schema(Delivery)
    assert str(info.value) == (
        "field Delivery.address: a nested model (Address) cannot be elicited: an elicitation form is flat, each "
        "field a string, number, integer, boolean or string enum (MCP client/elicitation, Requested Schema); ask "
        "for it with a ctx.elicit of its own, or make its fields fields of Delivery"
    )
    with pytest.raises(
        TypeError, match=r"field Tags\.tags: a list cannot be elicited: .*; declare one field per value"
    ):
        elicitation_schema(Tags)


class Tags(BaseModel):
    tags: list[str]


# -- without pydantic ---------------------------------------------------------------------

WITHOUT_PYDANTIC = r"""
import json, sys
from dataclasses import dataclass
from typing import Annotated

attempts = []


class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pydantic", "pydantic_core"):
            attempts.append(name)
            raise ImportError(f"{name} is blocked")
        return None


sys.meta_path.insert(0, Blocker())

from werkzeug.test import Client

import wsgi
import zemcp
import zemcp.cli.serve, zemcp.cli.stdio, zemcp.core.forms


@dataclass
class Form:
    name: str
    age: int | None = None


server = zemcp.Server("plain", "1")


@server.tool(structured_output=True)
def greet(who: Annotated[str, "whom to greet"], times: Annotated[int, {"minimum": 1}] = 1) -> Form:
    return Form(who * times)


headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
client = Client(zemcp.McpApp(server))
init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
sid = client.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, headers=headers).headers["Mcp-Session-Id"]
headers = {**headers, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
listed = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers).json
called = client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "greet", "arguments": {"who": "x", "times": 2}}}, headers=headers).json
refused = client.post("/mcp", json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "greet", "arguments": {"who": 1}}}, headers=headers).json
wsgi.create_app()
import datetime
from zemcp.core.type_schemas import to_json
try:
    def when(at: datetime.datetime | None = None) -> str:
        return str(at)
    server.tool(when)
except TypeError as exc:
    bare = str(exc)
try:
    to_json(datetime.date(2026, 12, 2))
except TypeError as exc:
    unsent = str(exc)
print(json.dumps({
    "bare": bare,
    "unsent": unsent,
    "zemcp": zemcp.__file__,
    "form": zemcp.core.forms.elicitation_schema(Form),
    "attempts": attempts,
    "loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "pydantic_core", "annotated_types")),
    "schema": listed["result"]["tools"][0]["inputSchema"],
    "structured": called["result"]["structuredContent"],
    "refused": refused["result"]["content"][0]["text"],
}))
"""


def test_without_pydantic_tools_register_and_serve_and_pydantic_is_never_imported():
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_PYDANTIC],
        cwd=REPO,
        # A bare environment, and no bytecode written into the checkout it imports zemcp from.
        env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["zemcp"].startswith(str(REPO)), report["zemcp"]
    assert report["attempts"] == [] and report["loaded"] == [], report
    assert report["form"] == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name"],
    }
    assert report["schema"]["properties"] == {
        "who": {"type": "string", "description": "whom to greet"},
        "times": {"type": "integer", "minimum": 1, "default": 1},
    }
    assert report["structured"] == {"name": "xx", "age": None}
    assert report["refused"] == "invalid arguments for tool 'greet': argument 'who': 1 is not of type 'string'"
    # The standard types pydantic would map are refused, saying how to get them.
    how = (
        "datetime, date, time, UUID and Decimal are supported through pydantic: install it (pip install pydantic, "
        "or '.[pydantic]' in a zemcp checkout) and import pydantic in the application before the tool is registered (zemcp never "
        "imports it itself), or take a str (ISO 8601 text for a date or time) and convert it in the handler"
    )
    assert report["bare"] == f"when() parameter 'at': type datetime.datetime needs pydantic; {how}"
    assert report["unsent"].startswith("a date has no JSON form; use str") and report["unsent"].endswith(how)


def test_pydantic_is_an_extra_not_a_requirement():
    import configparser

    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    assert "pydantic" not in setup["options"]["install_requires"]
    assert "pydantic>=2.5" in setup["options.extras_require"]["pydantic"]
    assert "pydantic>=2.5" in setup["options.extras_require"]["test"]
