"""The MCP endpoint as an ordinary view of a Django site: :func:`view`.

``path("mcp", zemcp.django.view())`` serves the site's server (:mod:`zemcp.django.site`) at
that path of the site, through the site's whole middleware stack: sessions, authentication,
security headers and the site's own middleware run on every MCP request, and a JSON answer,
or the event stream a handler upgrades it to, goes back through them as a Django response (a
``StreamingHttpResponse`` for a stream, never buffered by zemcp). The view is exempt from CSRF
(an MCP client has no CSRF token; the Origin check of :mod:`zemcp.http` guards against
pages), from ``LoginRequiredMiddleware`` (an MCP client gets a 401 with ``WWW-Authenticate``,
never a redirect to a login page) and from ``ATOMIC_REQUESTS`` (no transaction is held open
while a handler waits for the user's answer). The site routes the request and
``ALLOWED_HOSTS`` judges its host. The site's user (its session, or a bearer token the site's
authentication reads: :mod:`zemcp.django.authentication`) is whom the request acts for.
"""

from __future__ import annotations

import dataclasses
import io
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.apps import apps
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from zemcp.core.server import Server
from zemcp.django import site
from zemcp.django.authentication import Authenticator, Refused, SiteAuthentication
from zemcp.django.connections import recycle_connections
from zemcp.http.transport import McpApp, RoutedAnswer

if TYPE_CHECKING:
    pass

log = logging.getLogger("zemcp.django")

#: Django's middleware that sends anonymous visitors to the login page (Django 5.1+).
LOGIN_REQUIRED = "django.contrib.auth.middleware.LoginRequiredMiddleware"

#: Response headers of zemcp's answer that Django sets itself (or that belong to the connection).
_DJANGO_OWN = frozenset({"content-length", "connection", "transfer-encoding"})


def view(
    target: Server | McpApp | None = None,
    *,
    authentication: Iterable[Authenticator] = (),
    login_required: bool | None = None,
) -> Callable[[HttpRequest], HttpResponseBase]:
    """The Django view that serves ``target`` at the path the URLconf gives it.

    Args:
        target: the server, or an :class:`zemcp.McpApp` of it (its settings and
            authorization apply; its endpoint path is the URLconf's, not ``endpoint``);
            None: the site's server, ``zemcp.django.server``.
        authentication: how the site reads an MCP client's token, in order: Django REST
            framework authentication classes or instances (``TokenAuthentication``,
            django-oauth-toolkit's ``OAuth2Authentication``) and callables
            ``(HttpRequest) -> user or None`` (:mod:`zemcp.django.authentication`); asked
            when the site's middleware established no user.
        login_required: answer a request without a user 401 with the authentication's
            ``WWW-Authenticate`` challenges (``Bearer`` without ``authentication``). Default:
            True when ``authentication`` is given or the site has ``LoginRequiredMiddleware``
            (the view is exempt from its redirect, not from the need of a user).
    Returns:
        the view: CSRF-exempt, login-not-required, not wrapped in ``ATOMIC_REQUESTS``.
    Raises:
        ImproperlyConfigured: ``target``'s settings are not those ``settings.ZEMCP`` gives
            (the message says how to build the server from them), or the site's server is
            served without ``"zemcp.django"`` in ``INSTALLED_APPS``.
        TypeError: ``target`` is a request (``view`` routed without calling it), or an
            ``authentication`` entry is neither a DRF authentication nor a callable.
    """
    if isinstance(target, HttpRequest):
        raise TypeError(
            "zemcp.django.view makes the view: route zemcp.django.view() (or view(server)), not zemcp.django.view"
        )
    if target is None and not apps.is_installed("zemcp.django"):
        raise ImproperlyConfigured(
            "zemcp.django.view() serves the site's server, whose tools the installed apps' mcp.py register: add "
            '"zemcp.django" to INSTALLED_APPS so that they are imported'
        )
    server = site.server() if target is None else target.server if isinstance(target, McpApp) else target
    _check_settings(server)
    recycle_connections(server)
    site_authentication = SiteAuthentication(authentication)
    required = (
        bool(site_authentication) or LOGIN_REQUIRED in django_settings.MIDDLEWARE
        if login_required is None
        else login_required
    )
    app = target if isinstance(target, McpApp) else McpApp(server, guarded=required)

    def mcp(request: HttpRequest) -> HttpResponseBase:
        if server.auth is not None:
            _check_resource(server, request.path)
        user = getattr(request, "user", None)
        unauthorized = None
        if not _authenticated(user):
            try:
                user = site_authentication.user(request) if site_authentication else None
            except Refused as exc:
                user, unauthorized = (
                    None,
                    (", ".join(site_authentication.challenges(request)), f"Unauthorized: {exc.message}"),
                )
            if user is None and required and unauthorized is None:
                unauthorized = (
                    ", ".join(site_authentication.challenges(request) or ["Bearer"]),
                    "Unauthorized: this MCP endpoint needs a user; send the token the site issued you "
                    "(Authorization header)",
                )
        environ = request.META
        if request._read_started:  # type: ignore[attr-defined]
            # The site's authentication read the body: zemcp reads the copy Django kept.
            environ = {**environ, "wsgi.input": io.BytesIO(request.body)}
        else:
            # A CSRF-exempt view's body is unread: zemcp reads it from the request, as WSGI input.
            environ = {**environ, "wsgi.input": request}
        answer = app.answer(environ, user=user, request=request, unauthorized=unauthorized)
        return _django_response(answer)

    mcp.__doc__ = "The MCP endpoint (Streamable HTTP) of the site, served by zemcp."
    return _exempt(mcp)


