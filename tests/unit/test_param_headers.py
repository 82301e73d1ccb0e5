"""Mcp-Param-* headers from tool parameters: McpHeader, x-mcp-header and check_params (zemcp.protocol.param_headers)."""

from dataclasses import dataclass
from typing import Annotated, Literal

import pytest
from werkzeug.datastructures import Headers

import zemcp
from tests.support.header_checks import V, refused
from zemcp.core import schemas
from zemcp.core.tools import Tool
from zemcp.protocol.header_values import encode_value
from zemcp.protocol.headers import check_standard, standard_headers
from zemcp.protocol.param_headers import McpHeader, check_params, header_annotations, param_headers


def obj(**properties):
    """An object schema with the given properties."""
    return {"type": "object", "properties": properties}


# -- header_annotations ------------------------------------------------------------------


def test_annotations_map_lowercased_tokens_to_property_paths():
    """Top-level and nested (properties-only) annotations are found, keyed by lower-cased token."""
    schema = obj(
        region={"type": "string", "x-mcp-header": "Region"},
        priority={"type": "integer", "x-mcp-header": "Priority"},
        verbose={"type": "boolean", "x-mcp-header": "X-Verbose.v2"},
        location=obj(zone={"type": "string", "x-mcp-header": "Zone"}),
        query={"type": "string"},
    )
    assert header_annotations(schema) == {
        "region": ("region",),
        "priority": ("priority",),
        "x-verbose.v2": ("verbose",),
        "zone": ("location", "zone"),
    }


def test_schema_without_annotations_has_none():
    """No x-mcp-header anywhere gives an empty mapping."""
    assert header_annotations(obj(a={"type": "string"})) == {}
    assert header_annotations({"type": "object", "additionalProperties": False}) == {}


def test_standard_header_names_are_allowed_as_tokens():
    """'Method' is fine: it makes Mcp-Param-Method, not Mcp-Method."""
    assert header_annotations(obj(m={"type": "string", "x-mcp-header": "Method"})) == {"method": ("m",)}


def test_words_that_are_data_or_property_names_are_not_annotations():
    """A property named x-mcp-header, or the word inside default/enum data, is not an annotation."""
    schema = obj(
        **{"x-mcp-header": {"type": "string", "default": {"x-mcp-header": "A"}}},
        other={"type": "object", "const": {"x-mcp-header": "B"}},
    )
    assert header_annotations(schema) == {}


@pytest.mark.parametrize(
    "prop, hint",
    [
        ({"type": "number"}, "'number'"),
        ({"type": "array", "items": {"type": "string"}}, "'array'"),
        ({"type": "object"}, "'object'"),
        ({"type": "null"}, "'null'"),
        ({}, "no 'type'"),
        ({"type": ["string", "null"]}, "nullable"),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "nullable"),
    ],
)
def test_annotations_on_non_primitive_types_are_refused(prop, hint):
    """Only type string, integer or boolean may carry x-mcp-header."""
    with pytest.raises(ValueError, match="property 'p'") as info:
        header_annotations(obj(p={**prop, "x-mcp-header": "P"}))
    assert hint in str(info.value)


