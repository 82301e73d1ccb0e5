"""MCP tasks end to end over gunicorn: both eras, cancels, questions, owners, limits and a stop.

The server is tests/apps/tasks_app.py (``report`` works for a given time and logs the cancel
it sees to ``ZEMCP_TEST_CANCEL_LOG``; ``approve`` asks the user; ``echo`` never runs as a
task). Most tests share one gunicorn of this module (ten task threads, so that ten long
tasks run at once; a 0.2 s poll interval); the limits, the authorization and the graceful
stop start their own. Handshake-era tests use sessions of protocol 2025-11-25 (SEP-1686:
``params.task``, ``tasks/get``, ``tasks/list``, ``tasks/cancel``, ``tasks/result``);
2026-07-28 tests use :class:`tests.support.clients.ModernClient` declaring the
``io.modelcontextprotocol/tasks`` extension (SEP-2663: ``tasks/get``, ``tasks/update``,
``tasks/cancel``). Every wait polls with a deadline.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.clients import HandshakeClient, ModernClient
from tests.support.gunicorn import GunicornServer, lend
from tests.support.sse import SseStream

APP = "tests.apps.tasks_app:app"
TASKS_VERSION = "2025-11-25"
EXTENSION = "io.modelcontextprotocol/tasks"
RELATED = "io.modelcontextprotocol/related-task"
TERMINAL = {"completed", "failed", "cancelled"}
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
MISSING_CAPABILITY = -32021
#: Threads of the shared server's task pool: enough for the ten long tasks at once.
TASK_THREADS = 10
#: [seconds] the shared server's suggested poll interval (``pollInterval`` 200 ms).
POLL = 0.2
#: [seconds] how long a task may take beyond its own work before a test gives up on it.
SLACK = 10.0


# -- the servers ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cancel_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The file the shared server's ``report`` writes each cancel it sees to."""
    return tmp_path_factory.mktemp("tasks") / "cancels.log"


@pytest.fixture(scope="module")
def _tasks_server(_log_dir: Path, cancel_log: Path) -> Iterator[GunicornServer]:
    server = GunicornServer(
        {
            "task_threads": TASK_THREADS,
            "task_poll_interval": POLL,
            "keepalive_interval": 0.5,
            # Not a setting: the app reads it from the environment (Settings ignores it).
            "test_cancel_log": cancel_log,
        },
        _log_dir,
        app=APP,
    )
    yield server
    server.stop()


@pytest.fixture
def tasks_server(request: pytest.FixtureRequest, _tasks_server: GunicornServer) -> Iterator[GunicornServer]:
    """The module's gunicorn running the task app; its clients are closed after each test."""
    yield from lend(request, _tasks_server)


# -- helpers: the handshake era -------------------------------------------------------------


def session(server: GunicornServer) -> HandshakeClient:
    """A live session of protocol 2025-11-25 (the handshake-era version with tasks), with elicitation."""
    client = server.session(protocol_version=TASKS_VERSION)
    assert client.protocol_version == TASKS_VERSION
    return client


def call_message(client: HandshakeClient, name: str, arguments: dict, task: dict | None) -> dict:
    """A tools/call message, task-augmented with ``params.task`` when ``task`` is given."""
    message = client.call_message(arguments, name=name)
    if task is not None:
        message["params"]["task"] = task
    return message


def create_task(client: HandshakeClient, name: str, arguments: dict, ttl: int = 60000) -> dict:
    """Create a task by a task-augmented tools/call, which must answer at once; returns the Task."""
    response = client.post(call_message(client, name, arguments, {"ttl": ttl}))
    assert response.status_code == 200, (response.status_code, response.text)
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body["result"]) == {"task"}, body
    task = body["result"]["task"]
    assert isinstance(task["taskId"], str) and len(task["taskId"]) >= 16, task
    assert task["status"] == "working", task
    assert task["ttl"] == ttl and isinstance(task["pollInterval"], int) and task["pollInterval"] >= 1, task
    assert task["createdAt"].endswith("Z") and task["lastUpdatedAt"] >= task["createdAt"], task
    return task


def error_of(response: requests.Response) -> dict:
    """The JSON-RPC error of a JSON response."""
    assert response.headers["Content-Type"].startswith("application/json"), (response.status_code, response.text)
    body = response.json()
    assert "error" in body and "result" not in body, body
    return body["error"]


