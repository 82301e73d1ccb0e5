"""The audit records (zemcp/core/audit.py, zemcp/pipeline/audit.py): one per tool call in both
eras, over stdio and for tasks, with who, what, the outcome in its fixed words, the duration,
the protocol revision and the task id; on the ``zemcp.audit`` logger and to the hooks a site
registers with ``server.on_audit``.
"""

from __future__ import annotations

import io
import json
import logging
import os
import threading
import time
from datetime import UTC
from typing import Any

import pytest

import zemcp
from tests.support.clients import (
    CLIENT_VERSION,
    LATEST_VERSION,
    MODERN_VERSION,
    HandshakeClient,
    ModernClient,
    inprocess_modern,
    inprocess_session,
)
from tests.support.wires import InProcessWire
from zemcp import Settings
from zemcp.cli.stdio import StdioTransport
from zemcp.core.audit import OUTCOMES, user_name
from zemcp.protocol.tasks import EXTENSION

DATE = {"type": "object", "properties": {"date": {"type": "string"}}, "required": ["date"]}
#: The 2026-07-28 capabilities of a client that runs tasks and answers elicitations.
TASKS = {"elicitation": {}, "extensions": {EXTENSION: {}}}


class Tokens:
    """Bearer tokens ``admin`` (scope ``admin``) and ``guest`` (no scope), each naming its principal."""

    def verify(self, token: str) -> zemcp.auth.Principal:
        if token == "admin":
            return zemcp.auth.Principal("admin", scopes=frozenset({"admin"}))
        if token == "guest":
            return zemcp.auth.Principal("guest")
        raise zemcp.auth.InvalidToken("unknown token")


def make_server(records: list[zemcp.AuditRecord] | None = None, auth: bool = False, **settings: Any) -> zemcp.Server:
    """A server whose tools end in each outcome; its records are appended to ``records``."""
    authorization = (
        zemcp.auth.Authorization(
            Tokens(), resource="https://mcp.example.com/mcp", authorization_servers=["https://as.example.com"]
        )
        if auth
        else None
    )
    server = zemcp.Server("audited", "1", settings=Settings(**settings), auth=authorization)
    if records is not None:
        server.on_audit(records.append)

    @server.tool
    def book(city: str, ctx: zemcp.Context) -> str:
        """Book a trip to ``city``, asking for the date."""
        return f"{city} on {ctx.elicit('Which date?', DATE, key='date')['date']}"

    @server.tool
    def hurry(ctx: zemcp.Context) -> str:
        """Ask with a short wait for the answer."""
        return ctx.elicit("Quick, which date?", DATE, timeout=0.2)["date"]

    @server.tool
    def fails(why: str) -> str:
        """Raise."""
        raise ValueError(why)

    @server.tool
    def refuses() -> str:
        """Report an error."""
        raise zemcp.ToolError("not today")

    @server.tool(scopes=["admin"])
    def wipe() -> str:
        """Needs the admin scope."""
        return "wiped"

    @server.tool(task="optional")
    def report(year: int, ctx: zemcp.Context) -> str:
        """A report that runs as a task when asked."""
        gate = GATES.get(year)
        if gate is not None:
            gate.wait(10)
            ctx.raise_if_cancelled()
        return f"report {year}"

    @server.prompt
    def greeting(name: str) -> str:
        """A greeting."""
        return f"hello {name}"

    @server.resource("test://motd")
    def motd() -> str:
        """The message of the day."""
        return "be kind"

    @server.prompt
    def letter(ctx: zemcp.Context) -> str:
        """A letter to whom the user names."""
        answer = ctx.elicit(
            "To whom?", {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}
        )
        return f"Dear {answer['to']}"

    return server


#: Events a task of ``report`` waits for, by year.
GATES: dict[int, threading.Event] = {}


def wait_for(records: list[Any], count: int, timeout: float = 10.0) -> list[Any]:
    """``records`` once it holds ``count`` (a task's record is made just after its status is set)."""
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(records) == count, records
    return records


INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": LATEST_VERSION, "capabilities": {}, "clientInfo": {"name": "p", "version": "1"}},
}