@pytest.mark.parametrize(
    "schema, where",
    [
        ({"type": "object", "x-mcp-header": "Root"}, "the schema root"),
        (obj(tags={"type": "array", "items": {"type": "string", "x-mcp-header": "Tag"}}), "/properties/tags/items"),
        (obj(t={"type": "array", "prefixItems": [{"type": "string", "x-mcp-header": "T"}]}), "/prefixItems/0"),
        (obj(p={"anyOf": [{"type": "string", "x-mcp-header": "P"}, {"type": "null"}]}), "/anyOf/0"),
        (obj(p={"oneOf": [{"type": "string", "x-mcp-header": "P"}]}), "/oneOf/0"),
        (obj(p={"allOf": [{"type": "string", "x-mcp-header": "P"}]}), "/allOf/0"),
        (obj(p={"not": {"type": "string", "x-mcp-header": "P"}}), "/not"),
        (obj(p={"if": {"type": "string"}, "then": {"type": "string", "x-mcp-header": "P"}}), "/then"),
        (obj(p={"else": {"type": "string", "x-mcp-header": "P"}}), "/else"),
        ({**obj(p={"$ref": "#/$defs/R"}), "$defs": {"R": {"type": "string", "x-mcp-header": "R"}}}, "/$defs/R"),
        ({"type": "object", "additionalProperties": {"type": "string", "x-mcp-header": "A"}}, "/additionalProperties"),
        (
            {"type": "object", "patternProperties": {"^r": {"type": "string", "x-mcp-header": "R"}}},
            "/patternProperties",
        ),
        (
            obj(o={"type": "object", "additionalProperties": obj(z={"type": "string", "x-mcp-header": "Z"})}),
            "/additionalProperties/properties/z",
        ),
    ],
)
def test_annotations_off_the_properties_chain_are_refused(schema, where):
    """Annotations reached through anything but 'properties' (items, anyOf, $defs, ...) are refused."""
    with pytest.raises(ValueError, match="reachable from the schema root") as info:
        header_annotations(schema)
    assert where in str(info.value)


@pytest.mark.parametrize("token", ["", "My Region", "Region:Primary", "Région", "Region\t1", "Region\n", "a/b", "(x)"])
def test_annotations_that_are_not_header_tokens_are_refused(token):
    """Empty, spaced, colon, non-ASCII, control-character and separator values are refused."""
    with pytest.raises(ValueError, match="not a valid HTTP header name token"):
        header_annotations(obj(p={"type": "string", "x-mcp-header": token}))


def test_annotation_that_is_not_a_string_is_refused():
    """x-mcp-header must be a string."""
    with pytest.raises(ValueError, match="must be a string"):
        header_annotations(obj(p={"type": "string", "x-mcp-header": 5}))


@pytest.mark.parametrize("second", ["Region", "REGION", "region"])
def test_duplicate_annotations_are_refused_ignoring_case(second):
    """Two properties may not share a header name, whatever its case."""
    schema = obj(a={"type": "string", "x-mcp-header": "Region"}, b=obj(c={"type": "string", "x-mcp-header": second}))
    with pytest.raises(ValueError, match="repeats 'Region'"):
        header_annotations(schema)


# -- check_params ------------------------------------------------------------------------


ANNOTATIONS = header_annotations(
    obj(
        region={"type": "string", "x-mcp-header": "Region"},
        count={"type": "integer", "x-mcp-header": "Count"},
        flag={"type": "boolean", "x-mcp-header": "Flag"},
        location=obj(zone={"type": "string", "x-mcp-header": "Zone"}),
    )
)


def test_matching_param_headers_are_accepted():
    """Each annotated argument mirrored in its header passes, in any header-name case."""
    arguments = {"region": "us-west1", "count": 42, "flag": False, "location": {"zone": "b"}}
    sent = {"Mcp-Param-Region": "us-west1", "MCP-PARAM-COUNT": "42", "mcp-param-flag": "false", "Mcp-Param-Zone": "b"}
    check_params(sent, ANNOTATIONS, arguments)
    check_params(Headers(sent), ANNOTATIONS, arguments)


@pytest.mark.parametrize("value", ["Hello, 世界", " padded ", "line1\nline2", "=?base64?literal?="])
def test_base64_param_values_are_decoded_before_comparing(value):
    """An encoded string header matches its decoded body value."""
    check_params({"Mcp-Param-Region": encode_value(value)}, ANNOTATIONS, {"region": value})


def test_string_param_must_match_exactly():
    """A different or differently-cased string is refused with the value to send."""
    error = refused(
        check_params, {"Mcp-Param-Region": "US-WEST1"}, ANNOTATIONS, {"region": "us-west1"}, match="Header mismatch"
    )
    assert "send Mcp-Param-region: us-west1" in str(error)
    error = refused(check_params, {"Mcp-Param-Region": "x"}, ANNOTATIONS, {"region": "日本語"})
    assert "=?base64?5pel5pys6Kqe?=" in str(error)


