"""MCP Apps (SEP-1865, extension ``io.modelcontextprotocol/ui``, final 2026-01-26) as data and rules.

What the extension puts on the wire, with no I/O: its identifier and the MIME type of its
HTML resources; ``_meta.ui`` of a tool (``resourceUri``, ``visibility``) and of a ``ui://``
resource (``csp``, ``permissions``, ``domain``, ``prefersBorder``), checked when a server
author declares them; and whether a client renders apps, from the capabilities it declared
(``extensions["io.modelcontextprotocol/ui"].mimeTypes``; the handshake's ``initialize`` or a
2026-07-28 request's ``params._meta``). Specification: ``modelcontextprotocol/ext-apps``,
``specification/2026-01-26/apps.mdx``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The extension's identifier (``capabilities.extensions``; apps.mdx "Extension Identifier").
EXTENSION = "io.modelcontextprotocol/ui"
#: The MIME type of an app's HTML resource (apps.mdx "UI Resource Format").
MIME_TYPE = "text/html;profile=mcp-app"
#: The URI scheme every app resource uses.
SCHEME = "ui://"
#: Who may call a tool (``_meta.ui.visibility``): the model, the app, or both when left out.
VISIBILITIES = ("model", "app")
#: The iframe permissions an app may ask for (``_meta.ui.permissions``).
PERMISSIONS = ("camera", "microphone", "geolocation", "clipboardWrite")
#: ``_meta.ui.csp`` keys and the :class:`AppCsp` fields they come from.
CSP_FIELDS = {
    "connectDomains": "connect_domains",
    "resourceDomains": "resource_domains",
    "frameDomains": "frame_domains",
    "baseUriDomains": "base_uri_domains",
}
#: An origin of ``_meta.ui.csp``: scheme, host (``*.`` for its subdomains) and optional port,
#: nothing a host could read as another CSP directive or source.
_ORIGIN = re.compile(r"(https?|wss?)://(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:[0-9]{1,5})?")


@dataclass(frozen=True)
class AppCsp:
    """The origins an app's HTML may reach (``_meta.ui.csp``); the host builds its
    Content-Security-Policy from them and blocks every other origin (apps.mdx "UI Resource
    Format", ``McpUiResourceCsp``). A field left None is left out of the policy.

    Attributes:
        connect_domains: origins of fetch, XHR and WebSocket connections (``connect-src``),
            such as ``"https://api.example.com"``.
        resource_domains: origins of scripts, images, styles, fonts and media (``script-src``,
            ``img-src`` ...); ``https://*.example.com`` covers the subdomains.
        frame_domains: origins of nested iframes (``frame-src``).
        base_uri_domains: allowed base URIs of the document (``base-uri``).
    """

    connect_domains: Sequence[str] | None = None
    resource_domains: Sequence[str] | None = None
    frame_domains: Sequence[str] | None = None
    base_uri_domains: Sequence[str] | None = None

    def to_meta(self) -> dict[str, list[str]]:
        """The policy as ``_meta.ui.csp``: camelCase keys, only the fields given."""
        return {key: list(getattr(self, attr)) for key, attr in CSP_FIELDS.items() if getattr(self, attr) is not None}


def check_uri(uri: Any, where: str) -> str:
    """``uri`` when it is a ``ui://`` URI (apps.mdx: a UI resource's URI MUST use it).

    Args:
        uri: the URI declared.
        where: the declaration, for the message (``"tool 'get_weather'"``).
    Returns:
        ``uri``.
    Raises:
        ValueError: not a string starting with ``ui://`` (the message names the fix).
    """
    if not isinstance(uri, str) or not uri.startswith(SCHEME) or len(uri) == len(SCHEME):
        raise ValueError(
            f"{where}: MCP Apps URIs must use the ui:// scheme, got {uri!r}; name the app's HTML "
            f"as 'ui://<server>/<page>.html' (apps.mdx, 'UI Resource Format')"
        )
    return uri


def tool_ui(resource_uri: str, visibility: Sequence[str] | None, where: str) -> dict[str, Any]:
    """A tool's ``_meta.ui`` (apps.mdx "Resource Discovery", ``McpUiToolMeta``).

    Args:
        resource_uri: the ``ui://`` resource that shows the tool's results.
        visibility: who may call it, a non-empty list of ``"model"`` and ``"app"``; None leaves
            it out (both, as the specification says).
        where: the declaration, for messages.
    Returns:
        ``{"resourceUri": ..., "visibility"?: [...]}``.
    Raises:
        ValueError: a URI that is not ``ui://``, or a visibility that is not such a list.
    """
    ui: dict[str, Any] = {"resourceUri": check_uri(resource_uri, where)}
    if visibility is not None:
        if (
            isinstance(visibility, str)
            or not isinstance(visibility, Sequence)
            or not visibility
            or any(v not in VISIBILITIES for v in visibility)
            or len(set(visibility)) != len(visibility)
        ):
            repeated = (
                " (each at most once)"
                if isinstance(visibility, Sequence) and len(set(visibility)) != len(visibility)
                else ""
            )
            raise ValueError(
                f"{where}: visibility must be a list of 'model' and 'app'{repeated} (['app'] for a tool only the "
                f"app calls, ['model'] for one only the model calls), got {visibility!r}"
            )
        ui["visibility"] = list(visibility)
    return ui


def resource_ui(
    csp: AppCsp | Mapping[str, Any] | None,
    permissions: Sequence[str] | Mapping[str, Any] | None,
    domain: str | None,
    prefers_border: bool | None,
    where: str,
) -> dict[str, Any]:
    """A ``ui://`` resource's ``_meta.ui`` (apps.mdx ``UIResourceMeta``), with only what was given.

    Args:
        csp: an :class:`AppCsp`, or a dict with the specification's keys (``connectDomains``,
            ``resourceDomains``, ``frameDomains``, ``baseUriDomains``; lists of origins).
        permissions: the names of :data:`PERMISSIONS` the app asks for, as a list
            (``["clipboardWrite"]``) or as the specification's object (``{"clipboardWrite": {}}``).
        domain: a dedicated sandbox origin, in the host's format.
        prefers_border: whether the host should draw a border and background.
        where: the declaration, for messages.
    Returns:
        ``{"csp"?, "permissions"?, "domain"?, "prefersBorder"?}`` (``{}`` when nothing was given).
    Raises:
        ValueError: an unknown key or permission, a domain list that is not strings, a
            ``domain`` that is not a non-empty string, or a ``prefers_border`` that is not a bool.
    """
    ui: dict[str, Any] = {}
    if csp is not None:
        ui["csp"] = _csp(csp, where)
    if permissions is not None:
        ui["permissions"] = _permissions(permissions, where)
    if domain is not None:
        if not isinstance(domain, str) or not domain:
            raise ValueError(f"{where}: domain must be a non-empty string in the host's format, got {domain!r}")
        ui["domain"] = domain
    if prefers_border is not None:
        if not isinstance(prefers_border, bool):
            raise ValueError(f"{where}: prefers_border must be True or False, got {prefers_border!r}")
        ui["prefersBorder"] = prefers_border
    return ui


def client_supports_apps(capabilities: Mapping[str, Any]) -> bool:
    """Whether a client renders apps: it declared ``extensions["io.modelcontextprotocol/ui"]``
    with :data:`MIME_TYPE` among its ``mimeTypes`` (apps.mdx "Client (Host) Capabilities").

    Args:
        capabilities: the ``ClientCapabilities`` the client declared.
    """
    extensions = capabilities.get("extensions")
    settings = extensions.get(EXTENSION) if isinstance(extensions, dict) else None
    mime_types = settings.get("mimeTypes") if isinstance(settings, dict) else None
    return isinstance(mime_types, list) and MIME_TYPE in mime_types


def _csp(csp: AppCsp | Mapping[str, Any], where: str) -> dict[str, list[str]]:
    if isinstance(csp, AppCsp):
        policy: dict[str, Any] = {
            key: getattr(csp, attr) for key, attr in CSP_FIELDS.items() if getattr(csp, attr) is not None
        }
    elif isinstance(csp, Mapping):
        unknown = [key for key in csp if key not in CSP_FIELDS]
        if unknown:
            raise ValueError(
                f"{where}: csp key {unknown[0]!r} is not one of {', '.join(CSP_FIELDS)} "
                f"(or give zemcp.AppCsp(connect_domains=..., ...))"
            )
        policy = dict(csp)
    else:
        raise ValueError(f"{where}: csp must be a zemcp.AppCsp or a dict, got {type(csp).__name__}")
    for key, domains in policy.items():
        if (
            isinstance(domains, str)
            or not isinstance(domains, Sequence)
            or not all(isinstance(d, str) for d in domains)
        ):
            raise ValueError(
                f"{where}: csp {key} must be a list of origins such as ['https://cdn.example.com'], got {domains!r}"
            )
        for domain in domains:
            if not _ORIGIN.fullmatch(domain):
                raise ValueError(
                    f"{where}: csp {key} entry {domain!r} is not an origin: give scheme (https, http, wss, ws), host "
                    "and optional port, such as 'https://api.example.com' or 'https://*.example.com' for its "
                    "subdomains"
                )
    return {key: list(domains) for key, domains in policy.items()}


def _permissions(permissions: Sequence[str] | Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
    if isinstance(permissions, str) or not isinstance(permissions, (Sequence, Mapping)):
        raise ValueError(
            f"{where}: permissions must be a list of names such as ['clipboardWrite'], got {permissions!r}"
        )
    names = list(permissions)
    for name in names:
        if name not in PERMISSIONS:
            raise ValueError(f"{where}: permission {name!r} is not one of {', '.join(PERMISSIONS)}")
    if isinstance(permissions, Mapping):
        for name in names:
            if not isinstance(permissions[name], Mapping):
                raise ValueError(
                    f"{where}: permission {name!r} must map to an object ({{}} as the specification writes it), "
                    f"got {permissions[name]!r}; or give the names as a list, ['{name}']"
                )
        return {name: dict(permissions[name]) for name in names}
    return {name: {} for name in names}
