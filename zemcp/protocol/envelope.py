"""The envelope of a 2026-07-28 request: what its ``params._meta`` declares, and its errors.

MCP 2026-07-28 basic/versioning: every request of the stateless era carries its protocol
version, client capabilities, client info and log level in ``params._meta`` under the keys
below, and every result carries the server's info there. A request whose envelope lacks a
field or holds a malformed one is refused with -32602 (:func:`client_view`), one naming a
version not served here with -32022 (:func:`check_version`), and one whose handler needed a
capability the envelope did not declare with -32021 (:data:`MISSING_CAPABILITY`).
"""

from __future__ import annotations

from typing import Any

from zemcp import logsafe
from zemcp.protocol import jsonrpc, versions
from zemcp.protocol.capabilities import LOG_LEVELS, ClientView
from zemcp.protocol.headers import PROTOCOL_VERSION_HEADER
from zemcp.protocol.jsonrpc import INVALID_PARAMS, ProtocolError

#: The ``_meta`` key of a 2026-07-28 request's protocol version.
META_VERSION = "io.modelcontextprotocol/protocolVersion"
#: The ``_meta`` key of the request's ``ClientCapabilities``.
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
#: The ``_meta`` key of the request's ``clientInfo`` (optional).
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
#: The ``_meta`` key of the lowest log level the client wants (optional; none sent without it).
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
#: The ``_meta`` key of every result's ``serverInfo``.
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

#: -32021 MissingRequiredClientCapability: the request needs a capability it did not declare.
MISSING_CAPABILITY = -32021
#: -32022 UnsupportedProtocolVersion.
UNSUPPORTED_VERSION = -32022


def version_of(message: jsonrpc.Request | jsonrpc.Notification) -> str | None:
    """The protocol version a 2026-07-28 message names in ``_meta``, when it is one zemcp knows."""
    meta = message.params.get("_meta")
    version = meta.get(META_VERSION) if isinstance(meta, dict) else None
    return version if isinstance(version, str) and version in versions.ALL else None


def selects_modern(message: jsonrpc.Message, headers: Any) -> bool:
    """True when a POSTed message is to be served in the 2026-07-28 era (basic/versioning, "dual-era").

    A request whose ``params._meta`` carries the protocol version is modern (an
    ``initialize`` in that envelope too: 2026-07-28 removed the method, so it gets 404).
    Otherwise ``initialize`` starts a handshake-era session, and any other message is modern
    when its ``MCP-Protocol-Version`` header names no handshake version and it comes without
    ``Mcp-Session-Id`` (its envelope is then checked, and refused, here).
    """
    params = getattr(message, "params", None)
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and META_VERSION in meta:
        return True
    if isinstance(message, jsonrpc.Request) and message.method == "initialize":
        return False
    version = headers.get(PROTOCOL_VERSION_HEADER)
    return version is not None and version not in versions.HANDSHAKE and headers.get("Mcp-Session-Id") is None


def client_view(request: jsonrpc.Request) -> ClientView:
    """The client as a 2026-07-28 request's ``params._meta`` declares it (kept for this request
    only, so bounded by the body limit alone).

    Raises:
        ProtocolError: -32602 naming the missing or malformed envelope field.
    """
    meta = request.params.get("_meta")
    needed = f"params._meta with {META_VERSION} (a string) and {META_CAPABILITIES} (an object)"
    if not isinstance(meta, dict):
        raise ProtocolError(
            INVALID_PARAMS,
            f"Invalid params: a 2026-07-28 request needs {needed}; clients of older versions send initialize first",
        )
    missing = [key for key in (META_VERSION, META_CAPABILITIES) if key not in meta]
    if missing:
        raise ProtocolError(
            INVALID_PARAMS,
            f"Invalid params: params._meta lacks {' and '.join(missing)}; a 2026-07-28 request needs {needed}",
        )
    version, capabilities = meta[META_VERSION], meta[META_CAPABILITIES]
    info = meta.get(META_CLIENT_INFO, {})
    level = meta.get(META_LOG_LEVEL)
    if not isinstance(version, str):
        raise ProtocolError(
            INVALID_PARAMS, f"Invalid params: {META_VERSION} must be a string such as {versions.MODERN[0]!r}"
        )
    if not isinstance(capabilities, dict):
        raise ProtocolError(
            INVALID_PARAMS,
            f"Invalid params: {META_CAPABILITIES} must be an object (ClientCapabilities; {{}} declares none)",
        )
    if not isinstance(info, dict):
        raise ProtocolError(
            INVALID_PARAMS, f"Invalid params: {META_CLIENT_INFO} must be an object (name, version), or left out"
        )
    if level is not None and level not in LOG_LEVELS:
        raise ProtocolError(
            INVALID_PARAMS,
            f"Invalid params: {META_LOG_LEVEL} must be one of {', '.join(LOG_LEVELS)}, got {logsafe.clip(level)}",
        )
    return ClientView(version, info, capabilities, log_level=level)


def check_version(client: ClientView) -> None:
    """Refuse a request whose envelope names a version the stateless era does not serve.

    Raises:
        ProtocolError: -32022 with ``data.supported`` (every version served) and ``data.requested``.
    """
    if not versions.is_modern(client.protocol_version):
        raise ProtocolError(
            UNSUPPORTED_VERSION,
            f"Unsupported protocol version {client.protocol_version!r}: send "
            f"{' or '.join(versions.MODERN)} in params._meta, or start a session with initialize for "
            f"{', '.join(versions.HANDSHAKE)}",
            data={"supported": list(versions.ALL), "requested": client.protocol_version},
        )
