"""MCP header values (SEP-2243): reading one from a request, and the ``=?base64?…?=`` encoding.

What the standard headers (:mod:`zemcp.protocol.headers`) and the tool parameter headers
(:mod:`zemcp.protocol.param_headers`) share: :class:`HeaderError` (-32020, HeaderMismatch) for a
request whose headers are wrong; a header's one value (:func:`single_value`) and the characters
an HTTP field value may hold; and :func:`decode_value` / :func:`encode_value`, the form of
``Mcp-Name`` and ``Mcp-Param-*`` values that are not plain printable ASCII.

Spec: MCP 2026-07-28 basic/transports/streamable-http, Standard headers (SEP-2243), Value
Encoding and Server Validation.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

#: JSON-RPC error code HeaderMismatch, answered with HTTP 400.
HEADER_MISMATCH = -32020

_PREFIX = "=?base64?"
_SUFFIX = "?="
#: Spaces and tabs around a field value: HTTP framing, not part of the value (RFC 9110 section 5.5).
OWS = " \t"
# RFC 9110 section 5.5: a field value is visible ASCII, SP and HTAB (obs-text is obsolete).
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_SHOWN = 120


class HeaderError(Exception):
    """A request's MCP headers are missing, malformed, duplicated or differ from its body.

    The message says which header, what the body holds and what to send instead; answer it
    as HTTP 400 with JSON-RPC error ``code`` (-32020, HeaderMismatch) and the message.

    Attributes:
        header: the header at fault, e.g. ``"Mcp-Name"``, or None when not known.
        code: -32020.
        http_status: 400.
    """

    code = HEADER_MISMATCH
    http_status = 400

    def __init__(self, message: str, header: str | None = None):
        super().__init__(message)
        self.message = message
        self.header = header


def decode_value(raw: str, *, header: str | None = None) -> str:
    """The value an ``Mcp-Name`` or ``Mcp-Param-*`` header carries.

    Leading and trailing spaces and tabs are HTTP framing and are dropped (RFC 9110 section
    5.5). A value that starts with ``=?base64?`` and ends with ``?=`` (both case-sensitive)
    is the base64 (standard alphabet, padded, canonical) of the UTF-8 of the real value; any
    other value is taken literally.

    Args:
        raw: the header value as received.
        header: the header's name, used in error messages.
    Returns:
        the decoded value.
    Raises:
        HeaderError: a character an HTTP field value cannot hold (control characters other
            than tab, non-ASCII), or a sentinel whose payload is not valid padded base64 or
            not UTF-8.

    Spec: MCP 2026-07-28 basic/transports/streamable-http, Standard headers (SEP-2243),
    Value Encoding.
    """
    label = header or "header"
    value = raw.strip(OWS)
    check_field_value(value, label)
    if not (value.startswith(_PREFIX) and value.endswith(_SUFFIX)):
        return value
    fix = f"send =?base64?<standard padded base64 of the UTF-8 bytes>?=, e.g. {_PREFIX}SGVsbG8={_SUFFIX} for 'Hello'"
    if len(value) < len(_PREFIX) + len(_SUFFIX):
        # "=?base64?=": prefix and suffix overlap, so there is no payload to decode.
        raise HeaderError(
            f"Malformed {label} header: {show(value)} matches the base64 sentinel but has no payload; {fix}", header
        )
    payload = value[len(_PREFIX) : -len(_SUFFIX)]
    if not _BASE64.fullmatch(payload):
        bad = next((c for c in payload if not (c.isascii() and (c.isalnum() or c in "+/="))), "=")
        raise HeaderError(
            f"Malformed {label} header: the base64 payload {show(payload)} contains {show(bad)}, which is not in "
            f"the standard base64 alphabet (A-Z a-z 0-9 + / and trailing '=' padding); {fix}",
            header,
        )
    if len(payload) % 4:
        raise HeaderError(
            f"Malformed {label} header: the base64 payload {show(payload)} is {len(payload)} characters long, not a "
            f"multiple of 4, so its '=' padding is wrong; {fix}",
            header,
        )
    try:
        data = base64.b64decode(payload, validate=True)
    except binascii.Error as exc:
        raise HeaderError(
            f"Malformed {label} header: the base64 payload {show(payload)} does not decode ({exc}); {fix}", header
        ) from None
    # Unused low bits set ("SGVsbG9=") decode leniently; only the canonical form has one reading.
    if base64.b64encode(data).decode("ascii") != payload:
        raise HeaderError(
            f"Malformed {label} header: the base64 payload {show(payload)} is not canonical base64 (its last "
            f"character carries bits beyond the data); {fix}",
            header,
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise HeaderError(
            f"Malformed {label} header: the base64 payload {show(payload)} decodes to bytes that are not UTF-8; "
            f"encode the UTF-8 bytes of the value; {fix}",
            header,
        ) from None


def encode_value(value: str) -> str:
    """The header form of an ``Mcp-Name`` or ``Mcp-Param-*`` value (the client side).

    The value itself when it is printable ASCII (0x20-0x7E) without leading or trailing
    space and does not look like the sentinel (starts with ``=?base64?`` and ends with
    ``?=``); else ``=?base64?<base64 of its UTF-8>?=``.

    Args:
        value: the string to send.
    Returns:
        the header value; :func:`decode_value` gives ``value`` back.
    Raises:
        UnicodeEncodeError: ``value`` holds a lone surrogate, which has no UTF-8 form (the
            server refuses such names where it reads a message, :mod:`zemcp.protocol.identifiers`).

    Spec: MCP 2026-07-28 basic/transports/streamable-http, Standard headers (SEP-2243),
    Value Encoding.
    """
    plain = (
        all("\x20" <= c <= "\x7e" for c in value)
        and value == value.strip(" ")
        and not (value.startswith(_PREFIX) and value.endswith(_SUFFIX))
    )
    if plain:
        return value
    return _PREFIX + base64.b64encode(value.encode("utf-8")).decode("ascii") + _SUFFIX


def single_value(headers: Any, name: str) -> str | None:
    """The one value of header ``name``, or None when absent; refuses repeats.

    Args:
        headers: the request headers: an object with ``get`` and ``getlist`` (werkzeug
            ``Headers``/``EnvironHeaders``), or any mapping (looked up case-insensitively).
        name: the header's name.
    Returns:
        the value as received (surrounding spaces and tabs kept), or None.
    Raises:
        HeaderError: the header was sent more than once.
    """
    if hasattr(headers, "environ"):
        # A WSGI environ holds one value per header (a server joins repeats with commas), so
        # a plain lookup does what getlist would, without walking every key of the environ.
        value: str | None = headers.get(name)
        return value
    if hasattr(headers, "getlist"):
        values = list(headers.getlist(name))
    else:
        wanted = name.lower()
        values = [v for k, v in headers.items() if k.lower() == wanted]
    if len(values) > 1:
        # Intermediaries may read the first copy and the server the last: one reading only.
        raise HeaderError(
            f"Duplicate header: {name} was sent {len(values)} times ({', '.join(show(v) for v in values[:3])}); "
            "send it exactly once",
            name,
        )
    return values[0] if values else None


def check_field_value(value: str, label: str) -> None:
    """Refuse a header value that an HTTP field value cannot hold (RFC 9110 section 5.5).

    Args:
        value: the value, surrounding spaces and tabs dropped.
        label: the header's name, used in the error message.
    Raises:
        HeaderError: a control character other than tab, or a non-ASCII character.
    """
    if _FIELD_VALUE.fullmatch(value):
        return
    index, bad = next((i, c) for i, c in enumerate(value) if not _FIELD_VALUE.fullmatch(c))
    kind = "a control character" if ord(bad) < 0x20 or ord(bad) == 0x7F else "a non-ASCII character"
    raise HeaderError(
        f"Malformed {label} header: it contains {kind} ({bad!r}) at position {index}, which an HTTP header value "
        "cannot carry; send printable ASCII, or for Mcp-Name and Mcp-Param-* headers the form "
        "=?base64?<base64 of the UTF-8 bytes>?=",
        label,
    )


def joined_hint(raw: str, header: str) -> str:
    """The end of a mismatch message for a value ``raw`` of ``header`` that holds a comma
    (the header may have been sent twice), else ``""``."""
    # WSGI servers join repeated header lines with commas, hiding the repeat from getlist.
    if "," not in raw:
        return ""
    return f" (if {header} was sent more than once, the copies were joined with commas: send it once)"


def show(value: Any) -> str:
    """``value`` as an error message shows it: its ``repr``, cut after 120 characters."""
    # Header values come from the client: quoted, and cut short so a huge one cannot flood logs.
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."
