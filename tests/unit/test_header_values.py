"""Header values of SEP-2243: the =?base64?...?= encoding and HeaderError (zemcp.protocol.header_values)."""

import pytest

from tests.support.header_checks import refused
from zemcp.protocol.header_values import HEADER_MISMATCH, decode_value, encode_value


@pytest.mark.parametrize(
    "raw",
    ["us-west1", "us west 1", "", "file:///path/to/file%20name.txt", "https://example.com/resource?id=123", "a\tb"],
)
def test_plain_values_are_taken_literally(raw):
    """A value without the sentinel is returned as sent (internal spaces, tabs and empty included)."""
    assert decode_value(raw) == raw


def test_surrounding_spaces_and_tabs_are_framing():
    """Leading and trailing SP/HTAB (RFC 9110 OWS) are dropped before decoding."""
    assert decode_value("  foo \t") == "foo"
    assert decode_value(" =?base64?SGVsbG8=?= ") == "Hello"


@pytest.mark.parametrize(
    "raw, value",
    [
        ("=?base64?SGVsbG8=?=", "Hello"),
        ("=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界"),
        ("=?base64?IHBhZGRlZCA=?=", " padded "),
        ("=?base64?bGluZTEKbGluZTI=?=", "line1\nline2"),
        ("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?="),
        ("=?base64?5pel5pys6Kqe?=", "日本語"),
        ("=?base64??=", ""),
    ],
)
def test_sentinel_values_decode_to_utf8(raw, value):
    """The spec's encoded examples decode to their original values."""
    assert decode_value(raw) == value


@pytest.mark.parametrize(
    "raw", ["SGVsbG8=", "=?base64?SGVsbG8=", "SGVsbG8=?=", "=?BASE64?SGVsbG8=?=", "=?Base64?SGVsbG8=?="]
)
def test_incomplete_or_uppercase_sentinel_is_literal(raw):
    """Missing prefix, missing suffix or non-lowercase markers mean a literal value, not base64."""
    assert decode_value(raw) == raw


def test_invalid_padding_is_refused():
    """A payload whose length is not a multiple of 4 is refused, naming the padding."""
    error = refused(decode_value, "=?base64?SGVsbG8?=", match="padding")
    assert error.code == HEADER_MISMATCH and error.http_status == 400


@pytest.mark.parametrize(
    "raw",
    [
        "=?base64?SGVs!!!bG8=?=",
        "=?base64?SGVs bG8=?=",
        "=?base64?SG=sbG8=?=",
        "=?base64?SGVsbG8===?=",
        "=?base64?_-8=?=",
    ],
)
def test_characters_outside_the_base64_alphabet_are_refused(raw):
    """Non-alphabet characters, misplaced padding and the URL-safe alphabet are refused."""
    refused(decode_value, raw, match="base64 alphabet")


def test_non_canonical_base64_is_refused():
    """Unused low bits set in the last character make the payload invalid."""
    refused(decode_value, "=?base64?SGVsbG9=?=", match="canonical")


def test_non_utf8_payload_is_refused():
    """Base64 of bytes that are not UTF-8 is refused."""
    refused(decode_value, "=?base64?/w==?=", match="not UTF-8")


def test_sentinel_without_room_for_a_payload_is_refused():
    """'=?base64?=' matches the sentinel pattern but prefix and suffix overlap: malformed."""
    refused(decode_value, "=?base64?=", match="no payload")


@pytest.mark.parametrize(
    "raw, kind", [("a\x01b", "control"), ("a\x7fb", "control"), ("caf\xe9", "non-ASCII"), ("l1\nl2", "control")]
)
def test_characters_a_header_cannot_carry_are_refused(raw, kind):
    """Control characters (other than tab) and non-ASCII in a raw value are refused."""
    error = refused(decode_value, raw, match=kind)
    assert "=?base64?" in str(error)


def test_error_names_the_header_when_given():
    """decode_value's error names and carries the header it was told about."""
    error = refused(lambda: decode_value("=?base64?x?=", header="Mcp-Param-Region"))
    assert str(error).startswith("Malformed Mcp-Param-Region header") and error.header == "Mcp-Param-Region"


@pytest.mark.parametrize(
    "value, sent",
    [
        ("us-west1", "us-west1"),
        ("us west 1", "us west 1"),
        ("", ""),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        (" us-west1", "=?base64?IHVzLXdlc3Qx?="),
        ("us-west1 ", "=?base64?dXMtd2VzdDEg?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("line1\r\nline2", "=?base64?bGluZTENCmxpbmUy?="),
        ("\tindented", "=?base64?CWluZGVudGVk?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ],
)
def test_encode_value_matches_the_spec_examples(value, sent):
    """encode_value produces the spec's encoding table exactly."""
    assert encode_value(value) == sent


@pytest.mark.parametrize("value", ["a\tb", "=?base64?=", "x\x00y", "é", "  ", "tab\t", "ok?=", "=?base64?x"])
def test_encode_then_decode_round_trips(value):
    """Whatever encode_value sends, decode_value gives back unchanged."""
    assert decode_value(encode_value(value)) == value


def test_internal_tab_and_overlapping_sentinel_are_encoded():
    """A tab (control character) and the sentinel-like '=?base64?=' are sent as base64."""
    assert encode_value("a\tb").startswith("=?base64?")
    assert encode_value("=?base64?=").startswith("=?base64?")
    assert encode_value("=?base64?x") == "=?base64?x"
