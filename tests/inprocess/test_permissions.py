"""``permission=`` on tools, prompts and resources: who may see and use them.

What a user may not use is absent from the lists and refused exactly as an unknown name would
be, in both eras and over stdio; without a framework the user asked about is the OAuth
principal (None without authorization), and a permission name needs a user with ``has_perm``.
"""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest

import zemcp
from tests.support.clients import LATEST_VERSION, HandshakeClient, ModernClient, inprocess_modern
from tests.support.wires import InProcessWire
from zemcp.auth.access import Access
from zemcp.cli.stdio import StdioTransport
from zemcp.protocol.tasks import EXTENSION

#: The client capabilities of a 2026-07-28 request that may get a task.
TASKS = {"extensions": {EXTENSION: {}}}


def staff_only(user: Any) -> bool:
    """Only the principal ``staff``."""
    return user is not None and user.subject == "staff"


def broken(user: Any) -> bool:
    raise RuntimeError("a rule that fails")


class Tokens:
    """Bearer tokens ``staff`` and ``guest``, each naming the principal of that name."""

    def verify(self, token: str) -> zemcp.auth.Principal:
        if token not in ("staff", "guest"):
            raise zemcp.auth.InvalidToken("unknown token")
        return zemcp.auth.Principal(token)


def make_server(auth: bool = False) -> zemcp.Server:
    authorization = (
        zemcp.auth.Authorization(
            Tokens(), resource="https://mcp.example.com/mcp", authorization_servers=["https://as.example.com"]
        )
        if auth
        else None
    )
    server = zemcp.Server("permissions", "1", auth=authorization)

    @server.tool
    def everyone() -> str:
        """Anyone may call it."""
        return "for everyone"

    @server.tool(permission=staff_only)
    def payroll() -> str:
        """Staff only."""
        return "the payroll"

    @server.tool(permission="payroll.view_salary")
    def salaries() -> str:
        """Users with a Django-style permission only."""
        return "the salaries"

    @server.tool(permission=broken)
    def fragile() -> str:
        """Its rule fails: nobody may use it."""
        return "never"

    @server.prompt(permission=staff_only)
    def staff_prompt() -> str:
        """A prompt for staff."""
        return "for staff"

    @server.tool(task="optional")
    def report(ctx: zemcp.Context) -> str:
        """Runs as a task when asked: tells the user it acts for, and whether it has a request."""
        return f"{ctx.user.subject if ctx.user is not None else 'nobody'}, request {ctx.request}"

    @server.resource("test://staff", permission=staff_only)
    def staff_file() -> str:
        """A file for staff."""
        return "staff file"

    return server


def handshake(app: zemcp.McpApp, token: str | None) -> HandshakeClient:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    client = HandshakeClient(InProcessWire(app), headers=headers)
    assert client.initialize(capabilities={}).status_code == 200
    return client


def names(items: list[dict[str, Any]], key: str = "name") -> list[str]:
    return sorted(item[key] for item in items)


def test_a_user_without_the_permission_sees_nothing_of_it_and_gets_the_unknown_answers():
    app = zemcp.McpApp(make_server(auth=True))
    guest = handshake(app, "guest")
    assert names(guest.list_tools()) == ["everyone", "report"]
    assert guest.rpc("prompts/list")["prompts"] == []
    assert guest.rpc("resources/list")["resources"] == []
    unknown = guest.rpc_error("tools/call", {"name": "no-such-tool", "arguments": {}})
    for hidden in ("payroll", "salaries", "fragile"):
        error = guest.rpc_error("tools/call", {"name": hidden, "arguments": {}})
        assert error == {**unknown, "message": unknown["message"].replace("no-such-tool", hidden)}, error
    unknown_prompt = guest.rpc_error("prompts/get", {"name": "no-such-prompt"})
    error = guest.rpc_error("prompts/get", {"name": "staff_prompt"})
    assert error == {**unknown_prompt, "message": unknown_prompt["message"].replace("no-such-prompt", "staff_prompt")}
    unknown_file = guest.rpc_error("resources/read", {"uri": "test://none"})
    error = guest.rpc_error("resources/read", {"uri": "test://staff"})
    assert error["code"] == unknown_file["code"] == -32002 and error["data"] == {"uri": "test://staff"}, error
    completion = guest.rpc_error(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "staff_prompt"}, "argument": {"name": "x", "value": ""}},
    )
    assert "unknown prompt 'staff_prompt'" in completion["message"], completion


