"""Resources (MCP server/resources): static resources, URI templates, reads and subscriptions.

A static resource has a fixed URI and a handler called without arguments. A resource
template has an RFC 6570 level-1 URI template such as ``file:///notes/{name}``; a URI that
matches it is read by calling the handler with the template's variables as keyword
arguments (strings, percent-decoded). A handler returns ``str`` (text contents), ``bytes``
(blob contents, sent base64-encoded) or a list of those and of content dicts. Pure Python:
no HTTP here.
"""

from __future__ import annotations

import base64
import inspect
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import unquote

from zemcp import logsafe
from zemcp.auth.access import Permits
from zemcp.core import callables, coroutines, schemas
from zemcp.core.docstrings import docstring_summary
from zemcp.core.errors import HANDLER_ERRORS, ClientRequestError
from zemcp.protocol import pagination
from zemcp.protocol.caching import NO_CACHE, CacheHint, combine
from zemcp.protocol.elicitation import ElicitAborted, ElicitError
from zemcp.protocol.icons import checked_icons
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from zemcp.protocol.metadata import checked_meta

log = logging.getLogger("zemcp.resources")

#: JSON-RPC error code of an unknown resource URI (MCP server/resources, "Error Handling").
RESOURCE_NOT_FOUND = -32002

#: Subscriptions one session may hold at once; templates match unboundedly many URIs.
MAX_SUBSCRIPTIONS_PER_SESSION = 1024

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_EXPRESSION = re.compile(r"\{([^{}]*)\}")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A level-1 expansion percent-encodes every reserved character, so one value never spans
# a '/', '?' or '#'.
_VALUE = "[^/?#]+"


class ResourceNotFound(ProtocolError):
    """No resource has this URI: JSON-RPC error -32002 with ``data: {"uri": uri}``.

    The server raises it for an unknown URI; a template handler may raise it too, for a URI
    that matches the template but names nothing (an id that does not exist).

    Attributes:
        uri: the URI asked for.
        data: ``{"uri": uri}``, the error's ``data`` member.
    """

    def __init__(self, uri: str):
        super().__init__(
            RESOURCE_NOT_FOUND,
            f"Resource not found: {uri}; resources/list and resources/templates/list show what this server has",
            data={"uri": uri},
        )
        self.uri = uri


