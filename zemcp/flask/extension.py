"""The Flask extension: ``Zemcp(app, server)``, the MCP endpoint as a route of the app.

:class:`Zemcp` follows Flask's extension pattern (``init_app``, ``app.extensions["zemcp"]``):
at ``init_app`` it registers the endpoint as a route of the app for GET, POST, DELETE and
OPTIONS (zemcp answers OPTIONS and CORS itself, so Flask's automatic OPTIONS is off), and with
zemcp's own OAuth on the Protected Resource Metadata (RFC 9728) as another, exempts
it from Flask-WTF's ``CSRFProtect`` when the app has it, adds the ``flask zemcp`` commands,
and has the server's handlers run in the Flask context of the request they serve
(:mod:`zemcp.flask.handlercontext`). The view hands the request to
:meth:`zemcp.McpApp.serve` as routed by the app (the app routed it and judged its host),
with the app's user, and returns zemcp's answer as a Flask response: whole for JSON,
streamed as it goes for an event stream. zemcp's answers are its own responses, never
exceptions, so the app's error handlers never rewrite them.
"""

from __future__ import annotations

import io
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flask import Flask, Response, current_app, request

from zemcp.config import Settings
from zemcp.config.environment import read_mapping
from zemcp.core.server import Server
from zemcp.flask.handlercontext import HandlerContexts, capture
from zemcp.flask.state import State
from zemcp.http.transport import McpApp, RoutedAnswer

if TYPE_CHECKING:
    from flask.wrappers import Request

#: The key of the extension's state in ``app.extensions``, and the endpoint name of the route.
EXTENSION = "zemcp"
#: The endpoint name of the route of the Protected Resource Metadata (with ``ZEMCP_AUTH`` on).
METADATA = "zemcp_metadata"
#: Where the site configures zemcp, and how messages name it.
CONFIG_KEY = "ZEMCP"
CONFIG_SOURCE = 'app.config["ZEMCP"]'
#: The methods the endpoint answers (HEAD comes with GET); the rest get Flask's 405.
METHODS = ("GET", "POST", "DELETE", "OPTIONS")
#: Response headers of zemcp's answer that werkzeug sets itself (or that belong to the connection).
_WERKZEUG_OWN = frozenset({"content-length", "connection", "transfer-encoding", "content-type"})
#: The app that serves each server whose handlers run in a Flask context: one app per server.
_SERVED: weakref.WeakKeyDictionary[Server, str] = weakref.WeakKeyDictionary()


def settings(app: Flask) -> Settings:
    """zemcp's settings for ``app``: ``app.config["ZEMCP"]``, with the ``ZEMCP_*`` variables over it.

    Build the app's server with them: ``zemcp.Server("notes", settings=zemcp.flask.settings(app))``.

    Args:
        app: the Flask app; ``app.config["ZEMCP"]`` is a dict of the variables' names without
            ``ZEMCP_`` (``{"THREADS": 16}``), absent for none (docs/configuration.md).
    Returns:
        validated :class:`zemcp.Settings`.
    Raises:
        ValueError: a key names no setting, or a value does not parse (the message names the key).
    """
    return Settings.from_site(app.config.get(CONFIG_KEY) or {}, CONFIG_SOURCE)


