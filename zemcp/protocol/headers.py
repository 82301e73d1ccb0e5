"""Streamable HTTP request headers of MCP 2026-07-28 (SEP-2243): checking them against the body.

A modern POST mirrors parts of its JSON-RPC body into headers so that load balancers and
gateways can route without reading the body:

- ``MCP-Protocol-Version``: the ``io.modelcontextprotocol/protocolVersion`` of ``params._meta``;
- ``Mcp-Method``: the JSON-RPC ``method``;
- ``Mcp-Name``: ``params.name`` (``tools/call``, ``prompts/get``), ``params.uri``
  (``resources/read``) or ``params.taskId`` (``tasks/get``, ``tasks/update``, ``tasks/cancel``
  of the tasks extension);
- ``Mcp-Param-<Token>``: each tool argument whose property schema carries
  ``"x-mcp-header": "<Token>"``.

A server that reads the body must refuse a request whose headers are missing, malformed or
different from the body, with HTTP 400 and JSON-RPC error -32020 (HeaderMismatch): otherwise
an intermediary could route on one value while the server executes another. ``Mcp-Name`` and
``Mcp-Param-*`` values that are not plain printable ASCII travel as
``=?base64?<base64 of the UTF-8>?=``.

This module holds the standard headers, the first three: :func:`check_standard` and
:func:`standard_headers`. The ``Mcp-Param-*`` headers and ``McpHeader`` are in
:mod:`zemcp.protocol.param_headers`; the value encoding and ``HeaderError`` in
:mod:`zemcp.protocol.header_values`.

Pure functions over a headers object with ``get``/``getlist`` (werkzeug ``Headers``) or any
mapping; no HTTP framework here. Spec: MCP 2026-07-28 basic/transports/streamable-http,
Standard headers (SEP-2243).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zemcp.protocol.header_values import (
    OWS,
    HeaderError,
    check_field_value,
    decode_value,
    encode_value,
    joined_hint,
    show,
    single_value,
)

PROTOCOL_VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
#: Methods that need ``Mcp-Name``, and the ``params`` field it mirrors.
NAME_FIELDS = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    # The io.modelcontextprotocol/tasks extension (SEP-2663) routes its methods by task.
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


def check_standard(headers: Any, method: str, params: Any, envelope_version: Any) -> None:
    """Check a modern request's standard headers against its body.

    Checks that ``MCP-Protocol-Version`` equals the envelope's protocol version and that
    ``Mcp-Method`` equals the JSON-RPC method (all requests), and for ``tools/call`` and
    ``prompts/get`` that ``Mcp-Name`` equals ``params.name``, for ``resources/read`` that it
    equals ``params.uri``, for the tasks extension's ``tasks/get``, ``tasks/update`` and
    ``tasks/cancel`` that it equals ``params.taskId`` (after base64-sentinel decoding). Values are compared exactly
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
    version = single_value(headers, PROTOCOL_VERSION_HEADER)
    body_version = "params._meta io.modelcontextprotocol/protocolVersion"
    if version is None:
        raise HeaderError(
            f"Missing header: {PROTOCOL_VERSION_HEADER} is required on every request and must equal the body's "
            f"{body_version} ({show(envelope_version)}); send {PROTOCOL_VERSION_HEADER}: {_plain(envelope_version)}",
            PROTOCOL_VERSION_HEADER,
        )
    _compare_plain(PROTOCOL_VERSION_HEADER, version, envelope_version, body_version)

    sent_method = single_value(headers, METHOD_HEADER)
    if sent_method is None:
        raise HeaderError(
            f"Missing header: {METHOD_HEADER} is required on every request and must equal the JSON-RPC method "
            f"({show(method)}); send {METHOD_HEADER}: {_plain(method)}",
            METHOD_HEADER,
        )
    _compare_plain(METHOD_HEADER, sent_method, method, "method")

    field = NAME_FIELDS.get(method) if isinstance(method, str) else None
    if field is None:
        return
    expected = params.get(field) if isinstance(params, Mapping) else None
    if not isinstance(expected, str):
        return
    sent_name = single_value(headers, NAME_HEADER)
    if sent_name is None:
        raise HeaderError(
            f"Missing header: {method} requests need {NAME_HEADER} equal to the body's params.{field} "
            f"({show(expected)}); send {NAME_HEADER}: {encode_value(expected)}",
            NAME_HEADER,
        )
    decoded = decode_value(sent_name, header=NAME_HEADER)
    if decoded != expected:
        raise HeaderError(
            f"Header mismatch: {NAME_HEADER} header value {show(decoded)} does not match body params.{field} "
            f"{show(expected)}; send {NAME_HEADER}: {encode_value(expected)}{joined_hint(sent_name, NAME_HEADER)}",
            NAME_HEADER,
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
        with :func:`encode_value`) for the methods of :data:`NAME_FIELDS`.

    Spec: MCP 2026-07-28 basic/transports/streamable-http, Standard headers (SEP-2243).
    """
    sent = {PROTOCOL_VERSION_HEADER: version, METHOD_HEADER: method}
    field = NAME_FIELDS.get(method)
    value = params.get(field) if field and isinstance(params, Mapping) else None
    if isinstance(value, str):
        sent[NAME_HEADER] = encode_value(value)
    return sent


# -- internals ---------------------------------------------------------------------------


def _compare_plain(header: str, raw: str, expected: Any, source: str) -> None:
    # MCP-Protocol-Version and Mcp-Method do not use the base64 sentinel: compare literally.
    value = raw.strip(OWS)
    check_field_value(value, header)
    if value != expected:
        raise HeaderError(
            f"Header mismatch: {header} header value {show(value)} does not match body {source} {show(expected)} "
            f"(values are case-sensitive); send {header}: {_plain(expected)}{joined_hint(raw, header)}",
            header,
        )


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else "<the same value as the body>"