def metadata_view(target: Server | McpApp | None = None) -> Callable[[HttpRequest], HttpResponseBase]:
    """The view of the Protected Resource Metadata (RFC 9728) of zemcp's own authorization
    (``ZEMCP_AUTH``), for the site to route where RFC 9728 puts it: ``/.well-known/
    oauth-protected-resource`` followed by the resource URL's path, at the host's root
    (``path(".well-known/oauth-protected-resource/mcp", zemcp.django.metadata_view())`` for a
    site at the root; under a path prefix the proxy routes it, docs/django.md).

    Args:
        target: as for :func:`view`.
    Returns:
        the view (GET, HEAD and the CORS preflight; CSRF-exempt, login-not-required).
    Raises:
        ImproperlyConfigured: the server has no authorization of its own (its users come
            from the site's authentication: there is no metadata to serve), or its settings
            are not the site's.
    """
    server = site.server() if target is None else target.server if isinstance(target, McpApp) else target
    _check_settings(server)
    if server.auth is None:
        raise ImproperlyConfigured(
            f"the server {server.name!r} has no OAuth authorization of its own (ZEMCP_AUTH is off), so there is "
            "no protected resource metadata to serve: remove the route, or set AUTH in settings.ZEMCP"
        )
    app = target if isinstance(target, McpApp) else McpApp(server)

    def metadata(request: HttpRequest) -> HttpResponseBase:
        answer = app.answer(request.META, metadata=True, request=request)
        return _django_response(answer)

    metadata.__doc__ = "The Protected Resource Metadata (RFC 9728) of the site's MCP endpoint, served by zemcp."
    return _exempt(metadata)


#: The endpoint paths already found to differ from the resource URL's (each is logged once).
_mismatched: set[str] = set()


def _check_resource(server: Server, path: str) -> None:
    """Log once when the endpoint's path, the site's path prefix included (``SCRIPT_NAME``,
    ``FORCE_SCRIPT_NAME``), is not the resource URL's: clients would be sent to metadata and
    tokens of another resource."""
    assert server.auth is not None
    resource = urlsplit(server.auth.resource).path.rstrip("/") or "/"
    if path.rstrip("/") == resource.rstrip("/") or path in _mismatched:
        return
    _mismatched.add(path)
    log.warning(
        "the MCP endpoint is served at %s but the resource URL (ZEMCP_AUTH_RESOURCE) is %s, whose path is %s: "
        "clients are sent to that resource's metadata and bring tokens for it; set the resource URL to this "
        "endpoint's URL, the site's path prefix included",
        path,
        server.auth.resource,
        resource,
    )


def _check_settings(server: Server) -> None:
    """Refuse a server whose settings are not those of ``settings.ZEMCP`` (and the environment)."""
    wanted = site.settings()
    # instance is random for every Settings built: it is not the site's to choose.
    if dataclasses.replace(wanted, instance=server.settings.instance) != server.settings:
        differ = [
            field.name.upper()
            for field in dataclasses.fields(wanted)
            if field.name != "instance" and getattr(wanted, field.name) != getattr(server.settings, field.name)
        ]
        raise ImproperlyConfigured(
            f"the server {server.name!r} was built with other settings than settings.ZEMCP and the ZEMCP_* "
            f"variables give ({', '.join(differ)} differ): build it with "
            "zemcp.Server(..., settings=zemcp.django.settings()), or leave view() its target to serve "
            "zemcp.django.server"
        )


def _django_response(answer: RoutedAnswer) -> HttpResponseBase:
    """zemcp's answer as a Django response: streamed for an event stream, whole otherwise."""
    response: HttpResponseBase
    if answer.streams:
        response = StreamingHttpResponse(answer.body, status=answer.status, content_type=answer.content_type)
    else:
        response = HttpResponse(answer.content(), status=answer.status, content_type=answer.content_type)
    for name, value in answer.headers:
        if name.lower() not in _DJANGO_OWN and name.lower() != "content-type":
            response[name] = value
    return response


def _authenticated(user: Any) -> bool:
    return user is not None and bool(getattr(user, "is_authenticated", False))


def _exempt(view: Callable[[HttpRequest], HttpResponseBase]) -> Callable[[HttpRequest], HttpResponseBase]:
    """``view`` exempt from CSRF, ``LoginRequiredMiddleware`` (Django 5.1+) and ``ATOMIC_REQUESTS``."""
    view = transaction.non_atomic_requests(csrf_exempt(view))
    try:
        from django.contrib.auth.decorators import login_not_required
    except ImportError:  # Django before 5.1 has no LoginRequiredMiddleware to be exempt from
        return view
    exempted: Callable[[HttpRequest], HttpResponseBase] = login_not_required(view)
    return exempted


__all__ = ["metadata_view", "view"]
