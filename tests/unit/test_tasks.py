"""Tasks without a server process: the record store, the wire shapes of each era, tool and
capability declarations, and the runner (create, cancel, answer, stop) driven in-process
through werkzeug's test client. The same flows over real HTTP under gunicorn are in
tests/integration/test_http_tasks.py."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest

import zemcp
from tests.apps.tasks_app import RAN, make_server
from tests.support.clients import HandshakeClient, ModernClient
from tests.support.wires import InProcessWire
from zemcp.core.task_writes import KEPT, KeptWrites
from zemcp.core.tasks import STOPPED_MESSAGE, TaskRunner, task_object
from zemcp.protocol.tasks import EXTENSION, timestamp
from zemcp.state.localtasks import LocalTasks
from zemcp.state.tasks import TaskLimitReached, TaskRecord
from zemcp.state.unavailable import StateUnavailable

MODERN = "2026-07-28"
TASKS = {"extensions": {EXTENSION: {}}, "elicitation": {}}
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def record(
    task_id: str = "t1", client: str | None = "c", ttl: float | None = 60.0, modern: bool = True, **fields
) -> TaskRecord:
    return TaskRecord(
        id=task_id,
        owner=None,
        session=None,
        client=client,
        modern=modern,
        tool="report",
        created=time.time(),
        ttl=ttl,
        poll=1.0,
        **fields,
    )


# -- the store --------------------------------------------------------------------------


def test_the_store_hands_out_copies_and_applies_changes_at_once():
    store = LocalTasks(10, 1.0)
    store.create(record())
    copy = store.get("t1")
    assert copy is not None and copy.status == "working"
    copy.status = "completed"
    assert store.get("t1").status == "working", "a copy's change must not reach the store"
    after = store.update("t1", lambda r: setattr(r, "status", "completed") or True)
    assert after.status == "completed" and after.version == 1
    assert store.get("t1").status == "completed"
    assert store.update("missing", lambda r: True) is None


def test_the_store_caps_tasks_per_process_and_per_client():
    store = LocalTasks(4, 0.5)
    store.create(record("a", client="x"))
    store.create(record("b", client="x"))
    with pytest.raises(TaskLimitReached, match="this client holds its share of 2 tasks"):
        store.create(record("c", client="x"))
    store.create(record("d", client="y"))
    store.create(record("e", client="y"))
    with pytest.raises(TaskLimitReached, match="maximum of 4 tasks \\(ZEMCP_MAX_TASKS\\)"):
        store.create(record("f", client="z"))
    assert len(store) == 4


def test_finished_tasks_are_forgotten_after_their_ttl_and_running_ones_are_kept():
    store = LocalTasks(10, 1.0)
    store.create(record("done", ttl=5.0))
    store.create(record("running", ttl=5.0))
    store.update("done", lambda r: setattr(r, "status", "completed") or True)
    assert store.sweep(time.time() + 1) == 0
    assert store.sweep(time.time() + 6) == 1
    assert store.get("done") is None
    assert store.get("running") is not None, "a running task is kept until it ends"


def test_a_waiter_wakes_at_the_change_and_not_before():
    store = LocalTasks(10, 1.0)
    store.create(record())
    seen = store.get("t1").version
    threading.Timer(0.1, lambda: store.update("t1", lambda r: setattr(r, "message", "x") or True)).start()
    start = time.monotonic()
    changed = store.wait("t1", seen, 5.0)
    assert changed.message == "x"
    assert time.monotonic() - start < 2.0
    unchanged = store.wait("t1", changed.version, 0.05)
    assert unchanged.version == changed.version


# -- wire shapes --------------------------------------------------------------------------


def test_each_era_gets_its_own_task_fields():
    modern = task_object(record(ttl=2.5))
    assert modern["ttlMs"] == 2500 and modern["pollIntervalMs"] == 1000
    assert "ttl" not in modern and "pollInterval" not in modern
    assert ISO.match(modern["createdAt"]) and ISO.match(modern["lastUpdatedAt"])
    legacy = task_object(record(ttl=None, modern=False))
    assert legacy["ttl"] is None and legacy["pollInterval"] == 1000 and "ttlMs" not in legacy
    assert timestamp(0.5) == "1970-01-01T00:00:00.500Z"


def test_a_tool_refuses_an_unknown_task_support():
    server = zemcp.Server("t")
    with pytest.raises(ValueError, match="task must be one of 'forbidden', 'optional', 'required'"):
        server.tool(task="sometimes")(lambda: "x")


# -- in-process, both eras ---------------------------------------------------------------


class Http:
    """The task server in process (werkzeug, a server that serves one request at a time) and a
    client of each era on it, whose answers come back as JSON-RPC bodies."""

    def __init__(self, **settings):
        self.server = make_server(**settings)
        self.wire = InProcessWire(zemcp.McpApp(self.server), multithread=False)
        self.handshake = HandshakeClient(self.wire, "t")
        self.stateless = ModernClient(self.wire, "t", capabilities=TASKS)

    @property
    def session(self) -> str | None:
        """The handshake client's session id, once initialized."""
        return self.handshake.session_id

    def initialize(self, version: str = "2025-11-25") -> dict:
        return self.wire.json(self.handshake.initialize(protocol_version=version, initialized=False))["result"]

    def legacy(self, method: str, params: dict | None = None) -> dict:
        return self.wire.json(self.handshake.request(method, params or {}))

    def modern(self, method: str, params: dict | None = None, capabilities: dict | None = None) -> dict:
        return self.wire.json(self.stateless.request(method, params, capabilities=capabilities))

    def until(self, get, done, timeout: float = 10.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            task = get()
            if done(task) or time.monotonic() > deadline:
                return task
            time.sleep(0.05)


def test_capabilities_and_tool_lists_show_tasks_only_where_the_version_has_them():
    http = Http()
    assert http.initialize()["capabilities"]["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    listed = {t["name"]: t.get("execution") for t in http.legacy("tools/list")["result"]["tools"]}
    assert listed["approve"] == {"taskSupport": "required"} and listed["echo"] is None
    older = Http()
    assert "tasks" not in older.initialize("2025-06-18")["capabilities"]
    assert all("execution" not in t for t in older.legacy("tools/list")["result"]["tools"])
    discover = Http().stateless.initialize()["capabilities"]
    assert discover["extensions"] == {EXTENSION: {}} and "tasks" not in discover
    assert all("execution" not in t for t in Http().stateless.list_tools())
    plain = zemcp.Server("plain")
    plain.tool(name="x")(lambda: "x")
    assert "tasks" not in plain.capabilities("2025-11-25") and "extensions" not in plain.capabilities(MODERN)


def test_a_modern_task_asks_through_tasks_update_and_completes():
    http = Http()
    created = http.modern("tools/call", {"name": "approve", "arguments": {"item": "box"}})["result"]
    assert created["resultType"] == "task" and created["status"] in ("working", "input_required")
    task_id = created["taskId"]

    def get():
        return http.modern("tasks/get", {"taskId": task_id})["result"]

    parked = http.until(get, lambda t: t["status"] == "input_required")
    assert list(parked["inputRequests"]) == ["approve"]
    assert parked["inputRequests"]["approve"]["method"] == "elicitation/create"
    ack = http.modern(
        "tasks/update",
        {"taskId": task_id, "inputResponses": {"approve": {"action": "accept", "content": {"ok": True}}, "x": 1}},
    )["result"]
    assert ack["resultType"] == "complete" and "taskId" not in ack
    done = http.until(get, lambda t: t["status"] == "completed")
    assert done["result"]["content"][0]["text"] == "approved box"


def test_modern_gates_run_before_the_task_id_and_removed_methods_are_unknown():
    http = Http()
    refused = http.modern("tasks/get", {"taskId": "nope"}, capabilities={})["error"]
    assert refused["code"] == -32021 and refused["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    assert http.modern("tasks/get", {"taskId": "nope"})["error"]["code"] == -32602
    assert http.modern("tasks/result", {"taskId": "nope"})["error"]["code"] == -32601
    assert http.modern("tasks/list")["error"]["code"] == -32601
    required = http.modern("tools/call", {"name": "approve", "arguments": {"item": "a"}}, capabilities={})["error"]
    assert required["code"] == -32021
    plain = http.modern("tools/call", {"name": "report", "arguments": {"seconds": 0}}, capabilities={})["result"]
    assert plain["resultType"] == "complete" and plain["content"][0]["text"] == "report ready after 0 s"
    tool_error = http.modern("tools/call", {"name": "fail", "arguments": {}})["result"]
    ended = http.until(
        lambda: http.modern("tasks/get", {"taskId": tool_error["taskId"]})["result"],
        lambda t: t["status"] != "working",
    )
    assert ended["status"] == "completed" and ended["result"]["isError"] is True


def test_a_session_task_is_cancelled_refused_twice_and_its_tool_error_fails_it():
    http = Http()
    http.initialize()
    task = http.legacy("tools/call", {"name": "report", "arguments": {"seconds": 30}, "task": {"ttl": 5000}})
    task = task["result"]["task"]
    assert task["ttl"] == 5000 and task["status"] == "working"
    cancelled = http.legacy("tasks/cancel", {"taskId": task["taskId"]})["result"]
    assert cancelled["status"] == "cancelled"
    again = http.legacy("tasks/cancel", {"taskId": task["taskId"]})["error"]
    assert again["code"] == -32602 and "already ended (cancelled)" in again["message"]
    failing = http.legacy("tools/call", {"name": "fail", "arguments": {}, "task": {}})["result"]["task"]
    ended = http.until(
        lambda: http.legacy("tasks/get", {"taskId": failing["taskId"]})["result"], lambda t: t["status"] != "working"
    )
    assert ended["status"] == "failed" and ended["statusMessage"] == "the report could not be built"
    result = http.legacy("tasks/result", {"taskId": failing["taskId"]})["result"]
    assert result["isError"] is True
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": failing["taskId"]}
    assert [t["taskId"] for t in http.legacy("tasks/list")["result"]["tasks"]] == [task["taskId"], failing["taskId"]]
    assert (
        http.legacy("tools/call", {"name": "echo", "arguments": {"text": "x"}, "task": {}})["error"]["code"] == -32601
    )
    assert http.legacy("tools/call", {"name": "approve", "arguments": {"item": "x"}})["error"]["code"] == -32601


def test_a_stop_without_grace_fails_the_running_tasks_and_takes_no_new_one():
    http = Http()
    task_id = http.modern("tools/call", {"name": "report", "arguments": {"seconds": 30}})["result"]["taskId"]
    http.until(lambda: http.modern("tasks/get", {"taskId": task_id})["result"], lambda t: "statusMessage" in t, 2.0)
    assert http.server.tasks.stop(0.0) == 1
    failed = http.modern("tasks/get", {"taskId": task_id})["result"]
    assert failed["status"] == "failed" and failed["statusMessage"] == STOPPED_MESSAGE
    assert failed["error"]["code"] == -32603
    refused = http.stateless.call_tool("report", {"seconds": 1})[1]
    assert refused.status_code == 503 and "stopping" in json.loads(refused.get_data())["error"]["message"]


def test_ending_a_session_cancels_its_running_tasks():
    http = Http()
    http.initialize()
    task = http.legacy("tools/call", {"name": "report", "arguments": {"seconds": 30}, "task": {}})["result"]["task"]
    assert http.server.end_session(http.session)
    record = http.server.tasks.store.get(task["taskId"])
    assert record.status == "cancelled" and "session ended" in record.message


def test_progress_is_where_a_cancelled_task_stops_even_without_a_progress_token():
    http = Http()
    task_id = http.modern("tools/call", {"name": "spin", "arguments": {}})["result"]["taskId"]
    http.until(lambda: {"n": http.server.tasks.running}, lambda t: t["n"] == 1, 2.0)
    http.modern("tasks/cancel", {"taskId": task_id})
    ended = http.until(lambda: {"n": http.server.tasks.running}, lambda t: t["n"] == 0, 3.0)
    assert ended["n"] == 0, "the handler kept its task thread after the cancel"
    assert http.modern("tasks/get", {"taskId": task_id})["result"]["status"] == "cancelled"


def test_a_session_task_refuses_bad_arguments_and_ttls_and_keeps_its_session_alive():
    http = Http()
    http.initialize()
    refused = http.legacy("tools/call", {"name": "report", "arguments": {"seconds": "soon"}, "task": {}})["error"]
    assert refused["code"] == -32602 and refused["message"].startswith("Invalid params: no task was created")
    for ttl in ("100", True, {"a": 1}):
        bad = http.legacy("tools/call", {"name": "report", "arguments": {"seconds": 0}, "task": {"ttl": ttl}})
        assert bad["error"]["code"] == -32602 and "params.task.ttl" in bad["error"]["message"], bad
    short = http.legacy("tools/call", {"name": "report", "arguments": {"seconds": 30}, "task": {"ttl": -5}})
    task = short["result"]["task"]
    assert task["ttl"] == 1000, "a ttl below 1 s is raised to 1 s"
    session = http.server.sessions.get(http.session)
    assert session.idle_for(time.monotonic() + 3600) == 0.0, "a session with a running task is never idle"
    http.legacy("tasks/cancel", {"taskId": task["taskId"]})
    http.until(lambda: {"n": http.server.tasks.running}, lambda t: t["n"] == 0, 3.0)
    assert session.idle_for(time.monotonic() + 3600) > 0


def test_an_answer_that_is_no_object_is_refused_for_an_open_question():
    http = Http()
    task_id = http.modern("tools/call", {"name": "approve", "arguments": {"item": "a"}})["result"]["taskId"]
    http.until(
        lambda: http.modern("tasks/get", {"taskId": task_id})["result"], lambda t: t["status"] == "input_required"
    )
    refused = http.modern("tasks/update", {"taskId": task_id, "inputResponses": {"approve": "yes"}})["error"]
    assert refused["code"] == -32602 and "inputResponses['approve'] must be a result object" in refused["message"]
    assert http.modern("tasks/get", {"taskId": task_id})["result"]["status"] == "input_required"
    http.modern("tasks/cancel", {"taskId": task_id})


def test_a_modern_task_asks_the_model_and_for_roots_through_tasks_update():
    http = Http()
    capabilities = {**TASKS, "sampling": {}, "roots": {}}
    task_id = http.modern("tools/call", {"name": "consult", "arguments": {}}, capabilities)["result"]["taskId"]

    def get():
        return http.modern("tasks/get", {"taskId": task_id}, capabilities)["result"]

    parked = http.until(get, lambda t: t["status"] == "input_required")
    methods = {key: entry["method"] for key, entry in parked["inputRequests"].items()}
    assert methods == {"model": "sampling/createMessage", "roots": "roots/list"}
    answers = {
        "model": {"role": "assistant", "content": {"type": "text", "text": "all good"}, "model": "m"},
        "roots": {"roots": [{"uri": "file:///srv", "name": "srv"}]},
    }
    http.modern("tasks/update", {"taskId": task_id, "inputResponses": answers}, capabilities)
    done = http.until(get, lambda t: t["status"] == "completed")
    assert done["result"]["content"][0]["text"] == "all good; 1 root(s)"


def test_a_task_cancelled_before_a_thread_took_it_never_runs_its_handler():
    http = Http(task_threads=1)
    spinning = http.modern("tools/call", {"name": "spin", "arguments": {}})["result"]["taskId"]
    queued = http.modern("tools/call", {"name": "whoami", "arguments": {}})["result"]
    assert queued["statusMessage"] == "waiting for a free task thread (ZEMCP_TASK_THREADS)"
    http.modern("tasks/cancel", {"taskId": queued["taskId"]})
    http.modern("tasks/cancel", {"taskId": spinning})
    http.until(lambda: {"n": http.server.tasks.running}, lambda t: t["n"] == 0, 3.0)
    assert queued["taskId"] not in RAN, "the handler of a task cancelled while queued ran"
    assert http.modern("tasks/get", {"taskId": queued["taskId"]})["result"]["status"] == "cancelled"


# -- a store that does not answer (a Redis outage) ---------------------------------------


class Outage:
    """A task store whose every call fails with ``StateUnavailable`` while ``down`` is set,
    as the Redis store's do while Redis does not answer; ``updates`` names the thread of
    each ``update`` call."""

    def __init__(self, store: LocalTasks):
        self.store = store
        self.shared = store.shared
        self.down = threading.Event()
        self.updates: list[str] = []

    def __getattr__(self, name: str):
        method = getattr(self.store, name)

        def call(*args, **kwargs):
            if name == "update":
                self.updates.append(threading.current_thread().name)
            if self.down.is_set():
                raise StateUnavailable("Service Unavailable: the task store does not answer")
            return method(*args, **kwargs)

        return call

    def __len__(self) -> int:
        return len(self.store)


def note(text: str):
    return lambda r: (setattr(r, "message", text) or True) if r.message != text else False


def finish(r: TaskRecord) -> bool:
    r.status = "completed"
    return True


def test_kept_writes_keep_the_latest_of_each_kind_and_write_them_together_when_the_store_answers():
    store = Outage(LocalTasks(10, 1.0))
    store.create(record())
    writes = KeptWrites(store, retry_every=0.05)
    until = time.time() + 60
    assert writes.write("t1", "status", note("one"), until).message == "one"
    store.down.set()
    assert writes.write("t1", "status", note("two"), until) is KEPT
    mine = threading.current_thread().name
    tried = store.updates.count(mine)
    assert writes.write("t1", "status", note("three"), until) is KEPT
    assert writes.write("t1", "end", finish, until) is KEPT
    assert store.updates.count(mine) == tried, "a change made while others wait must not wait for the store"
    time.sleep(0.2)
    assert writes.kept == 1 and store.store.get("t1").message == "one"
    store.down.clear()
    deadline = time.monotonic() + 5
    while writes.kept and time.monotonic() < deadline:
        time.sleep(0.02)
    after = store.store.get("t1")
    assert (after.message, after.status) == ("three", "completed")
    assert after.version == 2, "the kept changes are written in one update"
    assert writes.write("t1", "status", note("four"), until).message == "four", "written at once again"


def test_a_kept_change_is_given_up_once_the_task_ttl_has_passed():
    store = Outage(LocalTasks(10, 1.0))
    store.create(record())
    writes = KeptWrites(store, retry_every=0.05)
    store.down.set()
    assert writes.write("t1", "end", finish, time.time() + 0.2) is KEPT
    deadline = time.monotonic() + 5
    while writes.kept and time.monotonic() < deadline:
        time.sleep(0.02)
    assert writes.kept == 0
    store.down.clear()
    time.sleep(0.1)
    assert store.store.get("t1").status == "working", "a change past the ttl must not be written"


def test_a_task_whose_start_status_and_end_meet_an_outage_completes_when_the_store_answers():
    http = Http(task_threads=1)
    server = http.server
    store = Outage(server.tasks.store)
    server.tasks = TaskRunner(server.settings, store, server.pending, server.execute, server.abort)
    first = http.modern("tools/call", {"name": "steady", "arguments": {"seconds": 0.2, "every": 1}})["result"]
    second = http.modern("tools/call", {"name": "steady", "arguments": {"seconds": 0.5, "every": 0.05}})["result"]
    assert second["statusMessage"] == "waiting for a free task thread (ZEMCP_TASK_THREADS)"
    store.down.set()  # the first ends, the second starts, reports and ends while it lasts
    http.until(lambda: {"n": server.tasks.running}, lambda t: t["n"] == 0, 5.0)
    assert server.tasks.running == 0, "the handlers did not end during the outage"
    assert store.store.get(second["taskId"]).status == "working"
    store.down.clear()

    def get(task_id: str):
        return lambda: http.modern("tasks/get", {"taskId": task_id})["result"]

    for created in (first, second):
        done = http.until(get(created["taskId"]), lambda t: t["status"] != "working")
        assert done["status"] == "completed", done
        steps = int(done["result"]["content"][0]["text"].split()[2])
        assert done["statusMessage"] == f"step {steps}", "the latest status must win"
    assert steps > 5 and store.store.get(second["taskId"]).version == 1, "kept changes are written in one update"