def tasks_request(client: HandshakeClient, method: str, task_id: str) -> requests.Response:
    """A tasks/* request naming ``task_id``, read in full."""
    return client.request(method, {"taskId": task_id})


def result_message(client: HandshakeClient, task_id: str) -> dict:
    """A tasks/result request message with a fresh id."""
    return {"jsonrpc": "2.0", "id": client.new_id(), "method": "tasks/result", "params": {"taskId": task_id}}


def open_result_stream(client: HandshakeClient, task_id: str) -> tuple[dict, SseStream]:
    """Open tasks/result of a running task: it must answer text/event-stream; the message and the stream."""
    message = result_message(client, task_id)
    response, stream = client.open_stream(message)
    assert response.status_code == 200, (response.status_code, response.text)
    assert stream is not None, (response.headers.get("Content-Type"), response.text)
    return message, stream


def poll(get: Callable[[], dict], done: Callable[[dict], bool], deadline: float, what: str) -> tuple[dict, list[str]]:
    """Call ``get`` (a tasks/get) every :data:`POLL` s until ``done(task)``, for at most ``deadline`` s.

    Returns:
        the last task and the statuses seen, in order, without repeats.
    """
    end = time.monotonic() + deadline
    seen: list[str] = []
    while True:
        task = get()
        if not seen or seen[-1] != task["status"]:
            seen.append(task["status"])
        if done(task):
            return task, seen
        assert time.monotonic() < end, f"{what} within {deadline} s: statuses seen {seen}, last {task}"
        time.sleep(POLL)


def handshake_get(client: HandshakeClient, task_id: str) -> Callable[[], dict]:
    """The tasks/get of ``task_id`` in ``client``'s session, as a function returning the Task."""
    return lambda: client.rpc("tasks/get", {"taskId": task_id})


def status_notifications(messages: list[dict], task_id: str) -> list[str]:
    """The statuses of the ``notifications/tasks/status`` of ``task_id`` in ``messages``, in order."""
    statuses = []
    for message in messages:
        if message.get("method") == "notifications/tasks/status":
            assert message["params"]["taskId"] == task_id, message
            statuses.append(message["params"]["status"])
    return statuses


def wait_cancel_logged(path: Path, task_id: str, deadline: float = 5.0) -> str:
    """The line ``report`` wrote for ``task_id`` when its handler saw the cancel (polled up to ``deadline`` s)."""
    end = time.monotonic() + deadline
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        found = [line for line in lines if line.startswith(task_id + " ")]
        if found:
            return found[0]
        assert time.monotonic() < end, f"the handler of {task_id} logged no cancel within {deadline} s: {lines}"
        time.sleep(0.05)


# -- helpers: 2026-07-28 --------------------------------------------------------------------


def modern(server: GunicornServer, *, extension: bool = True) -> ModernClient:
    """A 2026-07-28 client with elicitation, declaring the tasks extension unless told not to."""
    capabilities: dict[str, Any] = {"elicitation": {}}
    if extension:
        capabilities["extensions"] = {EXTENSION: {}}
    return ModernClient(server.url, capabilities=capabilities)


def modern_rpc(client: ModernClient, method: str, params: dict, headers: dict | None = None) -> dict:
    """One 2026-07-28 request; returns its JSON-RPC response (result or error)."""
    message = client.message(method, params)
    response = client.post(message, headers=headers)
    return client.reply(response, message["id"])


def modern_create(client: ModernClient, name: str, arguments: dict, headers: dict | None = None) -> dict:
    """A tools/call that must become a task at once; returns the ``CreateTaskResult``."""
    response, reply = client.call(arguments, name=name, headers=headers)
    assert response.status_code == 200, (response.status_code, response.text)
    result = reply["result"]
    assert result["resultType"] == "task" and result["status"] == "working", result
    assert isinstance(result["taskId"], str) and result["taskId"], result
    assert isinstance(result["pollIntervalMs"], int) and result["pollIntervalMs"] >= 1, result
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] > 0, result
    assert "ttl" not in result and "pollInterval" not in result, result
    return result


