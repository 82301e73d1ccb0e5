"""MCP 2026-07-28 Streamable HTTP standard request headers, SEP-2243 (zemcp.protocol.headers)."""

import pytest
from werkzeug.datastructures import EnvironHeaders, Headers

from tests.support.header_checks import V, refused
from zemcp.protocol.header_values import encode_value
from zemcp.protocol.headers import check_standard


def std(method, name=None, **extra):
    """Conformant standard headers for a request, plus extras."""
    sent = {"MCP-Protocol-Version": V, "Mcp-Method": method}
    if name is not None:
        sent["Mcp-Name"] = name
    sent.update(extra)
    return sent


@pytest.mark.parametrize(
    "method, params, name",
    [
        ("tools/call", {"name": "get_weather", "arguments": {}}, "get_weather"),
        ("prompts/get", {"name": "code_review"}, "code_review"),
        ("resources/read", {"uri": "file:///projects/myapp/config.json"}, "file:///projects/myapp/config.json"),
        ("tools/list", {}, None),
        ("server/discover", {}, None),
    ],
)
def test_conformant_headers_are_accepted(method, params, name):
    """Matching headers pass for each kind of method."""
    check_standard(std(method, name), method, params, V)
    check_standard(Headers(std(method, name)), method, params, V)


@pytest.mark.parametrize("header", ["mcp-method", "MCP-METHOD", "Mcp-Method"])
def test_header_names_are_case_insensitive(header):
    """Any casing of the header name is accepted (dict and werkzeug Headers)."""
    sent = {"mcp-protocol-version": V, header: "tools/list"}
    check_standard(sent, "tools/list", {}, V)
    check_standard(Headers(sent), "tools/list", {}, V)


def test_surrounding_whitespace_in_values_is_accepted():
    """OWS around each standard header value is ignored (RFC 9110 section 5.5)."""
    sent = {"MCP-Protocol-Version": f" {V} ", "Mcp-Method": " tools/call\t", "Mcp-Name": "  my_tool  "}
    check_standard(sent, "tools/call", {"name": "my_tool"}, V)


def test_missing_protocol_version_is_refused():
    """A request without MCP-Protocol-Version is refused, telling what to send."""
    error = refused(check_standard, {"Mcp-Method": "tools/list"}, "tools/list", {}, V, match="Missing header")
    assert error.header == "MCP-Protocol-Version"
    assert f"MCP-Protocol-Version: {V}" in str(error)


def test_protocol_version_different_from_the_envelope_is_refused():
    """MCP-Protocol-Version must equal params._meta's protocolVersion."""
    sent = std("tools/list", **{"MCP-Protocol-Version": "2025-06-18"})
    error = refused(check_standard, sent, "tools/list", {}, V, match="Header mismatch")
    assert "'2025-06-18'" in str(error) and f"'{V}'" in str(error)


def test_missing_method_header_is_refused():
    """A request without Mcp-Method is refused, naming the body's method."""
    error = refused(check_standard, {"MCP-Protocol-Version": V}, "tools/list", {}, V, match="Missing header")
    assert error.header == "Mcp-Method" and "Mcp-Method: tools/list" in str(error)


@pytest.mark.parametrize("sent", ["prompts/list", "TOOLS/LIST", "Tools/List", "=?base64?dG9vbHMvbGlzdA==?="])
def test_method_header_must_equal_the_method_exactly(sent):
    """A different, differently-cased or base64-wrapped Mcp-Method is refused (no sentinel for it)."""
    error = refused(check_standard, std(sent), "tools/list", {}, V, match="Header mismatch")
    assert error.header == "Mcp-Method"


@pytest.mark.parametrize(
    "method, params",
    [
        ("tools/call", {"name": "t", "arguments": {}}),
        ("prompts/get", {"name": "p"}),
        ("resources/read", {"uri": "file:///a"}),
    ],
)
def test_missing_name_header_is_refused(method, params):
    """tools/call, prompts/get and resources/read need Mcp-Name."""
    error = refused(check_standard, std(method), method, params, V, match="Missing header")
    assert error.header == "Mcp-Name"


@pytest.mark.parametrize(
    "method, params, field",
    [
        ("tools/call", {"name": "bar", "arguments": {}}, "name"),
        ("prompts/get", {"name": "bar"}, "name"),
        ("resources/read", {"uri": "bar"}, "uri"),
    ],
)
def test_name_header_different_from_the_body_is_refused(method, params, field):
    """Mcp-Name must equal params.name or params.uri; the message names both values."""
    error = refused(check_standard, std(method, "foo"), method, params, V, match="Header mismatch")
    assert "'foo'" in str(error) and f"params.{field} 'bar'" in str(error) and "Mcp-Name: bar" in str(error)


def test_name_header_is_case_sensitive():
    """Mcp-Name 'Get_Weather' does not match the tool 'get_weather'."""
    refused(check_standard, std("tools/call", "Get_Weather"), "tools/call", {"name": "get_weather"}, V)


def test_base64_name_header_is_decoded_before_comparing():
    """A non-ASCII resource URI sent in the sentinel form matches the body."""
    uri = "file:///données/été.txt"
    check_standard(std("resources/read", encode_value(uri)), "resources/read", {"uri": uri}, V)
    refused(
        check_standard,
        std("resources/read", "=?base64?SGVsbG8?="),
        "resources/read",
        {"uri": "Hello"},
        V,
        match="padding",
    )


def test_name_header_on_other_methods_is_not_checked():
    """Mcp-Name has no body field on tools/list, so any value there is left alone."""
    check_standard(std("tools/list", "whatever"), "tools/list", {}, V)


def test_body_without_a_string_name_is_left_to_params_validation():
    """A tools/call whose params.name is missing or not a string is not a header problem."""
    check_standard(std("tools/call"), "tools/call", {"arguments": {}}, V)
    check_standard(std("tools/call", "5"), "tools/call", {"name": 5}, V)
    check_standard(std("tools/call"), "tools/call", None, V)


@pytest.mark.parametrize("header", ["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"])
def test_repeated_standard_header_is_refused(header):
    """A standard header sent twice (getlist length 2) is refused even if both copies agree."""
    sent = Headers(std("tools/call", "t"))
    sent.add(header.upper(), sent[header])
    error = refused(check_standard, sent, "tools/call", {"name": "t"}, V, match="Duplicate header")
    assert error.header == header


def test_comma_joined_repeat_is_refused_with_a_hint():
    """Copies joined by the WSGI server into one value mismatch, and the message says why."""
    environ = {"HTTP_MCP_PROTOCOL_VERSION": V, "HTTP_MCP_METHOD": "tools/call", "HTTP_MCP_NAME": "t, t"}
    error = refused(check_standard, EnvironHeaders(environ), "tools/call", {"name": "t"}, V, match="Header mismatch")
    assert "sent more than once" in str(error)


def test_resource_uri_with_a_comma_is_accepted():
    """A comma is legitimate inside a value that the body carries too."""
    uri = "https://example.com/r?ids=1,2"
    check_standard(std("resources/read", uri), "resources/read", {"uri": uri}, V)


def test_control_character_in_method_header_is_refused():
    """A standard header value with a control character is malformed."""
    refused(check_standard, std("tools/list\x00"), "tools/list", {}, V, match="Malformed Mcp-Method")
