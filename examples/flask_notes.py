# examples/flask_notes.py
from flask import Flask, request
from flask_login import LoginManager, UserMixin, current_user

import zemcp
import zemcp.flask


class User(UserMixin):
    def __init__(self, id: str, token: str, editor: bool = False):
        self.id, self.token, self.editor = id, token, editor


USERS = {"ada": User("ada", "ada-token", editor=True), "bob": User("bob", "bob-token")}
NOTES: dict[str, list[str]] = {}

app = Flask(__name__)
app.config["SECRET_KEY"] = "change-me"
app.config["ZEMCP"] = {"ELICITATION_TIMEOUT": 300}

login = LoginManager(app)


@login.user_loader
def load_user(user_id: str) -> User | None:
    return USERS.get(user_id)


@login.request_loader
def load_user_from_token(site_request) -> User | None:
    scheme, _, token = site_request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return next((user for user in USERS.values() if user.token == token), None)


server = zemcp.Server("notes", "1.0.0", settings=zemcp.flask.settings(app))


@server.tool
def add_note(ctx: zemcp.Context, text: str = "") -> str:
    """Store a note of yours. Leave out 'text' to be asked for it."""
    if not text:
        answer = ctx.elicit(
            "What should the note say?",
            {"type": "object", "properties": {"text": {"type": "string", "minLength": 1}}, "required": ["text"]},
        )
        text = answer["text"]
    NOTES.setdefault(ctx.user.id, []).append(text)
    return f"noted for {ctx.user.id} ({len(NOTES[ctx.user.id])} notes)"


@server.tool
def my_notes() -> dict:
    """Your notes. Over HTTP, Flask's current_user and request are this call's."""
    return {"user": current_user.id, "asked_from": request.remote_addr, "notes": NOTES.get(current_user.id, [])}


@server.tool(permission=lambda user: user is not None and user.editor)
def all_notes() -> dict[str, list[str]]:
    """Everyone's notes: for editors only."""
    return NOTES


zemcp.flask.Zemcp(app, server, login_required=True)
