"""``zemcp.flask.Zemcp`` in this process: settings from ``app.config["ZEMCP"]``, ``authenticate=``,
Flask-WTF's CSRFProtect, one endpoint per app and one app per server, and ``flask zemcp call``.

Each test builds a small Flask app of its own and drives it with werkzeug's test client
(tests/support/wires.py ``InProcessWire``) or Flask's CLI runner.
"""

from __future__ import annotations

import pytest
from flask import Flask, g, request
from flask_wtf.csrf import CSRFProtect

import zemcp
import zemcp.flask
from tests.apps import flask_extension
from tests.support.apphost import APP_MIME_TYPE, APPS_CAPABILITIES
from tests.support.clients import inprocess_modern
from zemcp.flask import Zemcp


def new_app(config: dict | None = None) -> Flask:
    app = Flask("flask_inprocess")
    app.config["SECRET_KEY"] = "zemcp-tests"
    if config is not None:
        app.config["ZEMCP"] = config
    return app


def whoami_server(app: Flask) -> zemcp.Server:
    server = zemcp.Server("whoami", settings=zemcp.flask.settings(app))

    @server.tool
    def whoami(ctx: zemcp.Context) -> str:
        """Whom the call acts for, and what the app's hook put in g."""
        return f"{ctx.user or 'nobody'} {g.get('tenant', '-')}"

    return server


def call_text(app: Flask, tool: str, headers: dict | None = None) -> str:
    client = inprocess_modern(app)
    _, response = client.call_tool(tool, headers=headers)
    result = client.result(response)
    assert result["isError"] is False, result
    return result["content"][0]["text"]


def test_without_a_server_the_extension_builds_one_from_app_config():
    app = new_app({"ELICITATION_TIMEOUT": 45, "MAX_SESSIONS": "12"})
    Zemcp(app)
    server = app.extensions["zemcp"].server
    assert server.name == "flask_inprocess"
    assert (server.settings.elicitation_timeout, server.settings.max_sessions) == (45, 12)


def test_a_bad_key_of_app_config_is_named():
    with pytest.raises(ValueError, match=r"app.config\[\"ZEMCP\"\] has no setting 'THREAD': did you mean 'THREADS'\?"):
        Zemcp(new_app({"THREAD": 4}))
    with pytest.raises(ValueError, match=r"app.config\[\"ZEMCP\"\] is a list: make it a dict"):
        Zemcp(new_app(["THREADS"]))


def test_a_server_built_with_other_settings_than_app_config_is_refused_saying_how_to_build_it():
    app = new_app({"ELICITATION_TIMEOUT": 45})
    server = zemcp.Server("notes", settings=zemcp.Settings(elicitation_timeout=30))
    with pytest.raises(ValueError) as refused:
        Zemcp(app, server)
    assert str(refused.value) == (
        "the MCP server 'notes' was built with settings other than app.config[\"ZEMCP\"] says (ELICITATION_TIMEOUT): "
        "build it with zemcp.Server('notes', settings=zemcp.flask.settings(app)), or leave out server= and Zemcp "
        "builds one from the app's configuration"
    )
    Zemcp(app, zemcp.Server("notes", settings=zemcp.flask.settings(app)))  # built as the message says


def test_authenticate_gives_the_user_for_apps_without_flask_login():
    app = new_app()

    @app.before_request
    def tenant() -> None:
        g.tenant = "acme"

    tokens = {"Bearer t1": "carol"}
    Zemcp(app, whoami_server(app), authenticate=lambda request: tokens.get(request.headers.get("Authorization", "")))
    assert call_text(app, "whoami", {"Authorization": "Bearer t1"}) == "carol acme"
    assert call_text(app, "whoami") == "nobody acme"


def test_login_required_without_a_user_answers_401_but_lets_a_preflight_through():
    app = new_app()
    Zemcp(app, whoami_server(app), authenticate=lambda request: None, login_required=True)
    client = inprocess_modern(app)
    _, response = client.call_tool("whoami")
    assert response.status_code == 401 and response.headers["WWW-Authenticate"] == "Bearer"
    preflight = client.wire.raw(
        "OPTIONS", headers=[("Origin", "http://localhost"), ("Access-Control-Request-Method", "POST")]
    )
    assert preflight.status_code == 204, preflight.status_code
    assert preflight.headers["Access-Control-Allow-Origin"] == "http://localhost"
    assert "Content-Type" not in preflight.headers, "zemcp's answer, not one werkzeug made up"


@pytest.mark.parametrize("csrf_first", [True, False], ids=["CSRFProtect first", "CSRFProtect after"])
def test_the_endpoint_is_exempt_from_flask_wtf_csrf_protection(csrf_first):
    app = new_app()

    @app.post("/form")
    def form() -> str:
        return "posted"

    if csrf_first:
        CSRFProtect(app)
    Zemcp(app, whoami_server(app))
    if not csrf_first:
        CSRFProtect(app)
    assert app.test_client().post("/form").status_code == 400, "the app's other POSTs need a CSRF token"
    assert call_text(app, "whoami") == "nobody -"