def test_a_user_with_the_permission_sees_and_uses_it():
    app = zemcp.McpApp(make_server(auth=True))
    staff = handshake(app, "staff")
    # A permission name needs a user with has_perm, which an OAuth principal is not.
    assert names(staff.list_tools()) == ["everyone", "payroll", "report"]
    assert staff.rpc("tools/call", {"name": "payroll", "arguments": {}})["content"][0]["text"] == "the payroll"
    assert names(staff.rpc("prompts/list")["prompts"]) == ["staff_prompt"]
    assert staff.rpc("prompts/get", {"name": "staff_prompt"})["messages"][0]["content"]["text"] == "for staff"
    assert names(staff.rpc("resources/list")["resources"], "uri") == ["test://staff"]
    assert staff.rpc("resources/read", {"uri": "test://staff"})["contents"][0]["text"] == "staff file"


def test_the_2026_era_hides_and_refuses_the_same_way():
    client = inprocess_modern(zemcp.McpApp(make_server()))
    assert names(client.list_tools()) == ["everyone", "report"]
    request_id, response = client.call_tool("payroll")
    error = client.error(response, 400, -32602)
    assert error["message"] == "Unknown tool: 'payroll'; tools/list names the available tools", error


def stdio_answers(requests: list[dict[str, Any]], user: Any = None) -> dict[int, dict[str, Any]]:
    """The answers, by id, of a stdio connection (acting for ``user``) that initializes, then
    sends ``requests`` (numbered from 2) and closes."""
    initialize = {
        "protocolVersion": LATEST_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "s", "version": "1"},
    }
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}]
    lines += [{"jsonrpc": "2.0", "id": n, **request} for n, request in enumerate(requests, 2)]
    out = io.BytesIO()
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    StdioTransport(make_server(), io.BufferedReader(io.BytesIO(data)), out, user=user).serve()
    return {a["id"]: a for a in map(json.loads, out.getvalue().splitlines())}


def test_stdio_hides_and_refuses_the_same_way():
    answers = stdio_answers(
        [{"method": "tools/list"}, {"method": "tools/call", "params": {"name": "payroll", "arguments": {}}}]
    )
    assert names(answers[2]["result"]["tools"]) == ["everyone", "report"]
    assert answers[3]["error"]["message"] == "Unknown tool: 'payroll'; tools/list names the available tools"


def test_stdio_acts_for_the_user_it_was_given():
    class Staff:
        subject = "staff"

        def has_perm(self, name: str) -> bool:
            return name == "payroll.view_salary"

    answers = stdio_answers(
        [
            {"method": "tools/list"},
            {"method": "tools/call", "params": {"name": "salaries", "arguments": {}}},
            {"method": "tools/call", "params": {"name": "report", "arguments": {}}},
        ],
        user=Staff(),
    )
    assert names(answers[2]["result"]["tools"]) == ["everyone", "payroll", "report", "salaries"]
    assert answers[3]["result"]["content"][0]["text"] == "the salaries"
    assert answers[4]["result"]["content"][0]["text"] == "staff, request None"


def test_a_permission_name_is_asked_of_the_users_has_perm():
    class User:
        def __init__(self, *perms: str):
            self.perms = perms

        def has_perm(self, name: str) -> bool:
            return name in self.perms

    server = make_server()
    table = server.permission_table
    assert Access(None, {}, User("payroll.view_salary"), table).permits("tool", "salaries")
    assert not Access(None, {}, User("payroll.other"), table).permits("tool", "salaries")
    assert not Access(None, {}, None, table).permits("tool", "salaries")
    assert Access(None, {}, None, table).permits("tool", "everyone")


def test_a_rule_that_fails_refuses_and_is_logged(caplog):
    caplog.set_level("ERROR", logger="zemcp.auth")
    assert not Access(None, {}, None, make_server().permission_table).permits("tool", "fragile")
    assert "the permission rule of tool 'fragile' failed" in caplog.text and "a rule that fails" in caplog.text


@pytest.mark.parametrize("bad", ["", [], ["ok", ""], 3, ("x", 4)])
def test_a_bad_permission_is_refused_at_registration(bad):
    server = zemcp.Server("bad", "1")
    with pytest.raises(ValueError, match="permission must be a permission name"):
        server.tool(permission=bad)(lambda: "x")


def test_a_task_keeps_the_user_of_the_call_that_created_it_and_has_no_request():
    client = ModernClient(InProcessWire(zemcp.McpApp(make_server(auth=True))), capabilities=TASKS)
    staff = {"Authorization": "Bearer staff"}
    created = client.wire.json(client.request("tools/call", {"name": "report", "arguments": {}}, headers=staff))
    assert created["result"]["resultType"] == "task", created
    task_id = created["result"]["taskId"]
    deadline = time.monotonic() + 10
    while True:
        task = client.wire.json(client.request("tasks/get", {"taskId": task_id}, headers=staff))["result"]
        if task["status"] == "completed" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert task["status"] == "completed", task
    assert task["result"]["content"][0]["text"] == "staff, request None"