@pytest.mark.parametrize(
    "sent, body",
    [
        ("42", 42),
        ("42.0", 42),
        ("042", 42),
        ("42", 42.0),
        ("-7", -7),
        ("0", 0),
        ("-0", 0),
        ("9007199254740993", 9007199254740993),
        (" 42 ", 42),
    ],
)
def test_integer_params_compare_numerically(sent, body):
    """Integers match by value: 42, 42.0 and 042 are all 42; no float rounding."""
    check_params({"Mcp-Param-Count": sent}, ANNOTATIONS, {"count": body})


@pytest.mark.parametrize("sent", ["43", "4.2e1", "+42", "0x2a", "42.5", "forty-two", "", "9007199254740992"])
def test_integer_params_that_are_not_the_same_decimal_number_are_refused(sent):
    """Another number, exponent/sign/hex notation or non-numbers do not match."""
    body = 9007199254740993 if sent == "9007199254740992" else 42
    refused(check_params, {"Mcp-Param-Count": sent}, ANNOTATIONS, {"count": body}, match="Header mismatch")


@pytest.mark.parametrize("sent, body", [("true", True), ("false", False)])
def test_boolean_params_are_lowercase_words(sent, body):
    """Booleans are mirrored as 'true' and 'false'."""
    check_params({"Mcp-Param-Flag": sent}, ANNOTATIONS, {"flag": body})


@pytest.mark.parametrize("sent, body", [("True", True), ("1", True), ("false", True), ("FALSE", False), ("0", False)])
def test_boolean_params_in_other_spellings_are_refused(sent, body):
    """'True', '1', '0' and a wrong word are refused."""
    error = refused(check_params, {"Mcp-Param-Flag": sent}, ANNOTATIONS, {"flag": body}, match="Header mismatch")
    assert f"send Mcp-Param-flag: {'true' if body else 'false'}" in str(error)


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"region": None, "count": None, "flag": None},
        {"location": None},
        {"location": {}},
        {"location": "not-an-object"},
        None,
    ],
)
def test_absent_or_null_arguments_expect_no_header(arguments):
    """No header is expected for absent or null arguments (nested paths included)."""
    check_params({}, ANNOTATIONS, arguments)


@pytest.mark.parametrize("arguments", [{}, {"region": None}])
def test_header_without_a_body_value_is_refused(arguments):
    """A header sent for an absent or null argument is refused."""
    error = refused(check_params, {"Mcp-Param-Region": "us-west1"}, ANNOTATIONS, arguments, match="absent or null")
    assert error.header == "Mcp-Param-region"


@pytest.mark.parametrize(
    "arguments, shown",
    [({"region": "us-west1"}, "us-west1"), ({"count": 0}, "0"), ({"flag": False}, "false"), ({"region": ""}, "")],
)
def test_missing_header_for_a_present_value_is_refused(arguments, shown):
    """A present value (even 0, false or an empty string) needs its header."""
    error = refused(check_params, {}, ANNOTATIONS, arguments, match="Missing header")
    assert str(error).endswith(f": {shown}")


def test_nested_argument_is_checked_at_its_path():
    """A nested annotated property is compared with the value at its properties path."""
    check_params({"Mcp-Param-Zone": "b"}, ANNOTATIONS, {"location": {"zone": "b"}})
    refused(check_params, {"Mcp-Param-Zone": "c"}, ANNOTATIONS, {"location": {"zone": "b"}}, match="'location.zone'")


def test_repeated_param_header_is_refused():
    """An Mcp-Param header sent twice is refused even when both copies match."""
    sent = Headers([("Mcp-Param-Region", "a"), ("mcp-param-region", "a")])
    refused(check_params, sent, ANNOTATIONS, {"region": "a"}, match="Duplicate header")


