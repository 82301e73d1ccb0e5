"""zemcp inside a Django site: the MCP endpoint as an ordinary view of the site's URLconf.

``path("mcp", zemcp.django.view(server))`` serves a :class:`zemcp.Server` (or an
:class:`zemcp.McpApp`) at that path of the site, through the site's whole middleware stack:
sessions, authentication, security headers and the site's own middleware run on every MCP
request, and a JSON answer, or the event stream a handler upgrades it to, goes back through
them as a Django response (a ``StreamingHttpResponse`` for a stream, never buffered by zemcp).
The view is exempt from CSRF (an MCP client has no CSRF token; the Origin check of
:mod:`zemcp.http` guards against pages), from ``LoginRequiredMiddleware`` (an MCP client
gets zemcp's 401 with ``WWW-Authenticate`` when authorization is on, never a redirect to a
login page) and from ``ATOMIC_REQUESTS`` (no transaction is held open while a handler waits
for the user's answer). The site routes the request and ``ALLOWED_HOSTS`` judges its host;
``request.user``, when authenticated, is whom ``permission=`` rules are asked about.

Needs Django (``pip install 'zemcp[django]'``); imported only by a site that uses it.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

try:
    from django.db import transaction
    from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
    from django.http.response import HttpResponseBase
    from django.views.decorators.csrf import csrf_exempt
except ImportError as exc:  # said plainly: the site's own install lacks the extra
    raise ImportError(
        f"zemcp.django needs Django ({exc}): pip install 'zemcp[django]' (or '.[django]' in a zemcp checkout)"
    ) from exc

from zemcp.core.server import Server
from zemcp.django.connections import recycle_connections
from zemcp.http.transport import McpApp

if TYPE_CHECKING:
    from types import TracebackType

#: Response headers of zemcp's answer that Django sets itself (or that belong to the connection).
_DJANGO_OWN = frozenset({"content-length", "connection", "transfer-encoding"})


def view(target: Server | McpApp) -> Callable[[HttpRequest], HttpResponseBase]:
    """The Django view that serves ``target`` at the path the URLconf gives it.

    Args:
        target: the server, or an :class:`zemcp.McpApp` of it (its settings and
            authorization apply; its endpoint path is the URLconf's, not ``endpoint``).
    Returns:
        the view: CSRF-exempt, login-not-required, not wrapped in ``ATOMIC_REQUESTS``.
    """
    app = target if isinstance(target, McpApp) else McpApp(target)
    recycle_connections(app.server)

    def mcp(request: HttpRequest) -> HttpResponseBase:
        environ = dict(request.META)
        # The answer goes back through Django's response and middleware: a handler never
        # writes to the client's socket itself here (zemcp's pool runs it).
        environ.pop("gunicorn.socket", None)
        # A CSRF-exempt view's body is unread: the request reads it as the WSGI input would.
        environ["wsgi.input"] = request if not request._read_started else io.BytesIO(request.body)  # type: ignore[attr-defined]
        started: dict[str, Any] = {}

        def start_response(
            status: str,
            headers: list[tuple[str, str]],
            exc_info: tuple[type[BaseException], BaseException, TracebackType] | tuple[None, None, None] | None = None,
            /,
        ) -> Callable[[bytes], object]:
            started["status"], started["headers"] = int(status.split(" ", 1)[0]), headers
            return _no_write

        user = getattr(request, "user", None)
        body = app.serve(
            environ, start_response, routed=True, user=user if _authenticated(user) else None, request=request
        )
        return _django_response(body, started["status"], started["headers"])

    mcp.__doc__ = "The MCP endpoint (Streamable HTTP) of the site, served by zemcp."
    return _exempt(mcp)


def _django_response(body: Iterable[bytes], status: int, headers: list[tuple[str, str]]) -> HttpResponseBase:
    """zemcp's WSGI answer as a Django response: streamed for an event stream, whole otherwise."""
    content_type = next((value for name, value in headers if name.lower() == "content-type"), None)
    response: HttpResponseBase
    if content_type == "text/event-stream":
        response = StreamingHttpResponse(body, status=status, content_type=content_type)
    else:
        try:
            content = b"".join(body)
        finally:
            close = getattr(body, "close", None)
            if callable(close):
                close()
        response = HttpResponse(content, status=status, content_type=content_type)
    for name, value in headers:
        if name.lower() not in _DJANGO_OWN and name.lower() != "content-type":
            response[name] = value
    return response


def _authenticated(user: Any) -> bool:
    return user is not None and bool(getattr(user, "is_authenticated", False))


def _no_write(data: bytes) -> None:
    raise RuntimeError("zemcp answers through Django's response; nothing is written directly")


def _exempt(view: Callable[[HttpRequest], HttpResponseBase]) -> Callable[[HttpRequest], HttpResponseBase]:
    """``view`` exempt from CSRF, ``LoginRequiredMiddleware`` (Django 5.1+) and ``ATOMIC_REQUESTS``."""
    view = transaction.non_atomic_requests(csrf_exempt(view))
    try:
        from django.contrib.auth.decorators import login_not_required
    except ImportError:  # Django before 5.1 has no LoginRequiredMiddleware to be exempt from
        return view
    exempted: Callable[[HttpRequest], HttpResponseBase] = login_not_required(view)
    return exempted


__all__ = ["view"]