def test_one_endpoint_per_app_and_one_app_per_server():
    app = new_app()
    server = whoami_server(app)
    extension = Zemcp(app, server)
    with pytest.raises(RuntimeError, match="already serves an MCP endpoint"):
        extension.init_app(app)
    with pytest.raises(RuntimeError, match="already served by the Flask app 'flask_inprocess'; give each app its own"):
        Zemcp(new_app(), server)


def test_flask_zemcp_call_runs_one_call_as_a_user():
    users = {"dave": "dave (loaded)"}
    app = new_app()
    Zemcp(app, whoami_server(app), load_user=users.get)
    runner = app.test_cli_runner()
    done = runner.invoke(args=["zemcp", "call", "whoami", "--user", "dave"])
    assert done.exit_code == 0, done.output
    assert done.output == "dave (loaded) -\n"
    missing = runner.invoke(args=["zemcp", "call", "whoami", "--user", "erin"])
    assert missing.exit_code == 2 and "no user 'erin'" in missing.output, missing.output
    unknown = runner.invoke(args=["zemcp", "call", "nothing"])
    assert unknown.exit_code == 1 and "Unknown tool: 'nothing'" in unknown.output, unknown.output
    bad = runner.invoke(args=["zemcp", "call", "whoami", "[1]"])
    assert bad.exit_code == 2 and "a JSON object" in bad.output, bad.output


def test_a_hook_that_read_the_body_leaves_it_to_zemcp():
    """A before_request hook that reads the JSON body (cached by werkzeug) or the form (which a
    JSON body is not) leaves zemcp a whole body to read."""
    app = new_app()
    seen = []

    @app.before_request
    def peek() -> None:
        seen.append((request.form.to_dict(), (request.get_json(silent=True) or {}).get("method")))

    Zemcp(app, whoami_server(app))
    assert call_text(app, "whoami") == "nobody -"
    assert seen == [({}, "tools/call")]


def test_with_zemcps_own_oauth_the_app_serves_the_protected_resource_metadata():
    app = new_app(
        {
            "AUTH": "introspection",
            "AUTH_RESOURCE": "https://notes.example.test/mcp",
            "AUTH_ISSUER": "https://as.example.test",
            # Never asked: no request here carries a token.
            "AUTH_INTROSPECTION_URL": "https://as.example.test/introspect",
            "AUTH_CLIENT_ID": "notes",
        }
    )
    Zemcp(app)
    http = app.test_client()
    document = http.get("/.well-known/oauth-protected-resource/mcp")
    assert document.status_code == 200, document.text
    assert document.json["resource"] == "https://notes.example.test/mcp"
    assert document.json["authorization_servers"] == ["https://as.example.test"]
    refused = http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert refused.status_code == 401
    challenge = refused.headers["WWW-Authenticate"]
    assert 'resource_metadata="https://notes.example.test/.well-known/oauth-protected-resource/mcp"' in challenge


def test_without_zemcps_own_oauth_there_is_no_metadata_route():
    app = new_app()
    Zemcp(app)
    assert app.test_client().get("/.well-known/oauth-protected-resource/mcp").status_code == 404


def test_app_config_turns_the_audit_log_on_and_a_hook_stores_records_with_the_apps_user(caplog):
    caplog.set_level("INFO", logger="zemcp.audit")
    app = new_app({"AUDIT_LOG": True})
    server = whoami_server(app)
    stored: list[zemcp.AuditRecord] = []
    server.on_audit(stored.append)
    tokens = {"Bearer t1": "carol"}
    Zemcp(app, server, authenticate=lambda request: tokens.get(request.headers.get("Authorization", "")))
    assert call_text(app, "whoami", {"Authorization": "Bearer t1"}) == "carol -"
    (record,) = stored
    assert (record.tool, record.user, record.outcome) == ("whoami", "carol", "ok")
    assert "tools/call 'whoami' by 'carol' over 2026-07-28: ok" in caplog.text


def test_an_app_resource_renders_the_apps_template_for_the_requests_user():
    client = inprocess_modern(flask_extension.app, capabilities=APPS_CAPABILITIES)
    bearer = {"Authorization": "Bearer alice-token"}
    read = client.message("resources/read", {"uri": flask_extension.PROFILE_CARD})
    (content,) = client.result(client.post(read, headers=bearer))["contents"]
    assert content["mimeType"] == APP_MIME_TYPE
    assert "<title>Profile</title>" in content["text"] and '<p class="user">alice</p>' in content["text"]
    call = client.message("tools/call", {"name": "profile", "arguments": {}})
    assert client.result(client.post(call, headers=bearer))["content"][0]["text"] == "profile of alice"