def stdio(server: zemcp.Server, *messages: dict[str, Any], user: Any = None) -> list[dict[str, Any]]:
    """Initialize over stdio (acting for ``user``), send ``messages``, end the input; every message written."""
    lines = [json.dumps(m) for m in (INIT, *messages)]
    out = io.BytesIO()
    StdioTransport(server, io.BufferedReader(io.BytesIO("\n".join(lines).encode() + b"\n")), out, user).serve()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def test_a_call_is_one_record_with_its_argument_names_in_both_eras_and_over_stdio(caplog):
    caplog.set_level("INFO", logger="zemcp.audit")
    records: list[zemcp.AuditRecord] = []
    server = make_server(records, audit_log=True)
    app = zemcp.McpApp(server)
    session = inprocess_session(app, remote_addr="127.0.0.1")
    assert session.wire.json(session.call_tool("fails", {"why": "secret-value"})[1])["result"]["isError"]
    modern = inprocess_modern(app, remote_addr="127.0.0.1")
    assert modern.result(modern.call_tool("refuses")[1])["isError"]
    answers = stdio(server, call(1, "fails", {"why": "secret-value"}))
    assert answers[-1]["result"]["isError"]
    assert [(r.method, r.tool, r.arguments, r.outcome, r.reason, r.protocol_version) for r in records] == [
        ("tools/call", "fails", ("why",), "tool_error", "ValueError", CLIENT_VERSION),
        ("tools/call", "refuses", (), "tool_error", None, MODERN_VERSION),
        ("tools/call", "fails", ("why",), "tool_error", "ValueError", LATEST_VERSION),
    ]
    http = "address 127.0.0.1"
    assert [(r.client, r.user, r.subject, r.task_id, r.values) for r in records] == [
        (http, None, None, None, None),
        (http, None, None, None, None),
        (None, None, None, None, None),
    ]
    assert records[0].session is not None and records[1].session is None
    assert all(r.duration >= 0 and r.started.tzinfo is UTC and r.outcome in OUTCOMES for r in records)
    logged = [r for r in caplog.records if r.name == "zemcp.audit"]
    assert [(r.tool, r.arguments, r.outcome, r.reason) for r in logged] == [
        ("fails", ["why"], "tool_error", "ValueError"),
        ("refuses", [], "tool_error", None),
        ("fails", ["why"], "tool_error", "ValueError"),
    ]
    assert (
        logged[0]
        .getMessage()
        .startswith(
            f"tools/call 'fails' (why) by 'address 127.0.0.1' over {CLIENT_VERSION}: tool_error (ValueError) in "
        )
    )
    assert not any("secret-value" in r.getMessage() or hasattr(r, "values") for r in logged)


def test_argument_values_are_recorded_only_when_the_setting_opts_in(caplog):
    caplog.set_level("INFO", logger="zemcp.audit")
    records: list[zemcp.AuditRecord] = []
    app = zemcp.McpApp(make_server(records, audit_log=True, audit_argument_values=True))
    modern = inprocess_modern(app)
    assert modern.result(modern.call_tool("fails", {"why": "the-value"})[1])["isError"]
    (record,) = records
    assert record.arguments == ("why",) and record.values == {"why": "the-value"}
    (logged,) = [r for r in caplog.records if r.name == "zemcp.audit"]
    assert json.loads(logged.values) == {"why": "the-value"} and "the-value" in logged.getMessage()


def test_a_declined_or_cancelled_elicitation_that_ends_the_call_is_declined_in_both_eras():
    records: list[zemcp.AuditRecord] = []
    app = zemcp.McpApp(make_server(records))
    for action in ("decline", "cancel"):
        session = inprocess_session(app)
        request_id, _, stream = session.open_call("book", {"city": "Oslo"})
        ask = stream.next_message()
        assert session.answer(ask["id"], {"action": action}).status_code == 202
        assert stream.rest()[-1]["result"]["isError"] is True
    modern = inprocess_modern(app)
    first = modern.result(modern.call_tool("book", {"city": "Oslo"})[1])
    assert first["resultType"] == "input_required"
    final = modern.result(modern.answer("book", first, {"date": {"action": "decline"}}, {"city": "Oslo"})[1])
    assert final["isError"] is True
    assert [(r.outcome, r.reason, r.protocol_version) for r in records] == [
        ("declined", "ElicitDeclined", CLIENT_VERSION),
        ("declined", "ElicitCancelled", CLIENT_VERSION),
        ("input_required", None, MODERN_VERSION),
        ("declined", "ElicitDeclined", MODERN_VERSION),
    ]


def test_an_accepted_elicitation_is_ok_and_its_duration_counts_the_wait():
    records: list[zemcp.AuditRecord] = []
    session = inprocess_session(zemcp.McpApp(make_server(records)))
    _, _, stream = session.open_call("book", {"city": "Oslo"})
    ask = stream.next_message()
    time.sleep(0.2)
    session.answer(ask["id"], {"action": "accept", "content": {"date": "May 1"}})
    assert stream.rest()[-1]["result"]["content"][0]["text"] == "Oslo on May 1"
    (record,) = records
    assert (record.outcome, record.reason, record.arguments) == ("ok", None, ("city",))
    assert record.duration >= 0.2