def modern_get(client: ModernClient, task_id: str, headers: dict | None = None) -> Callable[[], dict]:
    """The 2026-07-28 tasks/get of ``task_id``, as a function returning its result."""

    def get() -> dict:
        reply = modern_rpc(client, "tasks/get", {"taskId": task_id}, headers)
        assert "result" in reply, reply
        assert reply["result"]["taskId"] == task_id, reply
        return reply["result"]

    return get


# -- 1. a task from start to end ------------------------------------------------------------


def test_handshake_task_runs_to_its_result_polled_and_streamed(tasks_server):
    """2025-11-25: the capability and taskSupport are advertised; a 3 s report task answers at
    once ``working``, tasks/get shows working then completed, a tasks/result opened while it
    runs streams status notifications and ends with the result (related-task ``_meta``), and
    tasks/result after the end answers that result as plain JSON; tasks/list lists it."""
    client = session(tasks_server)
    capabilities = client.init_response.json()["result"]["capabilities"]
    assert capabilities["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}, capabilities
    tools = {tool["name"]: tool for tool in client.rpc("tools/list")["tools"]}
    assert tools["report"]["execution"] == {"taskSupport": "optional"}, tools["report"]
    assert tools["approve"]["execution"] == {"taskSupport": "required"}, tools["approve"]
    assert tools["echo"].get("execution", {}).get("taskSupport", "forbidden") == "forbidden", tools["echo"]

    started = time.monotonic()
    task = create_task(client, "report", {"seconds": 3})
    assert time.monotonic() - started < 2.0, "a task-augmented call must answer at once, not after the work"
    task_id = task["taskId"]
    message, stream = open_result_stream(client, task_id)

    final, seen = poll(handshake_get(client, task_id), lambda t: t["status"] in TERMINAL, 3 + SLACK, "no end")
    assert seen[0] == "working" and seen[-1] == "completed" and set(seen) == {"working", "completed"}, seen
    assert time.monotonic() - started >= 2.9, f"the 3 s report ended after {time.monotonic() - started:.2f} s"
    assert final["lastUpdatedAt"] > final["createdAt"], final

    messages = stream.rest()
    assert stream.ended
    statuses = status_notifications(messages, task_id)
    assert statuses[0] == "working" and statuses[-1] == "completed", messages
    last = messages[-1]
    assert last["id"] == message["id"] and "result" in last, messages
    assert last["result"]["content"] == [{"type": "text", "text": "report ready after 3 s"}], last
    assert last["result"]["isError"] is False
    assert last["result"]["_meta"][RELATED] == {"taskId": task_id}, last

    response = tasks_request(client, "tasks/result", task_id)
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("application/json")
    assert response.json()["result"] == last["result"], response.json()

    listed = {t["taskId"]: t for t in client.rpc("tasks/list")["tasks"]}
    assert listed[task_id]["status"] == "completed", listed


def test_modern_task_runs_to_its_result(tasks_server):
    """2026-07-28 with the extension: a 3 s report answers at once ``resultType: task``;
    tasks/get shows working then completed, and once completed carries the call's result."""
    client = modern(tasks_server)
    started = time.monotonic()
    task = modern_create(client, "report", {"seconds": 3})
    assert time.monotonic() - started < 2.0, "a task-creating call must answer at once, not after the work"
    get = modern_get(client, task["taskId"])
    final, seen = poll(get, lambda t: t["status"] in TERMINAL, 3 + SLACK, "no end")
    assert seen[0] == "working" and seen[-1] == "completed" and set(seen) == {"working", "completed"}, seen
    assert time.monotonic() - started >= 2.9
    assert final["result"]["content"] == [{"type": "text", "text": "report ready after 3 s"}], final
    assert final["result"]["isError"] is False, final
    assert "inputRequests" not in final and "error" not in final, final


# -- 2. cancelled while it runs -------------------------------------------------------------


def test_handshake_cancel_stops_the_handler(tasks_server, cancel_log):
    """2025-11-25: tasks/cancel of a running report answers the Task ``cancelled``, tasks/get
    stays cancelled, the handler sees RequestCancelled at once (it logs it), a second cancel
    is -32602, and tasks/result of the cancelled task is -32602."""
    client = session(tasks_server)
    task_id = create_task(client, "report", {"seconds": 30})["taskId"]
    time.sleep(0.3)  # let the handler take a few steps
    cancelled = client.rpc("tasks/cancel", {"taskId": task_id})
    assert cancelled["taskId"] == task_id and cancelled["status"] == "cancelled", cancelled
    line = wait_cancel_logged(cancel_log, task_id)
    assert line.startswith(f"{task_id} RequestCancelled: "), line
    assert client.rpc("tasks/get", {"taskId": task_id})["status"] == "cancelled"
    again = error_of(tasks_request(client, "tasks/cancel", task_id))
    assert again["code"] == INVALID_PARAMS and "cancelled" in again["message"], again
    result = error_of(tasks_request(client, "tasks/result", task_id))
    assert result["code"] == INVALID_PARAMS and "cancelled" in result["message"], result
    assert result["data"]["_meta"][RELATED] == {"taskId": task_id}, result


def test_a_listen_stream_follows_a_modern_task_to_its_end(tasks_server):
    """subscriptions/listen with notifications.taskIds acknowledges the caller's own task (not an
    unknown id) and carries notifications/tasks at its changes, the last one completed with the
    result; without the extension the same request is refused with -32021."""
    client = modern(tasks_server)
    created = modern_create(client, "report", {"seconds": 1})
    message = client.message(
        "subscriptions/listen", {"notifications": {"taskIds": [created["taskId"], "no-such-task"]}}
    )
    response = requests.post(
        client.url, data=json.dumps(message), headers=client.headers(message), stream=True, timeout=(5, 10)
    )
    assert response.headers["Content-Type"].startswith("text/event-stream"), response.text
    stream = SseStream.from_requests(response, requests.Session())
    try:
        ack = stream.next_message()
        assert ack["method"] == "notifications/subscriptions/acknowledged", ack
        assert ack["params"]["notifications"]["taskIds"] == [created["taskId"]], ack
        deadline = time.monotonic() + SLACK
        last = None
        while last is None or last["params"]["status"] != "completed":
            assert time.monotonic() < deadline, f"no completed notification; last {last}"
            last = stream.next_message()
            assert last is not None and last["method"] == "notifications/tasks", last
            assert last["params"]["taskId"] == created["taskId"], last
        assert last["params"]["result"]["content"][0]["text"] == "report ready after 1 s", last
    finally:
        stream.close()
    refused = modern_rpc(
        modern(tasks_server, extension=False), "subscriptions/listen", {"notifications": {"taskIds": []}}
    )
    assert refused["error"]["code"] == MISSING_CAPABILITY, refused


def test_modern_cancel_stops_the_handler(tasks_server, cancel_log):
    """2026-07-28: tasks/cancel of a running report is acknowledged with an empty complete
    result, tasks/get shows ``cancelled``, and the handler saw RequestCancelled."""
    client = modern(tasks_server)
    task_id = modern_create(client, "report", {"seconds": 30})["taskId"]
    time.sleep(0.3)
    ack = modern_rpc(client, "tasks/cancel", {"taskId": task_id})
    assert ack["result"].get("resultType") == "complete", ack
    assert "status" not in ack["result"], ack
    line = wait_cancel_logged(cancel_log, task_id)
    assert line.startswith(f"{task_id} RequestCancelled: "), line
    task = modern_get(client, task_id)()
    assert task["status"] == "cancelled" and "result" not in task, task
    # A cancel of a task that has ended is acknowledged too, and changes nothing.
    assert modern_rpc(client, "tasks/cancel", {"taskId": task_id})["result"]["resultType"] == "complete"


def test_ending_the_session_cancels_its_running_tasks(tasks_server, cancel_log):
    """DELETE of a 2025-11-25 session cancels its running task (nobody could read it any more):
    the handler sees RequestCancelled saying the session ended."""
    client = session(tasks_server)
    task_id = create_task(client, "report", {"seconds": 30})["taskId"]
    time.sleep(0.3)
    assert client.delete().status_code in (200, 204)
    line = wait_cancel_logged(cancel_log, task_id)
    assert line.startswith(f"{task_id} RequestCancelled: ") and "session ended" in line, line


def test_a_tool_error_fails_a_handshake_task_but_completes_a_modern_one(tasks_server):
    """``fail`` (an isError result): in 2025-11-25 the task ends ``failed`` with the error text
    as statusMessage and tasks/result answers the isError result; in 2026-07-28 the task ends
    ``completed`` and tasks/get carries the isError result."""
    client = session(tasks_server)
    task_id = create_task(client, "fail", {})["taskId"]
    final, _ = poll(handshake_get(client, task_id), lambda t: t["status"] in TERMINAL, SLACK, "no end")
    assert final["status"] == "failed", final
    assert "the report could not be built" in final.get("statusMessage", ""), final
    result = client.rpc("tasks/result", {"taskId": task_id})
    assert result["isError"] is True and "the report could not be built" in result["content"][0]["text"], result
    assert result["_meta"][RELATED] == {"taskId": task_id}, result

    other = modern(tasks_server)
    modern_id = modern_create(other, "fail", {})["taskId"]
    done, _ = poll(modern_get(other, modern_id), lambda t: t["status"] in TERMINAL, SLACK, "no end")
    assert done["status"] == "completed" and done["result"]["isError"] is True, done
    assert "the report could not be built" in done["result"]["content"][0]["text"], done
    assert "error" not in done, done


# -- 3. a task that asks the user -----------------------------------------------------------


def test_handshake_task_asks_on_the_result_stream(tasks_server):
    """2025-11-25: ``approve`` goes input_required; its elicitation/create comes on the open
    tasks/result stream with the related-task ``_meta``; the POSTed answer (202) lets it finish
    and the stream ends with ``approved <item>``."""
    client = session(tasks_server)
    task_id = create_task(client, "approve", {"item": "invoice 7"})["taskId"]
    message, stream = open_result_stream(client, task_id)
    before = []
    while (item := stream.next_message()) is not None and item.get("method") != "elicitation/create":
        before.append(item)
    assert item is not None, f"the stream ended without a question: {before}"
    question = item
    assert question["params"]["message"] == "Approve invoice 7?", question
    assert question["params"]["requestedSchema"]["properties"] == {"ok": {"type": "boolean"}}, question
    assert question["params"]["_meta"][RELATED] == {"taskId": task_id}, question
    assert client.rpc("tasks/get", {"taskId": task_id})["status"] == "input_required"

    answer = client.answer(question["id"], {"action": "accept", "content": {"ok": True}})
    assert answer.status_code == 202, (answer.status_code, answer.text)
    after = stream.rest()
    final = after[-1]
    assert final["id"] == message["id"], after
    assert final["result"]["content"] == [{"type": "text", "text": "approved invoice 7"}], final
    assert final["result"]["_meta"][RELATED] == {"taskId": task_id}, final
    statuses = status_notifications(before + after, task_id)
    assert "input_required" in statuses and statuses[-1] == "completed", statuses
    assert client.rpc("tasks/get", {"taskId": task_id})["status"] == "completed"


def test_handshake_task_asks_the_model_and_for_roots_on_the_result_stream(tasks_server):
    """A task's sampling/createMessage and roots/list requests go out together on the
    tasks/result stream with the related-task _meta; the POSTed answers reach the handler."""
    client = HandshakeClient(tasks_server.url)
    response = client.initialize(
        protocol_version=TASKS_VERSION, capabilities={"sampling": {}, "roots": {}, "elicitation": {}}
    )
    assert response.status_code == 200, response.text
    task_id = create_task(client, "consult", {})["taskId"]
    message, stream = open_result_stream(client, task_id)
    asked = {}
    deadline = time.monotonic() + SLACK
    while len(asked) < 2:
        assert time.monotonic() < deadline, f"the questions never came: {asked}"
        received = stream.next_message()
        assert received is not None, "the stream ended before the questions"
        if "id" in received and "method" in received:
            assert received["params"]["_meta"][RELATED] == {"taskId": task_id}, received
            asked[received["method"]] = received["id"]
    assert set(asked) == {"sampling/createMessage", "roots/list"}
    sampled = {"role": "assistant", "content": {"type": "text", "text": "fine"}, "model": "m"}
    roots = {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]}
    for method, result in (("sampling/createMessage", sampled), ("roots/list", roots)):
        answer = client.post({"jsonrpc": "2.0", "id": asked[method], "result": result})
        assert answer.status_code == 202, answer.text
    final = [m for m in stream.rest() if m.get("id") == message["id"]]
    assert final and final[0]["result"]["content"][0]["text"] == "fine; 2 root(s)", final