class Zemcp:
    """The MCP endpoint of a Flask app (Flask's extension pattern).

    Args:
        app: the app, or None to call :meth:`init_app` later (an app factory).
        server: the :class:`zemcp.Server` to serve; None builds one for each app at
            :meth:`init_app`, named after the app (``app.name``), with :func:`settings` of it
            (reach it as ``app.extensions["zemcp"].server`` to register tools).
        rule: the URL rule of the endpoint.
        authenticate: ``authenticate(request) -> user or None``: whom a request acts for, for
            apps without Flask-Login (a bearer token the app issued, checked by the app). Without
            it, Flask-Login's ``current_user`` when the app has a ``LoginManager`` (its
            ``request_loader`` is how it takes ``Authorization: Bearer``), else no user.
        login_required: answer a request without a user 401 with ``WWW-Authenticate: Bearer``
            (never a redirect to a login page); CORS preflights pass.
        load_user: ``load_user(user_id) -> user or None`` for ``flask zemcp stdio --user`` and
            ``call --user``; Flask-Login's ``user_loader`` when omitted.
    """

    def __init__(
        self,
        app: Flask | None = None,
        server: Server | None = None,
        *,
        rule: str = "/mcp",
        authenticate: Callable[[Request], Any] | None = None,
        login_required: bool = False,
        load_user: Callable[[str], Any] | None = None,
    ):
        self.server = server
        self.rule = rule
        self.authenticate = authenticate
        self.login_required = login_required
        self.load_user = load_user
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Serve the endpoint as a route of ``app``; its state goes to ``app.extensions["zemcp"]``.

        Raises:
            RuntimeError: ``app`` already has zemcp's endpoint, or the server is already
                served by another app.
            ValueError: the server's settings differ from what ``app.config["ZEMCP"]`` says
                (the message says how to build it), or that configuration is invalid.
        """
        if EXTENSION in app.extensions:
            raise RuntimeError(f"the Flask app {app.name!r} already serves an MCP endpoint (app.extensions['zemcp'])")
        if self.server is None:
            server = Server(app.name, settings=settings(app))
        else:
            server = self.server
            _check_settings(app, server)
        served_by = _SERVED.get(server)
        if served_by is not None:
            raise RuntimeError(
                f"the MCP server {server.name!r} is already served by the Flask app {served_by!r}; give each app "
                "its own server (Zemcp() without a server builds one per app from its app.config)"
            )
        _SERVED[server] = app.name
        contexts = HandlerContexts(app)
        server.around_handlers(contexts.scope)
        app.extensions[EXTENSION] = State(
            server,
            McpApp(server, endpoint=self.rule, guarded=self.login_required),
            contexts,
            authenticate=self.authenticate,
            login_required=self.login_required,
            load_user=self.load_user,
        )
        app.add_url_rule(
            self.rule, endpoint=EXTENSION, view_func=mcp, methods=list(METHODS), provide_automatic_options=False
        )
        if server.auth is not None:
            # zemcp's own OAuth: its Protected Resource Metadata (RFC 9728), at the path the
            # resource URL gives it.
            app.add_url_rule(
                server.auth.metadata_path,
                endpoint=METADATA,
                view_func=metadata,
                methods=["GET", "OPTIONS"],
                provide_automatic_options=False,
            )
        # Flask-WTF's CSRFProtect: exempted now if the app has it, else by a hook that runs
        # before the one CSRFProtect.init_app adds later (hooks run in the order they were added).
        if not _exempt_from_csrf(app):
            app.before_request(_exempt_when_csrf_arrives)
        from zemcp.flask.cli import commands

        app.cli.add_command(commands)


def mcp() -> Response:
    """The MCP endpoint (Streamable HTTP) of the app, served by zemcp."""
    state: State = current_app.extensions[EXTENSION]
    site_request: Request = request._get_current_object()  # type: ignore[attr-defined]
    user = state.user_of(site_request)
    unauthorized = (
        (
            "Bearer",
            "Unauthorized: this MCP endpoint acts for a signed-in user of the site; send the site's bearer token "
            "(Authorization: Bearer <token>)",
        )
        if user is None and state.login_required
        else None
    )
    environ = site_request.environ
    if getattr(site_request, "_cached_data", None) is not None:
        # A hook read the body already (request.get_data()): zemcp reads it from there.
        environ = {**environ, "wsgi.input": io.BytesIO(site_request.get_data())}
    state.contexts.remember(site_request, capture())
    answer = state.mcp_app.answer(environ, user=user, request=site_request, unauthorized=unauthorized)
    return _flask_response(answer)


def metadata() -> Response:
    """The Protected Resource Metadata (RFC 9728) of zemcp's own OAuth authorization."""
    state: State = current_app.extensions[EXTENSION]
    site_request: Request = request._get_current_object()  # type: ignore[attr-defined]
    answer = state.mcp_app.answer(site_request.environ, metadata=True, request=site_request)
    return _flask_response(answer)


def _flask_response(answer: RoutedAnswer) -> Response:
    """zemcp's answer as a Flask response: streamed for an event stream, whole otherwise."""
    if answer.streams:
        # The iterable itself: werkzeug writes each event as zemcp yields it, and closes it at the end.
        response = Response(
            answer.body, status=answer.status, content_type=answer.content_type, direct_passthrough=True
        )
    else:
        response = Response(answer.content(), status=answer.status, content_type=answer.content_type)
        if answer.content_type is None:  # werkzeug would call it text/html (a preflight's 204, a 202)
            del response.headers["Content-Type"]
    for name, value in answer.headers:
        if name.lower() not in _WERKZEUG_OWN:
            response.headers.add(name, value)
    return response


def _check_settings(app: Flask, server: Server) -> None:
    """Raise if ``server``'s settings differ from what ``app.config["ZEMCP"]`` (and the environment) set."""
    configured = app.config.get(CONFIG_KEY)
    if not configured:
        return
    wanted = settings(app)
    differ = [
        name.upper()
        for name in read_mapping(Settings, configured, CONFIG_SOURCE)
        if getattr(server.settings, name) != getattr(wanted, name)
    ]
    if differ:
        raise ValueError(
            f"the MCP server {server.name!r} was built with settings other than {CONFIG_SOURCE} says ({', '.join(differ)}): "
            f"build it with zemcp.Server({server.name!r}, settings=zemcp.flask.settings(app)), or leave out server= "
            "and Zemcp builds one from the app's configuration"
        )


def _exempt_from_csrf(app: Flask) -> bool:
    """Exempt the endpoint from Flask-WTF's ``CSRFProtect`` if ``app`` has it (an MCP client
    has no CSRF token; zemcp's Origin check guards against pages); whether it has."""
    csrf = app.extensions.get("csrf")
    if csrf is None:
        return False
    csrf.exempt(mcp)
    return True


def _exempt_when_csrf_arrives() -> None:
    """A ``before_request`` hook: exempt the endpoint once a later ``CSRFProtect(app)`` is there."""
    _exempt_from_csrf(current_app)