def test_a_call_the_client_cancels_is_cancelled():
    records: list[zemcp.AuditRecord] = []
    session = inprocess_session(zemcp.McpApp(make_server(records)))
    request_id, _, stream = session.open_call("book", {"city": "Oslo"})
    assert stream.next_message()["method"] == "elicitation/create"
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
    assert session.post(cancel).status_code == 202
    assert not [m for m in stream.rest() if m.get("id") == request_id], "a cancelled request gets no response"
    (record,) = records
    assert (record.tool, record.outcome, record.reason) == ("book", "cancelled", "RequestCancelled")


def test_a_prompt_whose_session_ends_while_it_asks_is_cancelled():
    records: list[zemcp.AuditRecord] = []
    session = inprocess_session(zemcp.McpApp(make_server(records)))
    message = {"jsonrpc": "2.0", "id": session.new_id(), "method": "prompts/get", "params": {"name": "letter"}}
    _, stream = session.open_stream(message)
    assert stream.next_message()["method"] == "elicitation/create"
    assert session.delete().status_code == 204
    stream.rest()
    (record,) = [r for r in records if r.tool == "letter"]
    assert (record.method, record.outcome, record.reason) == ("prompts/get", "cancelled", "SessionEnded")


def test_an_elicitation_without_an_answer_in_time_is_a_timeout():
    records: list[zemcp.AuditRecord] = []
    session = inprocess_session(zemcp.McpApp(make_server(records)))
    _, _, stream = session.open_call("hurry")
    assert stream.next_message()["method"] == "elicitation/create"
    assert stream.rest()[-1]["result"]["isError"] is True
    (record,) = records
    assert (record.tool, record.outcome, record.reason) == ("hurry", "timeout", "ElicitTimeout")


def test_a_refused_call_keeps_the_refusal_s_class_and_an_unknown_tool_is_an_error():
    records: list[zemcp.AuditRecord] = []
    app = zemcp.McpApp(make_server(records, auth=True))
    guest = HandshakeClient(InProcessWire(app), headers={"Authorization": "Bearer guest"})
    assert guest.initialize(capabilities={}).status_code == 200
    assert guest.call_tool("wipe")[1].status_code == 403
    assert "error" in guest.wire.json(guest.call_tool("no_such_tool")[1])
    admin = ModernClient(InProcessWire(app))
    wiped = admin.call_tool("wipe", headers={"Authorization": "Bearer admin"})[1]
    assert admin.result(wiped)["content"][0]["text"] == "wiped"
    assert [(r.tool, r.outcome, r.reason, r.user, r.subject) for r in records] == [
        ("wipe", "refused", "InsufficientScope", "guest", "guest"),
        ("no_such_tool", "error", "-32602", "guest", "guest"),
        ("wipe", "ok", None, "admin", "admin"),
    ]
    assert records[0].client == 'principal [null,"guest"]'


def test_a_task_is_recorded_when_its_run_ends_with_its_id_in_both_eras():
    records: list[zemcp.AuditRecord] = []
    app = zemcp.McpApp(make_server(records))
    session = inprocess_session(app, protocol_version="2025-11-25", capabilities={})
    created = session.wire.json(session.request("tools/call", {"name": "report", "arguments": {"year": 1}, "task": {}}))
    legacy_id = created["result"]["task"]["taskId"]
    modern = inprocess_modern(app, capabilities=TASKS)
    modern_id = modern.result(modern.call_tool("report", {"year": 2})[1])["taskId"]
    wait_for(records, 2)
    by_task = {r.task_id: r for r in records}
    assert set(by_task) == {legacy_id, modern_id}
    legacy, stateless = by_task[legacy_id], by_task[modern_id]
    assert (legacy.tool, legacy.arguments, legacy.outcome, legacy.protocol_version) == (
        "report",
        ("year",),
        "ok",
        "2025-11-25",
    )
    assert legacy.session is not None
    assert (stateless.outcome, stateless.protocol_version, stateless.session) == ("ok", MODERN_VERSION, None)


def test_a_cancelled_task_is_cancelled():
    records: list[zemcp.AuditRecord] = []
    modern = inprocess_modern(zemcp.McpApp(make_server(records)), capabilities=TASKS)
    GATES[3] = threading.Event()
    try:
        task_id = modern.result(modern.call_tool("report", {"year": 3})[1])["taskId"]
        assert "result" in modern.wire.json(modern.request("tasks/cancel", {"taskId": task_id}))
    finally:
        GATES.pop(3).set()
    (record,) = wait_for(records, 1)
    assert (record.task_id, record.outcome, record.reason) == (task_id, "cancelled", "RequestCancelled")