def test_modern_task_asks_by_input_requests_and_update(tasks_server):
    """2026-07-28: ``approve`` shows its question as ``inputRequests.approve`` on tasks/get;
    tasks/update hands in the answer (acknowledged ``complete``); the task completes with
    ``approved <item>``."""
    client = modern(tasks_server)
    task_id = modern_create(client, "approve", {"item": "invoice 8"})["taskId"]
    get = modern_get(client, task_id)
    asking, _ = poll(get, lambda t: t["status"] != "working", SLACK, "no question")
    assert asking["status"] == "input_required", asking
    question = asking["inputRequests"]["approve"]
    assert question["method"] == "elicitation/create", asking
    assert question["params"]["message"] == "Approve invoice 8?", asking
    assert question["params"]["requestedSchema"]["required"] == ["ok"], asking

    ack = modern_rpc(
        client,
        "tasks/update",
        {"taskId": task_id, "inputResponses": {"approve": {"action": "accept", "content": {"ok": True}}}},
    )
    assert ack["result"].get("resultType") == "complete", ack
    final, _ = poll(get, lambda t: t["status"] in TERMINAL, SLACK, "no end after the answer")
    assert final["status"] == "completed", final
    assert final["result"]["content"] == [{"type": "text", "text": "approved invoice 8"}], final
    assert "inputRequests" not in final, final


