"""What one Flask app's MCP endpoint keeps: its server, its options, and whom a request acts for."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flask import Flask, current_app

if TYPE_CHECKING:
    from flask.wrappers import Request

    from zemcp.core.server import Server
    from zemcp.flask.handlercontext import HandlerContexts
    from zemcp.http.transport import McpApp


@dataclasses.dataclass
class State:
    """What one app's endpoint keeps (``app.extensions["zemcp"]``).

    Attributes:
        server: the server the app serves.
        mcp_app: the :class:`zemcp.McpApp` of the server, which answers the requests.
        contexts: the Flask contexts its handlers run in.
        authenticate, login_required, load_user: the options of :class:`zemcp.flask.Zemcp`.
    """

    server: Server
    mcp_app: McpApp
    contexts: HandlerContexts
    authenticate: Callable[[Request], Any] | None = None
    login_required: bool = False
    load_user: Callable[[str], Any] | None = None

    def user_of(self, site_request: Request) -> Any:
        """Whom ``site_request`` acts for: ``authenticate=``'s answer, else Flask-Login's
        ``current_user``; None for no one or an anonymous user."""
        if self.authenticate is not None:
            user = self.authenticate(site_request)
        elif hasattr(current_app, "login_manager"):  # Flask-Login's LoginManager.init_app sets it
            # Imported by name: Flask-Login is the app's dependency, not zemcp's.
            flask_login = importlib.import_module("flask_login")
            user = flask_login.current_user._get_current_object()
        else:
            return None
        return user if user is not None and getattr(user, "is_authenticated", True) else None

    def user_named(self, app: Flask, user_id: str) -> Any:
        """The user ``user_id`` names, for the commands: ``load_user=``, else Flask-Login's ``user_loader``.

        Raises:
            LookupError: no loader, or no such user (the message says what to do).
        """
        loader = self.load_user
        if loader is None:
            manager = getattr(app, "login_manager", None)
            loader = getattr(manager, "_user_callback", None)
        if loader is None:
            raise LookupError(
                "--user needs a way to load users: give Zemcp(..., load_user=function(user_id) -> user), or set up "
                "Flask-Login's LoginManager with a user_loader"
            )
        user = loader(user_id)
        if user is None:
            raise LookupError(f"no user {user_id!r}: the app's user loader found none (give the id it loads users by)")
        return user