def test_a_task_over_stdio_is_recorded_when_its_run_ends():
    records: list[zemcp.AuditRecord] = []
    server = make_server(records)
    read_end, write_end = os.pipe()
    out = io.BytesIO()
    with open(read_end, "rb") as reader, open(write_end, "wb", buffering=0) as writer:
        serving = threading.Thread(target=StdioTransport(server, reader, out).serve)
        serving.start()
        try:
            created = call(1, "report", {"year": 4})
            created["params"]["task"] = {}
            writer.write(b"\n".join(json.dumps(m).encode() for m in (INIT, created)) + b"\n")
            # stdin stays open until the run ended: its end would end the session, and cancel the task.
            (record,) = wait_for(records, 1)
        finally:
            writer.close()
            serving.join(10)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert record.task_id == answers[-1]["result"]["task"]["taskId"]
    assert (record.outcome, record.client, record.protocol_version) == ("ok", None, LATEST_VERSION)


def test_prompts_and_resources_are_recorded_too():
    records: list[zemcp.AuditRecord] = []
    modern = inprocess_modern(zemcp.McpApp(make_server(records)))
    assert modern.rpc("prompts/get", {"name": "greeting", "arguments": {"name": "Ada"}})["messages"]
    assert modern.rpc("resources/read", {"uri": "test://motd"})["contents"]
    assert [(r.method, r.tool, r.arguments, r.outcome) for r in records] == [
        ("prompts/get", "greeting", ("name",), "ok"),
        ("resources/read", "test://motd", (), "ok"),
    ]


def test_a_hook_receives_records_with_the_log_off_and_the_log_writes_none(caplog):
    caplog.set_level("INFO", logger="zemcp.audit")
    records: list[zemcp.AuditRecord] = []
    modern = inprocess_modern(zemcp.McpApp(make_server(records)))
    assert modern.result(modern.call_tool("refuses")[1])["isError"]
    assert [r.outcome for r in records] == ["tool_error"]
    assert not [r for r in caplog.records if r.name == "zemcp.audit"]


def test_a_hook_that_raises_is_logged_and_never_breaks_the_call(caplog):
    caplog.set_level("INFO", logger="zemcp.audit")
    records: list[zemcp.AuditRecord] = []
    server = make_server()

    @server.on_audit
    def broken(record: zemcp.AuditRecord) -> None:
        raise RuntimeError("the audit table is gone")

    server.on_audit(records.append)
    app = zemcp.McpApp(server)
    session = inprocess_session(app)
    assert session.wire.json(session.call_tool("fails", {"why": "x"})[1])["result"]["content"][0]["text"] == "x"
    modern = inprocess_modern(app)
    assert modern.result(modern.call_tool("refuses")[1])["content"][0]["text"] == "not today"
    assert [r.tool for r in records] == ["fails", "refuses"], "the next hook still gets every record"
    failures = [r for r in caplog.records if r.name == "zemcp.audit" and r.levelno == logging.ERROR]
    assert len(failures) == 2 and "the audit table is gone" in caplog.text
    assert failures[0].getMessage().startswith("the audit hook test_a_hook_that_raises")


def test_a_hook_registered_after_the_server_is_served_without_the_audit_layer_is_refused():
    server = make_server()
    zemcp.McpApp(server)
    with pytest.raises(RuntimeError, match="register audit hooks before the server is served"):
        server.on_audit(print)
    logged = make_server(audit_log=True)
    zemcp.McpApp(logged)
    assert logged.on_audit(print) is print
    with pytest.raises(TypeError, match="callable"):
        logged.on_audit("not a hook")  # type: ignore[arg-type]


class DjangoLikeUser:
    def get_username(self) -> str:
        return "ada"


class FlaskLikeUser:
    username = "grace"


class PlainUser:
    def __str__(self) -> str:
        return "user #7"


@pytest.mark.parametrize(
    "user, name",
    [
        (DjangoLikeUser(), "ada"),
        (FlaskLikeUser(), "grace"),
        (zemcp.auth.Principal("alice"), "alice"),
        (PlainUser(), "user #7"),
        (None, None),
    ],
)
def test_the_user_is_recorded_by_a_readable_name(user, name):
    assert user_name(user) == name


def test_a_call_over_stdio_for_a_site_s_user_names_the_user(caplog):
    caplog.set_level("INFO", logger="zemcp.audit")
    records: list[zemcp.AuditRecord] = []
    answers = stdio(make_server(records, audit_log=True), call(1, "refuses", {}), user=DjangoLikeUser())
    assert answers[-1]["result"]["isError"]
    (record,) = records
    assert (record.user, record.subject, record.client, record.outcome) == ("ada", None, None, "tool_error")
    (logged,) = [r for r in caplog.records if r.name == "zemcp.audit"]
    assert logged.getMessage().startswith(f"tools/call 'refuses' by 'ada' over {LATEST_VERSION}: tool_error in ")