# -- 4. owners ------------------------------------------------------------------------------


def test_handshake_task_is_invisible_to_another_session_and_era(tasks_server):
    """A task belongs to its session: another 2025-11-25 session gets -32602 for tasks/get,
    tasks/result and tasks/cancel, and its tasks/list does not show it; its cancel changes
    nothing; a 2026-07-28 client does not find it either, nor the session a 2026 task."""
    owner = session(tasks_server)
    other = session(tasks_server)
    task_id = create_task(owner, "report", {"seconds": 1})["taskId"]
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        error = error_of(tasks_request(other, method, task_id))
        assert error["code"] == INVALID_PARAMS, (method, error)
    assert task_id not in {t["taskId"] for t in other.rpc("tasks/list")["tasks"]}
    assert task_id in {t["taskId"] for t in owner.rpc("tasks/list")["tasks"]}
    stranger = modern(tasks_server)
    assert modern_rpc(stranger, "tasks/get", {"taskId": task_id})["error"]["code"] == INVALID_PARAMS
    assert modern_rpc(stranger, "tasks/cancel", {"taskId": task_id})["error"]["code"] == INVALID_PARAMS
    final, _ = poll(handshake_get(owner, task_id), lambda t: t["status"] in TERMINAL, 1 + SLACK, "no end")
    assert final["status"] == "completed", "the other session's cancel must not reach the task"

    modern_id = modern_create(stranger, "whoami", {})["taskId"]
    assert error_of(tasks_request(owner, "tasks/get", modern_id))["code"] == INVALID_PARAMS
    assert modern_id not in {t["taskId"] for t in owner.rpc("tasks/list")["tasks"]}


