"""A Flask app with its MCP endpoint as a route (``zemcp.flask.Zemcp``): ``tests.apps.flask_extension:app``.

The app has users in a dict and Flask-Login, whose ``request_loader`` takes ``Authorization:
Bearer <token>`` (how MCP clients, which carry no session cookie, sign in) and whose
``login_view`` would redirect a browser to a login page; a ``before_request`` hook that
records that it ran in ``g`` and an ``after_request`` hook that marks every response; error
handlers that answer HTML; and ``app.config["ZEMCP"]``, from which the extension builds the
server. The endpoint is ``/mcp`` with ``login_required=True``. Its tools:

- ``greet``: asks for a name when none is given, and greets it for ``ctx.user`` (and ``current_user``);
- ``whoami``: what a handler sees of Flask (``current_user``, ``ctx.user``, ``g``, the
  request, ``current_app``);
- ``payroll``: ``permission=`` a callable, for users with the ``payroll`` permission;
- ``report``: may run as a task, and says what it sees there (the user, no request);
- ``broken``: raises, to show the app's error handlers stay out of MCP answers;
- ``profile``: an MCP App whose card (:data:`PROFILE_CARD`) is the app's template
  ``templates/profile_card.html``, rendered with ``render_template`` for the request's user.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flask import Flask, current_app, g, has_request_context, render_template, request
from flask_login import LoginManager, UserMixin, current_user, login_required

import zemcp
from zemcp.flask import Zemcp

#: The ``ui://`` URI of the ``profile`` tool's card.
PROFILE_CARD = "ui://flask/profile.html"
#: Response header the app's after_request hook adds to every response Flask serves.
SITE_HEADER = "X-Served-By"


@dataclass
class User(UserMixin):
    """A user of the app: an id, a bearer token the app issued, and permissions."""

    id: str
    token: str
    permissions: set[str] = field(default_factory=set)


USERS = {
    "alice": User("alice", "alice-token", {"payroll"}),
    "bob": User("bob", "bob-token"),
}

app = Flask(__name__)
app.config["SECRET_KEY"] = "zemcp-tests-flask-extension"
# The ZEMCP_* variables the tests' gunicorn is started with win over these.
app.config["ZEMCP"] = {"ELICITATION_TIMEOUT": 120, "TASK_THREADS": 2}

login = LoginManager(app)
# A browser that is not signed in would be sent to the login page; an MCP client never is.
login.login_view = "login_page"


@login.user_loader
def load_user(user_id: str) -> User | None:
    """The user of a session cookie, and of ``flask zemcp stdio --user``."""
    return USERS.get(user_id)


@login.request_loader
def user_of_token(site_request) -> User | None:
    """The user whose token the request carries as ``Authorization: Bearer <token>``."""
    scheme, _, token = site_request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return next((user for user in USERS.values() if user.token == token), None)


@app.before_request
def record_hook() -> None:
    """Record in ``g`` that the app's hooks ran for this request."""
    g.hook = f"before_request ran for {request.endpoint}"


@app.after_request
def mark(response):
    """Mark the response as one the app served, through its hooks."""
    response.headers[SITE_HEADER] = "flask"
    return response


@app.errorhandler(404)
@app.errorhandler(Exception)
def html_error(error):
    """An error page, as a site renders it: never what an MCP client should read."""
    return "<html><body>the site's error page</body></html>", getattr(error, "code", 500)


@app.get("/login")
def login_page() -> str:
    """The page ``login_view`` names."""
    return "<html><body>please sign in</body></html>"


@app.get("/private")
@login_required
def private_page() -> str:
    """A page for signed-in users: an anonymous browser is redirected to ``login_view``."""
    return f"hello {current_user.id}"


mcp = Zemcp(app, login_required=True)
server = app.extensions["zemcp"].server


@server.tool
def greet(ctx: zemcp.Context, name: str = "") -> str:
    """Greet someone; leave out 'name' to be asked for it."""
    if not name:
        name = ctx.elicit(
            "Whom should I greet?",
            {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            key="name",
        )["name"]
    # current_user is the request's user; ctx.user is also there in a task and over stdio.
    signed = current_user.id if current_user else "no request"
    return f"hello {name}, from {ctx.user.id} (current_user: {signed})"


@server.tool
def whoami(ctx: zemcp.Context) -> dict:
    """What the handler sees of Flask."""
    return {
        "current_user": current_user.id,
        "ctx_user": ctx.user.id,
        "g_hook": g.get("hook"),
        "request_path": request.path,
        "same_request": ctx.request is request._get_current_object(),
        "app": current_app.name,
    }


@server.tool(permission=lambda user: user is not None and "payroll" in user.permissions)
def payroll() -> str:
    """For users with the payroll permission."""
    return "the payroll"


@server.tool(task="optional")
def report(ctx: zemcp.Context) -> dict:
    """What a handler sees when it runs as a task."""
    return {
        "ctx_user": ctx.user.id if ctx.user is not None else None,
        "ctx_request": None if ctx.request is None else "a request",
        "has_request_context": has_request_context(),
        "app": current_app.name,
        "task": ctx.task_id is not None,
    }


@server.tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("the tool broke")


@server.tool(ui_resource=PROFILE_CARD)
def profile(ctx: zemcp.Context) -> str:
    """The user's profile, as a card where the client renders MCP Apps."""
    return f"profile of {ctx.user.id}" + ("" if ctx.client_supports_apps else " (no card: this client renders no apps)")


server.app_resource(
    PROFILE_CARD, render=lambda: render_template("profile_card.html", title="Profile", user=current_user.id)
)