def test_malformed_param_header_is_refused():
    """Bad base64 or raw non-ASCII in an Mcp-Param header is refused."""
    refused(
        check_params,
        {"Mcp-Param-Region": "=?base64?SGVs!!!bG8=?="},
        ANNOTATIONS,
        {"region": "Hello"},
        match="Malformed Mcp-Param-region",
    )
    refused(check_params, {"Mcp-Param-Region": "caf\xe9"}, ANNOTATIONS, {"region": "café"}, match="non-ASCII")


@pytest.mark.parametrize("sent", [None, "x", "=?base64?7aCA?="])
@pytest.mark.parametrize("region", ["\ud800", "eu-\udfff", "\udc00\ud800"], ids=ascii)
def test_an_argument_holding_a_lone_surrogate_is_refused_whatever_its_header(sent, region):
    """No header can carry it (its UTF-8 does not exist): refused naming the argument and the
    header, whether the header is missing, different, or the base64 of surrogate bytes."""
    headers = {} if sent is None else {"Mcp-Param-Region": sent}
    error = refused(check_params, headers, ANNOTATIONS, {"region": region}, match="lone surrogate")
    assert error.header == "Mcp-Param-region"
    assert error.message.startswith("Invalid argument for Mcp-Param-region: the body's argument 'region' holds")
    nested = refused(check_params, {}, ANNOTATIONS, {"location": {"zone": region}}, match="'location.zone'")
    assert "lone surrogate" in nested.message


def test_an_argument_of_control_characters_and_noncharacters_travels_base64():
    """They are Unicode text: their header is the base64 of their UTF-8, as for any non-ASCII value."""
    value = "\x00\t\ufffe\U0010ffff"
    check_params({"Mcp-Param-Region": encode_value(value)}, ANNOTATIONS, {"region": value})


def test_unannotated_param_headers_are_ignored():
    """Mcp-Param-* headers that no property declares are not the server's business."""
    check_params({"Mcp-Param-Other": "x", "Mcp-Param-Region": "a"}, ANNOTATIONS, {"region": "a"})


def test_non_scalar_argument_has_no_header_form():
    """A list where a string was declared expects no header (schema validation reports it); one sent is refused."""
    check_params({}, ANNOTATIONS, {"region": ["a"]})
    refused(check_params, {"Mcp-Param-Region": "a"}, ANNOTATIONS, {"region": ["a"]}, match="no header form")


def test_client_helpers_produce_headers_the_checks_accept():
    """standard_headers and param_headers build what check_standard and check_params accept."""
    arguments = {"region": "Hello, 世界", "count": 7, "flag": True, "location": {"zone": None}}
    params = {"name": "café tool", "arguments": arguments}
    sent = {**standard_headers("tools/call", params, V), **param_headers(ANNOTATIONS, arguments)}
    assert sent["Mcp-Name"].startswith("=?base64?") and "Mcp-Param-zone" not in sent
    assert sent["Mcp-Param-count"] == "7" and sent["Mcp-Param-flag"] == "true"
    check_standard(sent, "tools/call", params, V)
    check_params(sent, ANNOTATIONS, arguments)
    assert standard_headers("tools/list", {}, V) == {"MCP-Protocol-Version": V, "Mcp-Method": "tools/list"}


# -- McpHeader in tool registration ------------------------------------------------------


def server():
    """A fresh server to register tools on."""
    return zemcp.Server("t", settings=zemcp.Settings(threads=3))