def test_modern_task_is_invisible_to_another_principal(start_server, oauth_server):
    """2026-07-28 with authorization: a task Alice created is unknown (-32602) to Bob's
    tasks/get, tasks/update and tasks/cancel; Bob's cancel does not stop it; Alice reads it."""
    server = start_server(
        app=APP,
        auth="jwt",
        auth_issuer=oauth_server.issuer,
        auth_jwks_url=oauth_server.jwks_url,
        auth_scopes="mcp",
        task_poll_interval=POLL,
    )
    alice = {"Authorization": "Bearer " + oauth_server.mint_token(server.url, claims={"sub": "alice"})}
    bob = {"Authorization": "Bearer " + oauth_server.mint_token(server.url, claims={"sub": "bob"})}
    client = modern(server)
    task_id = modern_create(client, "report", {"seconds": 1}, headers=alice)["taskId"]
    for method, params in (
        ("tasks/get", {}),
        ("tasks/update", {"inputResponses": {}}),
        ("tasks/cancel", {}),
    ):
        reply = modern_rpc(client, method, {"taskId": task_id, **params}, headers=bob)
        assert reply.get("error", {}).get("code") == INVALID_PARAMS, (method, reply)
    final, _ = poll(modern_get(client, task_id, alice), lambda t: t["status"] in TERMINAL, 1 + SLACK, "no end")
    assert final["status"] == "completed", final
    assert final["result"]["content"][0]["text"] == "report ready after 1 s", final


