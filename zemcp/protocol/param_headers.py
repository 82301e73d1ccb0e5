"""Tool parameters mirrored into ``Mcp-Param-*`` headers (MCP 2026-07-28, SEP-2243).

A tool property whose schema carries ``"x-mcp-header": "<Token>"`` travels also as the header
``Mcp-Param-<Token>`` of a ``tools/call``, so that intermediaries can route on it. Declare one
in Python as ``Annotated[str, McpHeader("Region")]``; :func:`header_annotations` checks the marks
when the tool is registered, :func:`check_params` checks a request's headers against its
arguments, and :func:`param_headers` builds them (the client side).

Pure functions over a headers object with ``get``/``getlist`` (werkzeug ``Headers``) or any
mapping; no HTTP framework here. Spec: MCP 2026-07-28 basic/transports/streamable-http,
Standard headers (SEP-2243), Custom Headers from Tool Parameters, and server/tools
"x-mcp-header".
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from zemcp.protocol.header_values import HeaderError, decode_value, encode_value, joined_hint, show, single_value
from zemcp.protocol.identifiers import lone_surrogate

PARAM_HEADER_PREFIX = "Mcp-Param-"
#: The JSON Schema keyword that designates a tool property for an ``Mcp-Param-*`` header.
X_MCP_HEADER = "x-mcp-header"

# RFC 9110 section 5.6.2: token = 1*tchar.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_HEADER_TYPES = ("string", "integer", "boolean")
_ABSENT = object()

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
                f"x-mcp-header {show(token)} at {where} is not on a property reachable from the schema root through "
                "'properties' alone (items, anyOf/oneOf/allOf/not, if/then/else, $defs and $ref do not count); put "
                "it on a string, integer or boolean entry of 'properties' (nested objects' 'properties' are fine)"
            )
        where = f"property {'.'.join(path)!r}"
        if not isinstance(token, str):
            raise ValueError(
                f'x-mcp-header on {where} must be a string naming the header, e.g. "Region" for '
                f"Mcp-Param-Region, not {show(token)}"
            )
        if not _TOKEN.fullmatch(token):
            raise ValueError(
                f"x-mcp-header {show(token)} on {where} is not a valid HTTP header name token: use 1 or more of "
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
        headers: the request headers (see :func:`zemcp.protocol.headers.check_standard`).
        annotations: :func:`header_annotations` of the tool's ``inputSchema``.
        arguments: the call's ``params.arguments`` (a non-dict counts as no arguments).
    Returns:
        None when the headers agree with the arguments.
    Raises:
        HeaderError: a header is missing, sent more than once, sent without a value in the
            body, malformed, or differs from the argument; or the argument holds a lone
            surrogate, which no header can carry.

    Spec: MCP 2026-07-28 basic/transports/streamable-http, Standard headers (SEP-2243),
    Server Behavior for Custom Headers, Server Validation.
    """
    for token, path in annotations.items():
        name = PARAM_HEADER_PREFIX + token
        argument = ".".join(path)
        raw = single_value(headers, name)
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
                    f"Header mismatch: {name} was sent as {show(raw)} but the body's argument {argument!r} is {why}; "
                    f"send {name} only with a string, integer or boolean value of {argument!r}, and omit it otherwise",
                    name,
                )
            continue
        surrogate = lone_surrogate(rendered)
        if surrogate is not None:
            raise HeaderError(
                f"Invalid argument for {name}: the body's argument {argument!r} holds a lone surrogate "
                f"({rendered[surrogate]!r} at index {surrogate}), which has no UTF-8 form, so no {name} header can "
                "carry it; send the argument as Unicode text (a character beyond U+FFFF as a pair of surrogates, "
                "never half of one)",
                name,
            )
        fix = f"send {name}: {encode_value(rendered)}"
        if raw is None:
            raise HeaderError(
                f"Missing header: the body's argument {argument!r} is {show(value)}, and tool arguments marked "
                f"x-mcp-header must be mirrored into their header; {fix}",
                name,
            )
        decoded = decode_value(raw, header=name)
        if not _matches(value, rendered, decoded):
            raise HeaderError(
                f"Header mismatch: {name} header value {show(decoded)} does not match the body's argument "
                f"{argument!r} ({show(value)}); {fix}{joined_hint(raw, name)}",
                name,
            )


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
    got = f"not {show(kind)}" if kind is not None else "and it has no 'type' keyword"
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
