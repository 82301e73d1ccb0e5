"""Streamable HTTP request headers of MCP 2026-07-28 (SEP-2243): checking them against the body.

A modern POST mirrors parts of its JSON-RPC body into headers so that load balancers and
gateways can route without reading the body:

- ``MCP-Protocol-Version``: the ``io.modelcontextprotocol/protocolVersion`` of ``params._meta``;
- ``Mcp-Method``: the JSON-RPC ``method``;
- ``Mcp-Name``: ``params.name`` (``tools/call``, ``prompts/get``) or ``params.uri``
  (``resources/read``);
- ``Mcp-Param-<Token>``: each tool argument whose property schema carries
  ``"x-mcp-header": "<Token>"``.

A server that reads the body must refuse a request whose headers are missing, malformed or
different from the body, with HTTP 400 and JSON-RPC error -32020 (HeaderMismatch): otherwise
an intermediary could route on one value while the server executes another. ``Mcp-Name`` and
``Mcp-Param-*`` values that are not plain printable ASCII travel as
``=?base64?<base64 of the UTF-8>?=``.

Declare a mirrored tool parameter in Python as ``Annotated[str, McpHeader("Region")]``.

Pure functions over a headers object with ``get``/``getlist`` (werkzeug ``Headers``) or any
mapping; no HTTP framework here. Spec: MCP 2026-07-28 basic/transports/streamable-http,
Standard headers (SEP-2243), and server/tools "x-mcp-header".
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

#: JSON-RPC error code HeaderMismatch, answered with HTTP 400.
HEADER_MISMATCH = -32020

PROTOCOL_VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
PARAM_HEADER_PREFIX = "Mcp-Param-"
#: The JSON Schema keyword that designates a tool property for an ``Mcp-Param-*`` header.
X_MCP_HEADER = "x-mcp-header"
#: Methods that need ``Mcp-Name``, and the ``params`` field it mirrors.
NAME_FIELDS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

_PREFIX = "=?base64?"
_SUFFIX = "?="
_OWS = " \t"
# RFC 9110 section 5.5: a field value is visible ASCII, SP and HTAB (obs-text is obsolete).
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")
# RFC 9110 section 5.6.2: token = 1*tchar.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_HEADER_TYPES = ("string", "integer", "boolean")
_ABSENT = object()
_SHOWN = 120

# JSON Schema 2020-12 keywords (and the draft-07 ones still met in the wild) whose values are
# subschemas. Only ``properties`` keeps a position statically reachable from the root.
_ONE_SUBSCHEMA = (
    "items",
    "additionalItems",
    "contains",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
)
_LIST_OF_SUBSCHEMAS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_MAP_OF_SUBSCHEMAS = ("patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions")


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


@dataclass(frozen=True)
class McpHeader:
    """Marks a tool parameter to be mirrored into the ``Mcp-Param-<name>`` header.

    Use it as ``Annotated`` metadata: ``region: Annotated[str, McpHeader("Region")]`` adds
    ``"x-mcp-header": "Region"`` to the property's schema. The parameter must be ``str``,
    ``int`` or ``bool`` (or a ``Literal``/Enum of one of them) and not nullable; the name is
    checked when the tool is registered (see :func:`header_annotations`).

    Args:
        name: the header name's suffix: an RFC 9110 token such as ``"Region"``.
    Raises:
        TypeError: ``name`` is not a str.
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(
                f"McpHeader takes the header name suffix as a str, e.g. McpHeader('Region'), not {self.name!r}"
            )


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
    value = raw.strip(_OWS)
    _check_field_value(value, label)
    if not (value.startswith(_PREFIX) and value.endswith(_SUFFIX)):
        return value
    fix = f"send =?base64?<standard padded base64 of the UTF-8 bytes>?=, e.g. {_PREFIX}SGVsbG8={_SUFFIX} for 'Hello'"
    if len(value) < len(_PREFIX) + len(_SUFFIX):
        # "=?base64?=": prefix and suffix overlap, so there is no payload to decode.
        raise HeaderError(
            f"Malformed {label} header: {_show(value)} matches the base64 sentinel but has no payload; {fix}", header
        )
    payload = value[len(_PREFIX) : -len(_SUFFIX)]
    if not _BASE64.fullmatch(payload):
        bad = next((c for c in payload if not (c.isascii() and (c.isalnum() or c in "+/="))), "=")
        raise HeaderError(
            f"Malformed {label} header: the base64 payload {_show(payload)} contains {_show(bad)}, which is not in "
            f"the standard base64 alphabet (A-Z a-z 0-9 + / and trailing '=' padding); {fix}",
            header,
        )
    if len(payload) % 4:
        raise HeaderError(
            f"Malformed {label} header: the base64 payload {_show(payload)} is {len(payload)} characters long, not a "
            f"multiple of 4, so its '=' padding is wrong; {fix}",
            header,
        )
    try:
        data = base64.b64decode(payload, validate=True)
    except binascii.Error as exc:
        raise HeaderError(
            f"Malformed {label} header: the base64 payload {_show(payload)} does not decode ({exc}); {fix}", header
        ) from None
    # Unused low bits set ("SGVsbG9=") decode leniently; only the canonical form has one reading.
    if base64.b64encode(data).decode("ascii") != payload:
        raise HeaderError(
            f"Malformed {label} header: the base64 payload {_show(payload)} is not canonical base64 (its last "
            f"character carries bits beyond the data); {fix}",
            header,
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise HeaderError(
            f"Malformed {label} header: the base64 payload {_show(payload)} decodes to bytes that are not UTF-8; "
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


def check_standard(headers: Any, method: str, params: Any, envelope_version: Any) -> None:
    """Check a modern request's standard headers against its body.

    Checks that ``MCP-Protocol-Version`` equals the envelope's protocol version and that
    ``Mcp-Method`` equals the JSON-RPC method (all requests), and for ``tools/call`` and
    ``prompts/get`` that ``Mcp-Name`` equals ``params.name``, for ``resources/read`` that it
    equals ``params.uri`` (after base64-sentinel decoding). Values are compared exactly
    (they are case-sensitive) after dropping surrounding spaces and tabs; header names are
    case-insensitive. Each header must appear once. ``Mcp-Name`` on other methods is not
    looked at (the spec gives it no body field there). When the body's name/uri is not a
    string the check is left to the method's own params validation (-32602).

    Header requirements for notification POSTs are not defined by this revision: call this
    for requests only.

    Args:
        headers: the request headers: an object with ``get`` and ``getlist`` (werkzeug
            ``Headers``/``EnvironHeaders``), or any mapping (looked up case-insensitively).
        method: the JSON-RPC ``method``.
        params: the JSON-RPC ``params`` (a dict; anything else counts as no fields).
        envelope_version: ``params._meta["io.modelcontextprotocol/protocolVersion"]``.
    Returns:
        None when the headers agree with the body.
    Raises:
        HeaderError: a header is missing, sent more than once, holds characters an HTTP
            field cannot, is malformed base64, or differs from the body.

    Spec: MCP 2026-07-28 basic/transports/streamable-http, Standard headers (SEP-2243),
    Protocol Version Header, Standard Request Headers, Server Validation.
    """
    version = _single(headers, PROTOCOL_VERSION_HEADER)
    body_version = "params._meta io.modelcontextprotocol/protocolVersion"
    if version is None:
        raise HeaderError(
            f"Missing header: {PROTOCOL_VERSION_HEADER} is required on every request and must equal the body's "
            f"{body_version} ({_show(envelope_version)}); send {PROTOCOL_VERSION_HEADER}: {_plain(envelope_version)}",
            PROTOCOL_VERSION_HEADER,
        )
    _compare_plain(PROTOCOL_VERSION_HEADER, version, envelope_version, body_version)

    sent_method = _single(headers, METHOD_HEADER)
    if sent_method is None:
        raise HeaderError(
            f"Missing header: {METHOD_HEADER} is required on every request and must equal the JSON-RPC method "
            f"({_show(method)}); send {METHOD_HEADER}: {_plain(method)}",
            METHOD_HEADER,
        )
    _compare_plain(METHOD_HEADER, sent_method, method, "method")

    field = NAME_FIELDS.get(method) if isinstance(method, str) else None
    if field is None:
        return
    expected = params.get(field) if isinstance(params, Mapping) else None
    if not isinstance(expected, str):
        return
    sent_name = _single(headers, NAME_HEADER)
    if sent_name is None:
        raise HeaderError(
            f"Missing header: {method} requests need {NAME_HEADER} equal to the body's params.{field} "
            f"({_show(expected)}); send {NAME_HEADER}: {encode_value(expected)}",
            NAME_HEADER,
        )
    decoded = decode_value(sent_name, header=NAME_HEADER)
    if decoded != expected:
        raise HeaderError(
            f"Header mismatch: {NAME_HEADER} header value {_show(decoded)} does not match body params.{field} "
            f"{_show(expected)}; send {NAME_HEADER}: {encode_value(expected)}{_joined_hint(sent_name, NAME_HEADER)}",
            NAME_HEADER,
        )


def header_annotations(input_schema: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """The ``x-mcp-header`` annotations of a tool's ``inputSchema``, checked.

    An annotation is valid when it sits on a property reached from the root through
    ``properties`` keys alone (nested objects allowed; not through ``items``, ``anyOf`` /
    ``oneOf`` / ``allOf`` / ``not``, ``if`` / ``then`` / ``else``, ``$defs`` or ``$ref``),
    its value is a non-empty RFC 9110 token, the property's ``type`` is exactly
    ``"string"``, ``"integer"`` or ``"boolean"``, and no other annotation has the same
    value ignoring case.

    Args:
        input_schema: the tool's ``inputSchema``.
    Returns:
        ``{lower-cased token: property path}``, the path being the ``properties`` keys from
        the root, e.g. ``{"region": ("region",), "zone": ("location", "zone")}``; empty when
        there are no annotations.
    Raises:
        ValueError: an invalid annotation; the message names the property and the fix.

    Spec: MCP 2026-07-28 basic/transports/streamable-http, Standard headers (SEP-2243),
    Custom Headers from Tool Parameters; server/tools, x-mcp-header.
    """
    found: dict[str, tuple[str, ...]] = {}
    declared: dict[str, tuple[str, str]] = {}
    for path, pointer, schema in _positions(input_schema):
        if X_MCP_HEADER not in schema:
            continue
        token = schema[X_MCP_HEADER]
        if not path:
            where = "the schema root" if path == () else pointer
            raise ValueError(
                f"x-mcp-header {_show(token)} at {where} is not on a property reachable from the schema root through "
                "'properties' alone (items, anyOf/oneOf/allOf/not, if/then/else, $defs and $ref do not count); put "
                "it on a string, integer or boolean entry of 'properties' (nested objects' 'properties' are fine)"
            )
        where = f"property {'.'.join(path)!r}"
        if not isinstance(token, str):
            raise ValueError(
                f'x-mcp-header on {where} must be a string naming the header, e.g. "Region" for '
                f"Mcp-Param-Region, not {_show(token)}"
            )
        if not _TOKEN.fullmatch(token):
            raise ValueError(
                f"x-mcp-header {_show(token)} on {where} is not a valid HTTP header name token: use 1 or more of "
                "A-Z a-z 0-9 and ! # $ % & ' * + - . ^ _ ` | ~ (no spaces, colons, control or non-ASCII characters)"
            )
        kind = schema.get("type")
        if not (isinstance(kind, str) and kind in _HEADER_TYPES):
            raise ValueError(f"x-mcp-header {token!r} on {where}: {_type_problem(schema)}")
        key = token.lower()
        if key in declared:
            first, first_where = declared[key]
            raise ValueError(
                f"x-mcp-header {token!r} on {where} repeats {first!r} of {first_where} (header names ignore case, "
                f"so both would be Mcp-Param-{token}); give each mirrored property its own header name"
            )
        declared[key] = (token, where)
        found[key] = path
    return found


def check_params(headers: Any, annotations: Mapping[str, tuple[str, ...]], arguments: Any) -> None:
    """Check a ``tools/call``'s ``Mcp-Param-*`` headers against its arguments.

    For each annotated property: when the argument is absent or null the header must be
    absent; otherwise it must be present once and, after base64-sentinel decoding, equal
    the argument: a string exactly; a boolean as ``true`` / ``false`` (lower case); an
    integer numerically (``42``, ``42.0`` and ``042`` all match 42; exponents, ``+``, hex
    are refused). An argument that is neither (a list, an object) has no header form: the
    header must then be absent, and the arguments' schema validation reports the value.
    ``Mcp-Param-*`` headers of no annotation are ignored.

    Args:
        headers: the request headers (see :func:`check_standard`).
        annotations: :func:`header_annotations` of the tool's ``inputSchema``.
        arguments: the call's ``params.arguments`` (a non-dict counts as no arguments).
    Returns:
        None when the headers agree with the arguments.
    Raises:
        HeaderError: a header is missing, sent more than once, sent without a value in the
            body, malformed, or differs from the argument.

    Spec: MCP 2026-07-28 basic/transports/streamable-http, Standard headers (SEP-2243),
    Server Behavior for Custom Headers, Server Validation.
    """
    for token, path in annotations.items():
        name = PARAM_HEADER_PREFIX + token
        argument = ".".join(path)
        raw = _single(headers, name)
        value = _value_at(arguments, path)
        rendered = _render(value)
        if rendered is None:
            if raw is not None:
                why = (
                    "absent or null"
                    if value is _ABSENT or value is None
                    else f"a {type(value).__name__}, which has no header form"
                )
                raise HeaderError(
                    f"Header mismatch: {name} was sent as {_show(raw)} but the body's argument {argument!r} is {why}; "
                    f"send {name} only with a string, integer or boolean value of {argument!r}, and omit it otherwise",
                    name,
                )
            continue
        fix = f"send {name}: {encode_value(rendered)}"
        if raw is None:
            raise HeaderError(
                f"Missing header: the body's argument {argument!r} is {_show(value)}, and tool arguments marked "
                f"x-mcp-header must be mirrored into their header; {fix}",
                name,
            )
        decoded = decode_value(raw, header=name)
        if not _matches(value, rendered, decoded):
            raise HeaderError(
                f"Header mismatch: {name} header value {_show(decoded)} does not match the body's argument "
                f"{argument!r} ({_show(value)}); {fix}{_joined_hint(raw, name)}",
                name,
            )


def standard_headers(method: str, params: Any, version: str) -> dict[str, str]:
    """The standard headers a client sends with a modern request (the inverse of
    :func:`check_standard`).

    Args:
        method: the JSON-RPC ``method``.
        params: its ``params`` (a dict, or None).
        version: the protocol version of the request's ``_meta``.
    Returns:
        ``{"MCP-Protocol-Version": ..., "Mcp-Method": ...}``, plus ``Mcp-Name`` (encoded
        with :func:`encode_value`) for ``tools/call``, ``prompts/get`` and ``resources/read``.

    Spec: MCP 2026-07-28 basic/transports/streamable-http, Standard headers (SEP-2243).
    """
    sent = {PROTOCOL_VERSION_HEADER: version, METHOD_HEADER: method}
    field = NAME_FIELDS.get(method)
    value = params.get(field) if field and isinstance(params, Mapping) else None
    if isinstance(value, str):
        sent[NAME_HEADER] = encode_value(value)
    return sent


def param_headers(annotations: Mapping[str, tuple[str, ...]], arguments: Any) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers a client sends with a ``tools/call`` (the inverse of
    :func:`check_params`).

    Args:
        annotations: :func:`header_annotations` of the tool's ``inputSchema``.
        arguments: the call's arguments.
    Returns:
        ``{"Mcp-Param-<token>": encoded value}`` for each annotated argument that is a
        string, integer or boolean; absent and null arguments get no header.

    Spec: MCP 2026-07-28 basic/transports/streamable-http, Standard headers (SEP-2243),
    Client Behavior.
    """
    sent = {}
    for token, path in annotations.items():
        rendered = _render(_value_at(arguments, path))
        if rendered is not None:
            sent[PARAM_HEADER_PREFIX + token] = encode_value(rendered)
    return sent


# -- internals ---------------------------------------------------------------------------


def _single(headers: Any, name: str) -> str | None:
    """The one value of header ``name``, or None when absent; refuses repeats."""
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
            f"Duplicate header: {name} was sent {len(values)} times ({', '.join(_show(v) for v in values[:3])}); "
            "send it exactly once",
            name,
        )
    return values[0] if values else None


def _compare_plain(header: str, raw: str, expected: Any, source: str) -> None:
    # MCP-Protocol-Version and Mcp-Method do not use the base64 sentinel: compare literally.
    value = raw.strip(_OWS)
    _check_field_value(value, header)
    if value != expected:
        raise HeaderError(
            f"Header mismatch: {header} header value {_show(value)} does not match body {source} {_show(expected)} "
            f"(values are case-sensitive); send {header}: {_plain(expected)}{_joined_hint(raw, header)}",
            header,
        )


def _check_field_value(value: str, label: str) -> None:
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


def _joined_hint(raw: str, header: str) -> str:
    # WSGI servers join repeated header lines with commas, hiding the repeat from getlist.
    if "," not in raw:
        return ""
    return f" (if {header} was sent more than once, the copies were joined with commas: send it once)"


def _show(value: Any) -> str:
    # Header values come from the client: quoted, and cut short so a huge one cannot flood logs.
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else "<the same value as the body>"


def _positions(schema: Any) -> Iterator[tuple[tuple[str, ...] | None, str, Mapping[str, Any]]]:
    """``(properties path or None, JSON pointer, subschema)`` for every subschema; the path
    is None once anything but ``properties`` was crossed."""
    stack: list[tuple[tuple[str, ...] | None, str, Any]] = [((), "", schema)]
    while stack:
        path, pointer, node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        yield path, pointer or "/", node
        children: list[tuple[tuple[str, ...] | None, str, Any]] = []
        for key, sub in node.items():
            here = f"{pointer}/{_escape(key)}"
            if key == "properties" and isinstance(sub, Mapping):
                for name, child in sub.items():
                    children.append(((*path, name) if path is not None else None, f"{here}/{_escape(name)}", child))
            elif key in _ONE_SUBSCHEMA and isinstance(sub, Mapping):
                children.append((None, here, sub))
            elif key in _LIST_OF_SUBSCHEMAS and isinstance(sub, list):
                children.extend((None, f"{here}/{i}", child) for i, child in enumerate(sub))
            elif key in _MAP_OF_SUBSCHEMAS and isinstance(sub, Mapping):
                children.extend((None, f"{here}/{_escape(name)}", child) for name, child in sub.items())
        # Reversed onto the stack so positions come out in document order (stable error messages).
        stack.extend(reversed(children))


def _escape(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _type_problem(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    got = f"not {_show(kind)}" if kind is not None else "and it has no 'type' keyword"
    problem = (
        f"the property's type must be exactly one of 'string', 'integer', 'boolean' to be mirrored into a header, {got}"
    )
    options = schema.get("anyOf") or schema.get("oneOf") or ()
    nullable = (
        kind == "null"
        or (isinstance(kind, list) and "null" in kind)
        or any(isinstance(o, Mapping) and o.get("type") == "null" for o in options)
    )
    if nullable and kind != "null":
        problem += (
            "; a nullable property (in Python X | None, or a parameter defaulting to None) has no single "
            "type: declare it as plain X, with a non-None default when it is optional"
        )
    elif kind == "number":
        problem += "; 'number' is not allowed because float text differs between implementations: use 'integer'"
    return problem


def _value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    node = arguments
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return _ABSENT
        node = node[key]
    return node


def _render(value: Any) -> str | None:
    """The header text of an argument, or None when it gets no header."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        try:
            return str(value)
        except ValueError:
            # An int past Python's int-to-str digit limit: no client could have mirrored it.
            return None
    return None


def _matches(value: Any, rendered: str, decoded: str) -> bool:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not _DECIMAL.fullmatch(decoded):
            return False
        # Exact decimal arithmetic: no float rounding, integers beyond 2**53 stay exact.
        number = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
        return Decimal(decoded) == number
    return decoded == rendered