# -- 5. long tasks leave the answers free ---------------------------------------------------


def test_ten_long_tasks_leave_pings_and_calls_answered_at_once(tasks_server):
    """Ten 4 s report tasks run at once on the task pool (none waits for a thread) while a
    ping in the session and a plain echo call (handshake and 2026-07-28) each answer in well
    under a second; then all ten complete, together, not one after the other."""
    client = session(tasks_server)
    started = time.monotonic()
    ids = [create_task(client, "report", {"seconds": 4})["taskId"] for _ in range(10)]
    created = time.monotonic() - started
    assert created < 3.0, f"creating ten tasks took {created:.2f} s"

    timings = {}
    t0 = time.monotonic()
    assert client.rpc("ping") == {}
    timings["ping"] = time.monotonic() - t0
    t0 = time.monotonic()
    result = client.rpc("tools/call", {"name": "echo", "arguments": {"text": "still here"}})
    timings["echo"] = time.monotonic() - t0
    assert result["content"][0]["text"] == "still here", result
    t0 = time.monotonic()
    plain = modern(tasks_server).call_result({"text": "modern too"}, name="echo")
    timings["modern echo"] = time.monotonic() - t0
    assert plain["content"][0]["text"] == "modern too", plain

    tasks = {t["taskId"]: t for t in client.rpc("tasks/list")["tasks"]}
    running = [tasks[i] for i in ids]
    assert all(t["status"] == "working" for t in running), (
        f"all ten must still run while the answers came ({time.monotonic() - started:.2f} s in): {running}"
    )
    assert not [t for t in running if "free task thread" in t.get("statusMessage", "")], running
    assert all(seconds < 2.0 for seconds in timings.values()), timings

    for task_id in ids:
        final, _ = poll(handshake_get(client, task_id), lambda t: t["status"] in TERMINAL, 4 + SLACK, "no end")
        assert final["status"] == "completed", final
    total = time.monotonic() - started
    assert total < 8.0, f"ten 4 s tasks on ten threads took {total:.2f} s: they did not run at once"


# -- 6. limits ------------------------------------------------------------------------------


def test_tasks_beyond_max_tasks_get_429_until_they_expire(start_server):
    """With max_tasks=2 (client_share=1) a third task, in either era, is refused with HTTP 429
    and Retry-After while two are kept; once they ended and their 1 s ttl passed, a new one
    is taken."""
    server = start_server(app=APP, max_tasks=2, client_share=1, task_poll_interval=POLL)
    client = session(server)
    first = [create_task(client, "whoami", {}, ttl=1000)["taskId"] for _ in range(2)]
    kept_until = time.monotonic() + 1.0

    third = client.post(call_message(client, "whoami", {}, {"ttl": 1000}))
    assert third.status_code == 429, (third.status_code, third.text)
    assert int(third.headers["Retry-After"]) > 0, third.headers
    response, _ = modern(server).call({}, name="whoami")
    assert response.status_code == 429, (response.status_code, response.text)
    assert int(response.headers["Retry-After"]) > 0, response.headers

    for task_id in first:
        poll(handshake_get(client, task_id), lambda t: t["status"] in TERMINAL, SLACK, "no end")
    time.sleep(max(0.0, kept_until - time.monotonic()) + 0.1)
    deadline = time.monotonic() + 5.0
    while True:
        again = client.post(call_message(client, "whoami", {}, {"ttl": 1000}))
        if again.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert again.status_code == 200 and again.json()["result"]["task"]["status"] == "working", again.text


def test_one_client_holds_only_its_share_of_max_tasks(start_server):
    """With max_tasks=4 and client_share=0.5 one client (one address) holds two tasks: its third
    gets 429 with Retry-After saying it holds its share, while a client from another loopback
    address still gets one."""
    server = start_server(app=APP, max_tasks=4, client_share=0.5)
    first = session(server)
    for _ in range(2):
        create_task(first, "whoami", {})
    refused = first.post(call_message(first, "whoami", {}, {"ttl": 60000}))
    assert refused.status_code == 429, (refused.status_code, refused.text)
    assert int(refused.headers["Retry-After"]) > 0, refused.headers
    assert "share" in error_of(refused)["message"], refused.text
    second = server.client(source="127.0.0.2")
    assert second.initialize(protocol_version=TASKS_VERSION).status_code == 200
    create_task(second, "whoami", {})


