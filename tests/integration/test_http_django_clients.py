"""The official MCP clients against the notes site (tests/apps/django_project on PostgreSQL, two
gunicorn workers sharing Redis) with the tokens the site issued, and ``manage.py zemcp``.

Each client completes an eliciting call of ``add_note`` (the tool asks what the note says,
then saves it for ``ctx.user``) with a Django REST framework token (``Authorization: Token``)
and with a django-oauth-toolkit access token (``Authorization: Bearer``); the row PostgreSQL
holds names the token's user. The Python SDK runs in its legacy mode (initialize, the
question pushed on the call's stream) and pinned to 2026-07-28 (the question in an
``input_required`` round); the TypeScript SDK 1.x speaks the handshake era.
``manage.py zemcp stdio --user`` serves the site to the Python SDK's stdio client as that
user; ``manage.py zemcp inspect`` lists the notes tools with their permissions; a task made
with one user's token is unknown with another's. Every call
leaves a ``zemcp.audit`` record naming its user and outcome (the site's ``settings.ZEMCP``
turns the audit log on).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import secrets
import sys
import time
from collections.abc import Callable

import httpx2
import mcp
import pytest
from mcp import types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.support import REPO
from tests.support.clients import MODERN_VERSION, HandshakeClient, ModernClient
from tests.support.djangosite import DRF_TOKENS, OAUTH_TOKENS, SETTINGS, manage, saved_notes
from tests.support.net import READ_TIMEOUT
from tests.support.nodeinstall import node_binary, run_bounded

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("django") is None, reason="django is not installed (pip install 'zemcp[django]')"
)

#: [seconds] bound on each whole client scenario.
SCENARIO_TIMEOUT = 40
#: The question ``add_note`` asks starts so.
QUESTION = "You have "
NODE_SCRIPT = REPO / "tests" / "node" / "site_client.cjs"
#: [seconds] how long a call's audit record may take to reach the log after its answer.
AUDIT_SETTLE = 5.0
#: The user each kind of token is tried with, and its Authorization header.
TOKENS = {
    "drf": ("alice", f"Token {DRF_TOKENS['alice']}"),
    "oauth": ("bob", f"Bearer {OAUTH_TOKENS['bob']}"),
}


def python_sdk(transport: object, mode: str, text: str, http: httpx2.AsyncClient | None = None) -> dict:
    """``mcp.Client`` over ``transport`` in ``mode``: list the tools, call add_note, answer its
    question with ``text``; ``http`` (the transport's HTTP client) is closed at the end."""
    questions: list[str] = []

    async def on_elicit(context, params):
        questions.append(params.message)
        return types.ElicitResult(action="accept", content={"text": text})

    async def scenario() -> dict:
        try:
            async with mcp.Client(
                transport,
                mode=mode,
                client_info=types.Implementation(name="zemcp-site-sdk", version="1.0"),
                elicitation_callback=on_elicit,
                read_timeout_seconds=20,
            ) as client:
                tools = [tool.name for tool in (await client.list_tools()).tools]
                result = await client.call_tool("add_note", {})
                return {"version": client.protocol_version, "tools": tools, "result": result}
        finally:
            if http is not None:
                await http.aclose()

    seen = asyncio.run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
    seen["questions"] = questions
    return seen


def over_http(url: str, authorization: str, mode: str, text: str) -> dict:
    """:func:`python_sdk` over Streamable HTTP, every request with ``authorization``."""
    http = httpx2.AsyncClient(headers={"Authorization": authorization}, timeout=httpx2.Timeout(READ_TIMEOUT, read=30))
    return python_sdk(streamable_http_client(url, http_client=http), mode, text, http)


def audited(log: Callable[[], str], tool: str, user: str, version: str | None = None) -> list[str]:
    """The outcomes of the ``zemcp.audit`` records of ``tool`` by ``user`` (over ``version``)
    in the text ``log()`` returns, once there is one (a record is written as its call ends)."""
    over = re.escape(version) if version else r"\S+"
    line = re.compile(rf"tools/call '{re.escape(tool)}' by '{re.escape(user)}' over {over}: (\w+)")
    deadline = time.monotonic() + AUDIT_SETTLE
    while not (outcomes := line.findall(log())) and time.monotonic() < deadline:
        time.sleep(0.05)
    return outcomes


def asked_once_and_saved(seen: dict, user: str, text: str, postgres, database) -> None:
    """The client saw add_note (not the staff's all_notes), was asked once, and the call saved
    ``text`` for ``user``: its answer says so and PostgreSQL holds the row as ``user``'s."""
    assert "add_note" in seen["tools"] and "all_notes" not in seen["tools"], seen["tools"]
    assert len(seen["questions"]) == 1 and seen["questions"][0].startswith(QUESTION), seen["questions"]
    result = seen["result"]
    assert result.is_error is False, result
    said = result.content[0].text
    assert said.startswith("note ") and said.endswith(f" saved for {user}"), said
    assert (user, text) in saved_notes(postgres, database)


@pytest.mark.parametrize("token", list(TOKENS))
@pytest.mark.parametrize("mode", ["legacy", MODERN_VERSION])
def test_the_python_sdk_saves_a_note_for_the_user_of_the_sites_token(
    notes_site, postgres, django_project_db, mode, token
):
    user, authorization = TOKENS[token]
    text = f"python sdk {mode} {token} {secrets.token_hex(3)}"
    before = len(notes_site.log())
    seen = over_http(notes_site.url, authorization, mode, text)
    if mode == MODERN_VERSION:
        assert seen["version"] == MODERN_VERSION
    else:
        assert seen["version"] != MODERN_VERSION
    asked_once_and_saved(seen, user, text, postgres, django_project_db)
    # One record per round: the 2026-07-28 call asked in a round of its own.
    outcomes = audited(lambda: notes_site.log()[before:], "add_note", user, seen["version"])
    assert outcomes == (["input_required", "ok"] if mode == MODERN_VERSION else ["ok"]), outcomes


@pytest.mark.parametrize("token", list(TOKENS))
def test_the_typescript_sdk_1_saves_a_note_for_the_user_of_the_sites_token(
    notes_site, postgres, django_project_db, ts_sdk1_modules, token
):
    user, authorization = TOKENS[token]
    text = f"typescript sdk 1 {token} {secrets.token_hex(3)}"
    before = len(notes_site.log())
    code, out, err = run_bounded(
        [
            str(node_binary(ts_sdk1_modules)),
            str(NODE_SCRIPT),
            str(ts_sdk1_modules),
            notes_site.url,
            authorization,
            "add_note",
            text,
        ],
        SCENARIO_TIMEOUT,
        cwd=REPO,
    )
    assert code == 0, f"the Node client failed ({code}):\n{out}\n{err}"
    report = json.loads(out.strip().splitlines()[-1])
    assert "add_note" in report["tools"] and "all_notes" not in report["tools"], report
    assert len(report["elicitations"]) == 1 and report["elicitations"][0].startswith(QUESTION), report
    said = report["result"]["content"][0]["text"]
    assert said.endswith(f" saved for {user}"), said
    assert (user, text) in saved_notes(postgres, django_project_db)
    assert audited(lambda: notes_site.log()[before:], "add_note", user, report["protocolVersion"]) == ["ok"]


@pytest.mark.parametrize("mode", ["legacy", MODERN_VERSION])
def test_manage_py_zemcp_stdio_serves_the_site_as_the_user_it_names(postgres, django_project_db, mode, tmp_path):
    text = f"stdio {mode} {secrets.token_hex(3)}"
    params = StdioServerParameters(
        command=sys.executable,
        cwd=REPO,
        args=["-m", "django", "zemcp", "stdio", "--user", "alice", f"--settings={SETTINGS}"],
        # Merged over the client's bare default environment: no bytecode written into the checkout.
        env={**django_project_db.environ(), "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"},
    )
    with (tmp_path / "stderr.log").open("w+") as errlog:
        seen = python_sdk(stdio_client(params, errlog=errlog), mode, text)
    asked_once_and_saved(seen, "alice", text, postgres, django_project_db)
    outcomes = audited((tmp_path / "stderr.log").read_text, "add_note", "alice", seen["version"])
    assert outcomes == (["input_required", "ok"] if mode == MODERN_VERSION else ["ok"]), outcomes


def test_manage_py_zemcp_inspect_lists_the_notes_tools_with_their_permissions(django_project_db):
    described = json.loads(manage(django_project_db, "zemcp", "inspect", "--json"))
    permissions = {tool["name"]: tool["permission"] for tool in described["tools"]}
    assert permissions["all_notes"] == "notes.view_note"
    assert permissions["add_note"] == "tests.apps.django_project.notes.mcp.signed_in"
    text = manage(django_project_db, "zemcp", "inspect")
    assert "  all_notes: Every user's notes" in text and "    permission: notes.view_note\n" in text, text


def test_a_tool_the_user_may_not_use_is_unknown_to_them_and_audited_so(notes_site):
    user, authorization = TOKENS["oauth"]
    before = len(notes_site.log())
    client = HandshakeClient(notes_site.url, headers={"Authorization": authorization})
    assert client.initialize().status_code == 200
    error = client.rpc_error("tools/call", {"name": "all_notes", "arguments": {}})
    assert error["message"] == "Unknown tool: 'all_notes'; tools/list names the available tools", error
    assert audited(lambda: notes_site.log()[before:], "all_notes", user) == ["error"]


TASKS = {"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}


def test_a_task_of_one_token_user_is_not_found_with_another_users_token(notes_site):
    (alice, alice_token), (_, bob_token) = TOKENS["drf"], TOKENS["oauth"]
    client = ModernClient(notes_site.url, capabilities=TASKS)
    _, created = client.call({}, name="export_notes", headers={"Authorization": alice_token})
    task = created["result"]
    assert task["resultType"] == "task", task

    def get(authorization: str) -> dict:
        message = client.message("tasks/get", {"taskId": task["taskId"]})
        return client.reply(client.post(message, headers={"Authorization": authorization}), message["id"])

    assert get(bob_token)["error"]["code"] == -32602
    deadline = time.monotonic() + 10
    while (found := get(alice_token)["result"])["status"] == "working" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert found["status"] == "completed", found
    assert found["result"]["content"][0]["text"].startswith(f"{alice}: "), found
