"""The MCP endpoint as a route of a real Flask app (``zemcp.flask.Zemcp``), served by gunicorn.

tests/apps/flask_extension.py has Flask-Login (bearer tokens through its ``request_loader``, a
``login_view``), a ``before_request`` hook that records itself in ``g``, an ``after_request``
hook that marks responses, HTML error handlers, and ``login_required=True``. Under
``gunicorn -c gunicorn.conf.py``: eliciting calls complete through the route in both eras; a
handler sees the request's ``current_user``, ``g`` and ``request``; a ``permission=`` callable
hides a tool; an anonymous request gets 401, never a redirect; the error handlers never
rewrite zemcp's answers; a task gets the user and no request. The ``flask zemcp`` commands
run as subprocesses: ``inspect``, and ``stdio --user`` driven by the official Python SDK's
stdio client through an eliciting call.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import mcp
import pytest
import requests
from mcp import types
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.support import REPO
from tests.support.clients import MODERN_VERSION, HandshakeClient, ModernClient
from tests.support.gunicorn import GunicornServer, lend
from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT

APP = "tests.apps.flask_extension:app"
#: The app's name: the server's, as the extension builds it.
APP_NAME = "tests.apps.flask_extension"
SITE_HEADER = "X-Served-By"
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}
#: The 2026-07-28 tasks extension a client declares to have calls become tasks.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
#: [seconds] bound on a whole stdio client scenario (the subprocess starts in it).
SCENARIO_TIMEOUT = 40


@pytest.fixture(scope="module")
def _flask_server(_log_dir: Path) -> Iterator[GunicornServer]:
    server = GunicornServer({"keepalive_interval": 0.5}, _log_dir, app=APP)
    yield server
    server.stop()


@pytest.fixture
def site(request: pytest.FixtureRequest, _flask_server: GunicornServer) -> Iterator[GunicornServer]:
    """The module's gunicorn serving the Flask app (``-c gunicorn.conf.py``); its endpoint is ``site.url``."""
    yield from lend(request, _flask_server)


def signed_in(site: GunicornServer, headers: dict, protocol_version: str = "2025-06-18") -> HandshakeClient:
    """A handshake-era session of the user whose token ``headers`` carry."""
    client = HandshakeClient(site.url, headers=headers)
    response = client.initialize(protocol_version=protocol_version)
    assert response.status_code == 200, (response.status_code, response.text)
    return client


def text_of(result: dict) -> str:
    assert result.get("isError") is False, result
    return result["content"][0]["text"]


def test_a_handshake_eliciting_call_streams_through_the_route(site):
    client = signed_in(site, ALICE)
    assert client.init_response.headers.get(SITE_HEADER) == "flask", "the app's hooks run on MCP requests"
    call_id, response, stream = client.open_call("greet", {})
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].split(";")[0].strip() == "text/event-stream"
    assert response.headers.get(SITE_HEADER) == "flask", "the event stream is the app's response"
    elicitation = stream.next_message()
    assert elicitation is not None and elicitation["method"] == "elicitation/create", elicitation
    assert elicitation["params"]["message"] == "Whom should I greet?"
    answer = client.accept(elicitation["id"], {"name": "Zoe"})
    assert answer.status_code == 202, answer.text
    final = stream.next_message()
    assert final is not None and final["id"] == call_id, final
    assert text_of(final["result"]) == "hello Zoe, from alice (current_user: alice)"
    assert stream.next_message() is None and stream.ended


def test_a_2026_eliciting_call_completes_through_the_route(site):
    client = ModernClient(site.url)
    _, response = client.call_tool("greet", {}, headers=BOB)
    first = client.result(response)
    assert first["resultType"] == "input_required", first
    assert first["inputRequests"]["name"]["params"]["message"] == "Whom should I greet?"
    _, response = client.answer("greet", first, {"name": {"action": "accept", "content": {"name": "Zoe"}}}, headers=BOB)
    final = client.result(response)
    assert final["resultType"] == "complete", final
    assert text_of(final) == "hello Zoe, from bob (current_user: bob)"
    assert response.headers.get(SITE_HEADER) == "flask"