# -- 7. refusals ----------------------------------------------------------------------------


def test_handshake_refusals(tasks_server):
    """2025-11-25: ``task`` on echo (taskSupport forbidden) and approve without ``task`` are
    -32601; tasks/get, tasks/result and tasks/cancel of an unknown id are -32602. A 2025-06-18
    session has no tasks: tasks/get is -32601 and a ``task`` on report is ignored."""
    client = session(tasks_server)
    echo = client.post(call_message(client, "echo", {"text": "x"}, {"ttl": 60000}))
    assert error_of(echo)["code"] == METHOD_NOT_FOUND, echo.text
    approve = client.post(call_message(client, "approve", {"item": "x"}, None))
    assert error_of(approve)["code"] == METHOD_NOT_FOUND, approve.text
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        error = error_of(tasks_request(client, method, "no-such-task"))
        assert error["code"] == INVALID_PARAMS, (method, error)

    older = tasks_server.session()
    assert older.protocol_version == "2025-06-18"
    assert "tasks" not in older.init_response.json()["result"]["capabilities"]
    assert error_of(tasks_request(older, "tasks/get", "no-such-task"))["code"] == METHOD_NOT_FOUND
    plain = older.rpc("tools/call", {"name": "report", "arguments": {"seconds": 0.1}, "task": {"ttl": 60000}})
    assert plain["content"][0]["text"] == "report ready after 0.1 s", plain


def test_modern_refusals(tasks_server):
    """2026-07-28: approve without the extension is -32021 naming it in
    ``data.requiredCapabilities``, while report then runs as a plain call; tasks/get without
    the extension is -32021; tasks/get of an unknown id is -32602; tasks/result and tasks/list
    are not methods of the extension (-32601)."""
    bare = modern(tasks_server, extension=False)
    _, refused = bare.call({"item": "x"}, name="approve")
    assert refused["error"]["code"] == MISSING_CAPABILITY, refused
    assert refused["error"]["data"]["requiredCapabilities"]["extensions"] == {EXTENSION: {}}, refused
    plain = bare.call_result({"seconds": 0.1}, name="report")
    assert plain["resultType"] == "complete" and plain["content"][0]["text"] == "report ready after 0.1 s", plain
    assert modern_rpc(bare, "tasks/get", {"taskId": "no-such-task"})["error"]["code"] == MISSING_CAPABILITY

    client = modern(tasks_server)
    assert modern_rpc(client, "tasks/get", {"taskId": "no-such-task"})["error"]["code"] == INVALID_PARAMS
    for method in ("tasks/result", "tasks/list"):
        reply = modern_rpc(client, method, {"taskId": "no-such-task"} if method == "tasks/result" else {})
        assert reply.get("error", {}).get("code") == METHOD_NOT_FOUND, (method, reply)


# -- 8. a graceful stop ---------------------------------------------------------------------


def test_graceful_stop_lets_a_running_task_finish_on_its_stream(start_server):
    """SIGTERM to the gunicorn master while a 2 s report runs and its tasks/result stream is
    open: the task finishes within the graceful stop, the stream ends with its completed
    result, and gunicorn then exits."""
    server = start_server(app=APP, keepalive_interval=0.5)
    client = session(server)
    task_id = create_task(client, "report", {"seconds": 2})["taskId"]
    message, stream = open_result_stream(client, task_id)
    first = stream.next_message()
    assert first is not None and first.get("method") == "notifications/tasks/status", first
    stopped = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    messages = [first, *stream.rest()]
    final = messages[-1]
    assert final.get("id") == message["id"] and "result" in final, messages
    assert final["result"]["content"] == [{"type": "text", "text": "report ready after 2 s"}], final
    assert status_notifications(messages, task_id)[-1] == "completed", messages
    server.proc.wait(timeout=15)
    assert time.monotonic() - stopped < 15