def test_mcp_header_marks_the_parameter_schema():
    """Annotated[str, McpHeader('Region')] puts x-mcp-header on that property and in header_annotations."""
    app = server()

    @app.tool
    def execute_sql(
        region: Annotated[str, McpHeader("Region"), "The region to execute the query in"],
        query: str,
        limit: Annotated[int, McpHeader("Limit")] = 10,
        mode: Annotated[Literal["fast", "safe"], McpHeader("Mode")] = "safe",
    ) -> str:
        return query

    tool = app.tools.get("execute_sql")
    assert tool.definition()["inputSchema"] == {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region", "description": "The region to execute the query in"},
            "query": {"type": "string"},
            "limit": {"type": "integer", "x-mcp-header": "Limit", "default": 10},
            "mode": {"type": "string", "enum": ["fast", "safe"], "x-mcp-header": "Mode", "default": "safe"},
        },
        "required": ["region", "query"],
        "additionalProperties": False,
    }
    assert tool.header_annotations == {"region": ("region",), "limit": ("limit",), "mode": ("mode",)}


@dataclass
class Location:
    zone: Annotated[str, McpHeader("Zone")]


def test_mcp_header_on_a_dataclass_field_gives_a_nested_path():
    """A McpHeader field of a dataclass parameter is mirrored from its nested path."""
    app = server()

    @app.tool
    def place(location: Location) -> str:
        return location.zone

    tool = app.tools.get("place")
    assert tool.input_schema["properties"]["location"]["properties"]["zone"]["x-mcp-header"] == "Zone"
    assert tool.header_annotations == {"zone": ("location", "zone")}


def test_tools_without_annotations_have_empty_header_annotations():
    """A plain tool has no headers to check."""
    assert Tool("plain", lambda a: a, input_schema=obj(a={"type": "string"})).header_annotations == {}


def test_nullable_mcp_header_stays_on_the_property_and_is_refused():
    """X | None and default None keep x-mcp-header on the property, which registration refuses as untyped."""

    def f(a: Annotated[str, McpHeader("A")] | None, b: Annotated[str, McpHeader("B")] = None):
        pass

    schema, _ = schemas.input_schema(f)
    assert schema["properties"]["a"]["x-mcp-header"] == "A" and "anyOf" in schema["properties"]["a"]
    assert schema["properties"]["b"]["x-mcp-header"] == "B" and "anyOf" in schema["properties"]["b"]
    with pytest.raises(ValueError, match="tool 'f': x-mcp-header 'A' on property 'a'.*nullable"):
        server().tool(f)


@pytest.mark.parametrize(
    "annotation, where, problem",
    [
        (Annotated[str, McpHeader("My Region")], "property 'p'", "not a valid HTTP header name token"),
        (Annotated[float, McpHeader("Ratio")], "property 'p'", "'number'"),
        (Annotated[list[str], McpHeader("Tags")], "property 'p'", "'array'"),
        (list[Annotated[str, McpHeader("Tag")]], "/properties/p/items", "reachable"),
    ],
)
def test_bad_mcp_header_fails_at_registration(annotation, where, problem):
    """A bad McpHeader raises ValueError naming the tool and the property when the tool is registered."""

    def handler(p):
        pass

    handler.__annotations__ = {"p": annotation}
    with pytest.raises(ValueError, match="^tool 'handler': x-mcp-header ") as info:
        server().tool(handler)
    assert where in str(info.value) and problem in str(info.value)


def test_duplicate_mcp_header_fails_at_registration():
    """Two parameters with the same header name, differing in case, are refused."""

    def handler(a: Annotated[str, McpHeader("Region")], b: Annotated[str, McpHeader("REGION")]):
        pass

    expected = "tool 'handler': x-mcp-header 'REGION' on property 'b' repeats 'Region' of property 'a'"
    with pytest.raises(ValueError, match=expected):
        server().tool(handler)


def test_bad_annotation_in_explicit_input_schema_fails_at_registration():
    """An explicit input_schema is checked too."""
    schema = obj(p={"type": "number", "x-mcp-header": "P"})
    with pytest.raises(ValueError, match="tool 'explicit': x-mcp-header 'P' on property 'p'"):
        server().tool(name="explicit", input_schema=schema)(lambda p: p)


def test_mcp_header_needs_a_string_name():
    """McpHeader(5) is a TypeError at declaration."""
    with pytest.raises(TypeError, match="McpHeader"):
        McpHeader(5)