def test_a_handler_runs_in_its_rounds_request_context(site):
    """current_user, g (set by the app's before_request hook), request and current_app, in both eras."""
    expected = {
        "current_user": "alice",
        "ctx_user": "alice",
        "g_hook": "before_request ran for zemcp",
        "request_path": "/mcp",
        "same_request": True,
        "app": APP_NAME,
    }
    session = signed_in(site, ALICE)
    assert json.loads(text_of(session.rpc("tools/call", {"name": "whoami", "arguments": {}}))) == expected
    modern = ModernClient(site.url)
    _, response = modern.call_tool("whoami", headers=ALICE)
    assert json.loads(text_of(modern.result(response))) == expected


def test_a_permission_callable_hides_a_tool_from_a_user_without_it(site):
    bob = signed_in(site, BOB)
    assert "payroll" not in {tool["name"] for tool in bob.list_tools()}
    refused = bob.rpc_error("tools/call", {"name": "payroll", "arguments": {}})
    assert refused["message"] == "Unknown tool: 'payroll'; tools/list names the available tools", refused
    alice = signed_in(site, ALICE)
    assert "payroll" in {tool["name"] for tool in alice.list_tools()}
    assert text_of(alice.rpc("tools/call", {"name": "payroll", "arguments": {}})) == "the payroll"
    modern = ModernClient(site.url)
    _, response = modern.call_tool("payroll", headers=BOB)
    assert modern.error(response, 400, -32602)["message"].startswith("Unknown tool: 'payroll'")


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer not-a-token"}], ids=["no token", "bad token"])
def test_an_anonymous_request_gets_401_not_a_redirect_to_the_login_page(site, headers):
    client = ModernClient(site.url)
    message = client.message("tools/list")
    with requests.Session() as http:
        response = http.post(
            site.url,
            json=message,
            headers=client.headers(message, headers),
            allow_redirects=False,
            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
        )
    assert response.status_code == 401, (response.status_code, response.headers, response.text)
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert response.headers["Content-Type"] == "application/json"
    assert "Authorization: Bearer" in response.json()["error"]["message"]
    # The app's own pages do redirect an anonymous browser to its login page.
    with requests.Session() as http:
        page = http.get(site.base + "/private", allow_redirects=False, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    assert page.status_code == 302 and page.headers["Location"].startswith("/login"), (page.status_code, page.headers)


def test_the_apps_error_handlers_do_not_rewrite_mcp_answers(site):
    """The app answers its own 404 and errors with HTML; zemcp's errors at the route stay JSON-RPC."""
    with requests.Session() as http:
        page = http.get(site.base + "/nowhere", timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
        assert page.status_code == 404 and "the site's error page" in page.text, "the app's handler is live"
        client = ModernClient(site.url)
        message = client.message("tools/list")
        bad = http.post(
            site.url,
            data=b"{not json",
            headers={**client.headers(message, ALICE), "Content-Type": "application/json"},
            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
        )
    assert bad.status_code == 400 and bad.headers["Content-Type"] == "application/json", (bad.status_code, bad.text)
    assert bad.json()["error"]["code"] == -32700, bad.text
    session = signed_in(site, ALICE)
    gone = session.post(
        {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}, headers={"Mcp-Session-Id": "no-such-session"}
    )
    assert gone.status_code == 404 and gone.headers["Content-Type"] == "application/json", (gone.status_code, gone.text)
    assert "error" in gone.json() and "<html" not in gone.text
    broken = session.rpc("tools/call", {"name": "broken", "arguments": {}})
    assert broken["isError"] is True and broken["content"][0]["text"] == "the tool broke", broken


def test_a_task_gets_the_user_and_no_request(site):
    client = signed_in(site, ALICE, protocol_version="2025-11-25")
    message = client.call_message({}, name="report")
    message["params"]["task"] = {"ttl": 60000}
    created = client.post(message)
    assert created.status_code == 200, created.text
    task_id = created.json()["result"]["task"]["taskId"]
    deadline = time.monotonic() + 10
    while (status := client.rpc("tasks/get", {"taskId": task_id})["status"]) == "working":
        assert time.monotonic() < deadline, "the task did not finish within 10 s"
        time.sleep(0.1)
    assert status == "completed"
    result = client.rpc("tasks/result", {"taskId": task_id})
    assert json.loads(text_of(result)) == {
        "ctx_user": "alice",
        "ctx_request": None,
        "has_request_context": False,
        "app": APP_NAME,
        "task": True,
    }


def flask_command(*args: str) -> subprocess.CompletedProcess[str]:
    """``flask zemcp ...`` of the test app, run as a subprocess from the repository (FLASK_APP)."""
    env = {**os.environ, "FLASK_APP": APP, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "flask", "zemcp", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )


def test_flask_zemcp_inspect_lists_the_tools_with_their_permission_rules():
    done = flask_command("inspect")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"{APP_NAME} 0.0.0: 6 tools, 1 resource, 0 resource templates, 0 prompts", lines[0]
    payroll = lines.index("  payroll: For users with the payroll permission.")
    assert lines[payroll + 1] == f"    permission: {APP_NAME}.<lambda>", lines[payroll : payroll + 3]
    greet = lines.index("  greet: Greet someone; leave out 'name' to be asked for it.")
    assert lines[greet + 1] == "    permission: everyone"
    described = json.loads(flask_command("inspect", "--json").stdout)
    assert [tool["name"] for tool in described["tools"]] == [
        "greet",
        "whoami",
        "payroll",
        "report",
        "broken",
        "profile",
    ]
    assert described["tools"][0]["inputSchema"]["properties"]["name"]["type"] == "string"


@pytest.mark.parametrize("mode", ["legacy", MODERN_VERSION])
def test_flask_zemcp_stdio_serves_the_app_for_a_user_to_the_sdk_client(mode):
    elicitations = []

    async def on_elicit(context, params):
        elicitations.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Zoe"})

    async def scenario():
        params = StdioServerParameters(
            command=sys.executable,
            cwd=REPO,
            args=["-m", "flask", "zemcp", "stdio", "--user", "bob", "--log-level", "warning"],
            env={"FLASK_APP": APP, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        async with mcp.Client(
            stdio_client(params), mode=mode, elicitation_callback=on_elicit, read_timeout_seconds=20
        ) as client:
            tools = await client.list_tools()
            return [t.name for t in tools.tools], await client.call_tool("greet", {})

    names, result = asyncio.run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
    assert "payroll" not in names and "greet" in names, names  # bob may not see payroll
    assert elicitations == ["Whom should I greet?"]
    assert result.is_error is False, result
    assert result.content[0].text == "hello Zoe, from bob (current_user: no request)"


def test_the_docs_example_elicits_for_the_apps_user(start_server):
    """examples/flask_notes.py (docs/flask.md): ada adds a note she is asked for, in either era;
    bob sees his own notes through current_user and not the editors' tool."""
    site = start_server(app="examples.flask_notes:app")
    ada = {"Authorization": "Bearer ada-token"}
    modern = ModernClient(site.url)
    _, response = modern.call_tool("add_note", {}, headers=ada)
    first = modern.result(response)
    assert first["inputRequests"]["elicitation-1"]["params"]["message"] == "What should the note say?", first
    answer = {"elicitation-1": {"action": "accept", "content": {"text": "buy milk"}}}
    _, response = modern.answer("add_note", first, answer, headers=ada)
    assert text_of(modern.result(response)) == "noted for ada (1 notes)"
    session = signed_in(site, ada)
    call_id, response, stream = session.open_call("add_note", {})
    elicitation = stream.next_message()
    assert session.accept(elicitation["id"], {"text": "call mum"}).status_code == 202
    assert text_of(stream.next_message()["result"]) == "noted for ada (2 notes)"
    assert json.loads(text_of(session.rpc("tools/call", {"name": "all_notes", "arguments": {}}))) == {
        "ada": ["buy milk", "call mum"]
    }
    bob = signed_in(site, {"Authorization": "Bearer bob-token"})
    assert {tool["name"] for tool in bob.list_tools()} == {"add_note", "my_notes"}
    mine = json.loads(text_of(bob.rpc("tools/call", {"name": "my_notes", "arguments": {}})))
    assert mine == {"user": "bob", "asked_from": "127.0.0.1", "notes": []}


def test_a_2026_task_belongs_to_the_user_who_created_it(site):
    """A task created by alice (2026-07-28, tasks extension) is reached by her and by no one
    else: bob's tasks/get is answered as for a task that does not exist."""
    client = ModernClient(site.url, capabilities={"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}})
    response, reply = client.call({}, name="report", headers=ALICE)
    assert reply["result"]["resultType"] == "task", reply
    task_id = reply["result"]["taskId"]

    def get(headers: dict) -> dict:
        message = client.message("tasks/get", {"taskId": task_id})
        return client.reply(client.post(message, headers=headers), message["id"])

    assert get(ALICE)["result"]["taskId"] == task_id
    refused = get(BOB)
    assert "result" not in refused and refused["error"]["message"].startswith(f"Invalid params: no task {task_id!r}"), (
        refused
    )