class UriTemplate:
    """An RFC 6570 level-1 URI template: literal text and ``{name}`` expressions.

    Args:
        template: for example ``test://template/{id}/data``.
    Attributes:
        template: the template text.
        variables: the expression names, in order.
    Raises:
        ValueError: no expression, an expression other than ``{name}`` (operators such as
            ``{+x}``, ``{?x}`` and modifiers such as ``{x*}`` are levels 2-4), a repeated
            name, two expressions without literal text between them, or a stray brace.
    """

    def __init__(self, template: str):
        self.template = template
        self.variables: list[str] = []
        pattern, pos = "", 0
        for match in _EXPRESSION.finditer(template):
            name = match.group(1)
            literal = template[pos : match.start()]
            self._check_literal(literal)
            if not _VARIABLE.match(name):
                raise ValueError(
                    f"URI template {template!r}: {{{name}}} is not supported; only RFC 6570 level-1 "
                    f"expressions {{name}} are, with name a Python identifier"
                )
            if name in self.variables:
                raise ValueError(f"URI template {template!r}: variable {name!r} appears twice")
            if pos and not literal:
                raise ValueError(
                    f"URI template {template!r}: {{{name}}} follows another expression directly; "
                    f"separate them with literal text so a URI splits one way only"
                )
            self.variables.append(name)
            pattern += re.escape(literal) + f"(?P<{name}>{_VALUE})"
            pos = match.end()
        self._check_literal(template[pos:])
        if not self.variables:
            raise ValueError(f"URI template {template!r} has no {{name}} expression; register it as a static resource")
        self._regex = re.compile(pattern + re.escape(template[pos:]))

    def _check_literal(self, literal: str) -> None:
        if "{" in literal or "}" in literal:
            raise ValueError(f"URI template {self.template!r} has an unbalanced brace")

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` (percent-decoded) when it matches the template, else None."""
        found = self._regex.fullmatch(uri)
        if found is None:
            return None
        values = {name: unquote(value) for name, value in found.groupdict().items()}
        # Decoding must not smuggle in what the raw match excluded (%2F as a path step, ...).
        if any(char in value for value in values.values() for char in "/?#\0"):
            return None
        return values


@dataclass
class Resource:
    """A static resource (MCP ``Resource``).

    Attributes:
        uri: its URI, with a scheme (``test://static-text``).
        name: a programmatic name.
        handler: called without arguments on ``resources/read`` (but the Context, when it
            has a parameter annotated ``Context`` or named ``ctx``).
        title: optional display name.
        description: optional description.
        mime_type: MIME type of its contents, or None to leave it out.
        size: optional size [bytes] of the raw contents.
        cache: the caching hint of its ``resources/read``, and its part of ``resources/list``'s.
        is_async: whether ``handler`` is ``async def`` (run in a loop of its own per read).
        icons: its ``icons`` (:func:`zemcp.protocol.icons.checked_icons`: checked at creation).
        meta: its ``_meta`` (:func:`zemcp.protocol.metadata.checked_meta`: checked at creation).
    Raises:
        ValueError: a URI without scheme, an empty name, a negative size, bad ``icons`` or
            ``meta``, or a handler that cannot be called without arguments.
        TypeError: a handler that is an async generator function.
    """

    uri: str
    name: str
    handler: Callable[[], Any]
    title: str | None = None
    description: str | None = None
    mime_type: str | None = "text/plain"
    size: int | None = None
    cache: CacheHint = NO_CACHE
    icons: Any = ()
    meta: Any = None
    context_param: str | None = field(init=False, default=None)
    is_async: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        _check_uri(self.uri)
        _check_name(self.name, self.uri)
        self.icons, self.meta = _decoration(self.icons, self.meta, f"resource {self.uri!r}")
        if self.size is not None and (not isinstance(self.size, int) or self.size < 0):
            raise ValueError(f"resource {self.uri!r}: size must be a non-negative number of bytes, got {self.size!r}")
        self.context_param = _check_callable(self.handler, {}, self.uri)
        self.is_async = coroutines.handler_is_async(self.handler, f"resource {self.uri!r}")

    def definition(self) -> dict[str, Any]:
        """The resource as ``resources/list`` shows it."""
        entry: dict[str, Any] = {"uri": self.uri, "name": self.name}
        _optional(entry, title=self.title, description=self.description, mimeType=self.mime_type, size=self.size)
        _optional(entry, icons=self.icons or None, _meta=self.meta or None)
        return entry


@dataclass
class ResourceTemplate:
    """A resource template (MCP ``ResourceTemplate``).

    Attributes:
        uri_template: an RFC 6570 level-1 template, with a scheme.
        name: a programmatic name.
        handler: called with the template's variables as keyword arguments (and the
            Context, when it takes one).
        title: optional display name.
        description: optional description.
        mime_type: MIME type of every matching resource, or None to leave it out.
        cache: the caching hint of reading a matching resource, and its part of
            ``resources/templates/list``'s.
        template: the parsed template.
        is_async: whether ``handler`` is ``async def`` (run in a loop of its own per read).
        icons, meta: as for :class:`Resource`.
    Raises:
        ValueError: a bad template (see :class:`UriTemplate`), an empty name, bad ``icons``
            or ``meta``, or a handler that cannot be called with exactly the template's variables.
        TypeError: a handler that is an async generator function.
    """

    uri_template: str
    name: str
    handler: Callable[..., Any]
    title: str | None = None
    description: str | None = None
    mime_type: str | None = "text/plain"
    cache: CacheHint = NO_CACHE
    icons: Any = ()
    meta: Any = None
    template: UriTemplate = field(init=False, repr=False)
    context_param: str | None = field(init=False, default=None)
    is_async: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        _check_uri(self.uri_template)
        _check_name(self.name, self.uri_template)
        self.icons, self.meta = _decoration(self.icons, self.meta, f"resource template {self.uri_template!r}")
        self.template = UriTemplate(self.uri_template)
        self.context_param = _check_callable(
            self.handler, dict.fromkeys(self.template.variables, ""), self.uri_template
        )
        self.is_async = coroutines.handler_is_async(self.handler, f"resource template {self.uri_template!r}")

    def definition(self) -> dict[str, Any]:
        """The template as ``resources/templates/list`` shows it."""
        entry: dict[str, Any] = {"uriTemplate": self.uri_template, "name": self.name}
        _optional(entry, title=self.title, description=self.description, mimeType=self.mime_type)
        _optional(entry, icons=self.icons or None, _meta=self.meta or None)
        return entry


class Subscriber(Protocol):
    """What keeps a session's resource subscriptions (:class:`zemcp.state.session.Session`)."""

    def subscribe(self, uri: str, limit: int) -> bool:
        """Record a subscription to ``uri``; False when ``limit`` others are held already."""

    def unsubscribe(self, uri: str) -> None:
        """Forget the subscription to ``uri``, if any."""


class ResourceRegistry:
    """The resources, templates and subscriptions of one server.

    Static resources are looked up first; then templates in registration order, the first
    match wins. ``len()`` counts resources plus templates. A session's subscriptions are
    kept by the session (:class:`Subscriber`), where every process serving it finds them.
    """

    def __init__(self) -> None:
        self._resources: dict[str, Resource] = {}
        self._templates: dict[str, ResourceTemplate] = {}
        # Built at registration, not on every list request: entries do not change.
        self._resource_definitions: list[dict[str, Any]] = []
        self._template_definitions: list[dict[str, Any]] = []

    def __len__(self) -> int:
        return len(self._resources) + len(self._templates)

    # -- registration ------------------------------------------------------------------

    def register(
        self,
        handler: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = "text/plain",
        size: int | None = None,
        cache: CacheHint = NO_CACHE,
        icons: Any = (),
        meta: Any = None,
    ) -> Resource | ResourceTemplate:
        """Register ``handler`` for ``uri``: a template when ``uri`` has ``{...}``, else static.

        Args:
            handler: the function reading the resource.
            uri: a URI, or an RFC 6570 level-1 URI template.
            name: defaults to the handler's name.
            title: optional display name.
            description: defaults to the first paragraph of the handler's docstring.
            mime_type: MIME type of the contents, or None to leave it out.
            size: [bytes] optional, static resources only.
            cache: the caching hint of its reads and its part of the list's (2026-07-28).
            icons, meta: its ``icons`` and ``_meta`` (see :class:`Resource`).
        Returns:
            the registered :class:`Resource` or :class:`ResourceTemplate`.
        Raises:
            ValueError: the URI or template is taken or malformed, ``size`` was given for a
                template, bad ``icons`` or ``meta``, or the handler's parameters do not fit.
        """
        name = callables.handler_name(handler, name, "resource")
        description = description if description is not None else docstring_summary(handler)
        if "{" in uri or "}" in uri:
            if size is not None:
                raise ValueError(f"resource template {uri!r}: size applies to static resources only")
            template = ResourceTemplate(uri, name, handler, title, description, mime_type, cache, icons, meta)
            if uri in self._templates:
                raise ValueError(f"a resource template {uri!r} is already registered")
            self._templates[uri] = template
            self._template_definitions.append(template.definition())
            return template
        resource = Resource(uri, name, handler, title, description, mime_type, size, cache, icons, meta)
        if uri in self._resources:
            raise ValueError(f"a resource {uri!r} is already registered")
        self._resources[uri] = resource
        self._resource_definitions.append(resource.definition())
        return resource

    def cache_hints(self) -> tuple[CacheHint, CacheHint]:
        """The caching hints of ``resources/list`` and ``resources/templates/list``."""
        return (combine(r.cache for r in self._resources.values()), combine(t.cache for t in self._templates.values()))

    def get(self, uri: str) -> Resource | None:
        """The static resource with this URI, or None."""
        return self._resources.get(uri)

    def template(self, uri_template: str) -> ResourceTemplate | None:
        """The template registered with exactly this template text, or None."""
        return self._templates.get(uri_template)

    # -- requests ----------------------------------------------------------------------

    def list_result(self, params: dict[str, Any], page_size: int) -> dict[str, Any]:
        """``resources/list``: ``{"resources": [...], "nextCursor"?}``.

        Raises:
            ProtocolError: -32602 for a bad cursor.
        """
        items = self._resource_definitions
        return pagination.list_result(params, "resources", items, page_size)

    def templates_result(self, params: dict[str, Any], page_size: int) -> dict[str, Any]:
        """``resources/templates/list``: ``{"resourceTemplates": [...], "nextCursor"?}``.

        Raises:
            ProtocolError: -32602 for a bad cursor.
        """
        items = self._template_definitions
        return pagination.list_result(params, "resourceTemplates", items, page_size)

    def find(
        self, params: dict[str, Any], permits: Permits | None = None
    ) -> tuple[Resource | ResourceTemplate, str, dict[str, str]]:
        """What ``resources/read {uri}`` reads: the resource or template, the URI and the
        template's variables.

        Args:
            params: the request's params (``uri``).
            permits: ``permits(kind, key)``, whether the request may see the resource or
                template (:meth:`zemcp.auth.access.Access.permits`); one it may not is not found.
        Raises:
            ProtocolError: -32602 when ``params.uri`` is not a string;
                :class:`ResourceNotFound` for an unknown URI.
        """
        uri = _uri_param(params, "resources/read")
        target, variables = self._find(uri)
        registered = target.uri if isinstance(target, Resource) else target.uri_template
        if permits is not None and not permits("resource", registered):
            raise ResourceNotFound(uri)
        return target, uri, variables

    def read(self, params: dict[str, Any], ctx: Any = None) -> dict[str, Any]:
        """``resources/read {uri}``: ``{"contents": [{"uri", "mimeType"?, "text" | "blob"}, ...]}``.

        Args:
            params: the request's params.
            ctx: the request's Context, passed when the handler takes one.
        Raises:
            ProtocolError: -32602 when ``params.uri`` is not a string;
                :class:`ResourceNotFound` for an unknown URI; -32603 when the handler
                raised, an elicitation it made did not end in an answer, or it returned
                something that is not contents (logged).
            zemcp.ElicitAborted: the request can no longer be answered.
        """
        target, uri, variables = self.find(params)
        kwargs: dict[str, Any] = dict(variables)
        if target.context_param is not None:
            kwargs[target.context_param] = ctx
        try:
            value = coroutines.call(target.handler, target.is_async, f"resource {uri}", ctx, **kwargs)
            return {"contents": to_contents(value, uri, target.mime_type)}
        except (ProtocolError, ElicitAborted):
            raise
        except (ElicitError, ClientRequestError) as exc:
            log.info(
                "reading resource %s ended by an outcome of asking the client: %s",
                logsafe.clip(uri),
                logsafe.outcome(exc),
            )
            raise ProtocolError(INTERNAL_ERROR, f"reading resource {uri} failed: {exc}") from None
        except HANDLER_ERRORS as exc:
            log.exception("reading resource %s failed", logsafe.clip(uri))
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: reading resource {uri} failed ({type(exc).__name__}); the server log has the details",
            ) from None

    def subscribe(self, session: Subscriber, params: dict[str, Any]) -> dict[str, Any]:
        """``resources/subscribe {uri}`` for a session: ``{}`` (the session records it).

        Raises:
            ProtocolError: -32602 when ``params.uri`` is not a string or the session holds
                :data:`MAX_SUBSCRIPTIONS_PER_SESSION` subscriptions; -32002 for an unknown URI.
        """
        uri = _uri_param(params, "resources/subscribe")
        self._find(uri)
        if not session.subscribe(uri, MAX_SUBSCRIPTIONS_PER_SESSION):
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: this session already holds {MAX_SUBSCRIPTIONS_PER_SESSION} resource "
                f"subscriptions; unsubscribe from some before subscribing to {uri}",
            )
        return {}

    def unsubscribe(self, session: Subscriber, params: dict[str, Any]) -> dict[str, Any]:
        """``resources/unsubscribe {uri}`` for a session: ``{}``, also when it was not subscribed.

        Raises:
            ProtocolError: -32602 when ``params.uri`` is not a string.
        """
        session.unsubscribe(_uri_param(params, "resources/unsubscribe"))
        return {}

    def _find(self, uri: str) -> tuple[Resource | ResourceTemplate, dict[str, str]]:
        resource = self._resources.get(uri)
        if resource is not None:
            return resource, {}
        for template in self._templates.values():
            variables = template.template.match(uri)
            if variables is not None:
                return template, variables
        raise ResourceNotFound(uri)


def to_contents(value: Any, uri: str, mime_type: str | None) -> list[dict[str, Any]]:
    """Shape a read handler's return value as ``ReadResourceResult.contents``.

    Args:
        value: ``str`` (one text item), ``bytes`` (one blob item, base64-encoded), a content
            dict with ``text`` (a string) or ``blob`` (base64 text) and optionally ``_meta``
            (checked by :func:`zemcp.protocol.metadata.checked_meta`), or a list of these.
        uri: filled in as ``uri`` where an item has none.
        mime_type: filled in as ``mimeType`` where an item has none (left out when None).
    Returns:
        the list of content dicts.
    Raises:
        TypeError: something else was returned.
        ValueError: an item's ``_meta`` breaks the key rules.
    """
    items = value if isinstance(value, list) else [value]
    contents = []
    for item in items:
        base: dict[str, Any] = {"uri": uri}
        if mime_type is not None:
            base["mimeType"] = mime_type
        if isinstance(item, str):
            contents.append({**base, "text": item})
        elif isinstance(item, (bytes, bytearray)):
            contents.append({**base, "blob": base64.b64encode(item).decode("ascii")})
        elif isinstance(item, dict) and (isinstance(item.get("text"), str) or isinstance(item.get("blob"), str)):
            if "_meta" in item:
                checked_meta(item["_meta"], f"a content item of resource {uri}")
            contents.append({**base, **item})
        else:
            raise TypeError(
                f"a resource handler must return str, bytes, a dict with 'text' or 'blob' (a string), "
                f"or a list of these; got {type(item).__name__}"
            )
    return contents


def _uri_param(params: dict[str, Any], method: str) -> str:
    uri = params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise ProtocolError(INVALID_PARAMS, f"Invalid params: {method} needs params.uri (a non-empty string)")
    return uri


def _check_uri(uri: str) -> None:
    if not isinstance(uri, str) or not _SCHEME.match(uri):
        raise ValueError(f"resource URI {uri!r} must start with a scheme, such as 'file:///...' or 'myapp://...'")


def _check_name(name: str, uri: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"resource {uri!r}: name must be a non-empty string")


def _check_callable(handler: Callable[..., Any], kwargs: dict[str, str], uri: str) -> str | None:
    # Returns the name of the parameter that takes the Context, if any.
    try:
        context = schemas.context_parameter(handler)
    except TypeError:
        context = None
    try:
        inspect.signature(handler).bind(**kwargs, **({context: None} if context else {}))
    except TypeError:
        label = getattr(handler, "__name__", repr(handler))
        if not kwargs:
            raise ValueError(f"resource {uri!r}: the handler {label!r} must be callable without arguments") from None
        raise ValueError(
            f"resource template {uri!r}: the handler {label!r} must take the template's variables "
            f"{', '.join(kwargs)} as keyword arguments and need no others"
        ) from None
    return context


def _decoration(icons: Any, meta: Any, where: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    # Checked once, at registration: the definition is built from the result.
    return checked_icons(icons, where), {} if meta is None else checked_meta(meta, where)


def _optional(entry: dict[str, Any], **members: Any) -> None:
    entry.update({key: value for key, value in members.items() if value is not None})
