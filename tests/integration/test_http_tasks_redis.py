"""Tasks shared by every gunicorn worker through a real Redis (ZEMCP_REDIS_URL).

Each test starts its own gunicorn with several workers and ``ZEMCP_REDIS_URL`` naming a
``redis-server`` on a free loopback port (tests/support/redisserver.py), and places requests on
chosen workers: a kept-alive connection stays with the worker that accepted it, and the app's
``whoami`` tool (a plain call without the tasks extension) names that worker's pid. The task
runs in the worker that created it; another worker reads it, answers its question, cancels
it, and streams its result. The stall tests freeze a redis-server of their own (SIGSTOP for
:data:`STALL` seconds, then SIGCONT) under tasks that report progress and log every 0.3 s: the
tasks complete with their outcome. Skips, saying so, where redis-server is not installed.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import redis
import requests

from tests.support.clients import HandshakeClient, ModernClient
from tests.support.gunicorn import connection_to_a_worker
from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT
from tests.support.sse import SseStream

APP = "tests.apps.tasks_app:app"
EXTENSION = "io.modelcontextprotocol/tasks"
MODERN_CAPABILITIES = {"extensions": {EXTENSION: {}}, "elicitation": {}}


def redis_settings(url: str, **extra) -> dict:
    return {"redis_url": url, "workers": 3, "keepalive_interval": 0.5, "task_poll_interval": 0.2, **extra}


class Pinned:
    """A 2026-07-28 client whose requests all travel on one kept-alive connection (one worker)."""

    def __init__(self, url: str, avoid: set[int] = frozenset()):
        self.client = ModernClient(url, capabilities=MODERN_CAPABILITIES)
        self.url = url
        self.http, self.pid = connection_to_a_worker(self._ask_pid, set(avoid))

    def _ask_pid(self, http: requests.Session) -> int:
        # Without the extension whoami is a plain call: the answering worker's pid.
        message = self.client.message("tools/call", {"name": "whoami", "arguments": {}})
        message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {}
        return int(self._send(http, message)["result"]["content"][0]["text"])

    def _send(self, http: requests.Session, message: dict) -> dict:
        headers = {**self.client.headers(message), "Connection": "keep-alive"}
        response = http.post(
            self.url, data=json.dumps(message), headers=headers, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)
        )
        return self.client.reply(response, message["id"])

    def rpc(self, method: str, params: dict) -> dict:
        return self._send(self.http, self.client.message(method, params))

    def until(self, task_id: str, done, timeout: float = 15.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            task = self.rpc("tasks/get", {"taskId": task_id})["result"]
            if done(task):
                return task
            assert time.monotonic() < deadline, f"the task never got there: {task}"
            time.sleep(0.1)


def test_another_worker_reads_answers_and_cancels_a_task_running_elsewhere(start_server, redis_server, tmp_path):
    cancels = tmp_path / "cancels.log"
    server = start_server(app=APP, **redis_settings(redis_server.url), test_cancel_log=cancels)
    runner = Pinned(server.url)
    other = Pinned(server.url, {runner.pid})
    assert other.pid != runner.pid

    created = runner.rpc("tools/call", {"name": "approve", "arguments": {"item": "crate"}})["result"]
    assert created["resultType"] == "task"
    parked = other.until(created["taskId"], lambda t: t["status"] == "input_required")
    assert list(parked["inputRequests"]) == ["approve"]
    answer = {"approve": {"action": "accept", "content": {"ok": True}}}
    ack = other.rpc("tasks/update", {"taskId": created["taskId"], "inputResponses": answer})["result"]
    assert ack["resultType"] == "complete"
    done = other.until(created["taskId"], lambda t: t["status"] == "completed")
    assert done["result"]["content"][0]["text"] == "approved crate"

    long = runner.rpc("tools/call", {"name": "report", "arguments": {"seconds": 30}})["result"]
    other.until(long["taskId"], lambda t: t.get("statusMessage", "").startswith("step"))
    assert other.rpc("tasks/cancel", {"taskId": long["taskId"]})["result"]["resultType"] == "complete"
    deadline = time.monotonic() + 5
    while not (cancels.exists() and long["taskId"] in cancels.read_text()):
        assert time.monotonic() < deadline, "the handler in the other worker never saw the cancel"
        time.sleep(0.05)
    assert "RequestCancelled" in cancels.read_text()
    assert runner.rpc("tasks/get", {"taskId": long["taskId"]})["result"]["status"] == "cancelled"


def test_a_session_task_streams_its_question_and_result_through_another_worker(start_server, redis_server):
    server = start_server(app=APP, **redis_settings(redis_server.url))
    client = HandshakeClient(server.url)
    assert client.initialize(protocol_version="2025-11-25").status_code == 200

    def ask_pid(http: requests.Session) -> int:
        call = {"jsonrpc": "2.0", "id": client.new_id(), "method": "tools/call", "params": {"name": "whoami"}}
        response = http.post(client.url, json=call, headers=client.headers(), timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
        return int(response.json()["result"]["content"][0]["text"])

    runner, runner_pid = connection_to_a_worker(ask_pid, set())
    reader, _ = connection_to_a_worker(ask_pid, {runner_pid})
    create = {
        "jsonrpc": "2.0",
        "id": client.new_id(),
        "method": "tools/call",
        "params": {"name": "approve", "arguments": {"item": "pallet"}, "task": {}},
    }
    created = runner.post(client.url, json=create, headers=client.headers(), timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    task_id = created.json()["result"]["task"]["taskId"]
    fetch = {"jsonrpc": "2.0", "id": client.new_id(), "method": "tasks/result", "params": {"taskId": task_id}}
    response = reader.post(
        client.url, json=fetch, headers=client.headers(), timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), stream=True
    )
    assert response.headers["Content-Type"].startswith("text/event-stream"), response.text
    stream = SseStream.from_requests(response, reader)
    try:
        question = None
        while question is None:
            message = stream.next_message()
            assert message is not None, "the stream ended before the question came"
            if message.get("method") == "elicitation/create":
                question = message
        assert question["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"ok": True}}}
        assert client.post(answer).status_code == 202
        rest = stream.rest()
    finally:
        stream.close()
    final = [m for m in rest if m.get("id") == fetch["id"]]
    assert final and final[0]["result"]["content"][0]["text"] == "approved pallet", rest


def test_a_task_whose_worker_was_killed_is_reported_failed(start_server, redis_server):
    server = start_server(app=APP, **redis_settings(redis_server.url, workers=2))
    runner = Pinned(server.url)
    created = runner.rpc("tools/call", {"name": "report", "arguments": {"seconds": 120}})["result"]
    # The record names the node that runs it: <instance>.<pid>.<random>.
    record = json.loads(redis.Redis.from_url(redis_server.url).get(f"zemcp:task:{created['taskId']}"))
    assert int(record["node"].split(".")[1]) == runner.pid
    os.kill(runner.pid, signal.SIGKILL)
    reader = Pinned(server.url, {runner.pid})
    failed = reader.until(created["taskId"], lambda t: t["status"] != "working", timeout=20.0)
    assert failed["status"] == "failed", failed
    assert "stopped without a graceful stop" in failed["statusMessage"]
    assert failed["error"]["code"] == -32603


#: [seconds] how long the Redis stall tests freeze redis-server (a failover, a restart).
STALL = 2.5


def session_task(client: HandshakeClient, name: str, arguments: dict) -> str:
    """Create a 2025-11-25 task in ``client``'s session; returns its id."""
    params = {"name": name, "arguments": arguments, "task": {"ttl": 60000}}
    return client.rpc("tools/call", params)["task"]["taskId"]


def session_until(client: HandshakeClient, task_id: str, done, timeout: float = 15.0) -> dict:
    """``tasks/get`` of a 2025-11-25 task, every 0.1 s until ``done(task)``."""
    deadline = time.monotonic() + timeout
    while True:
        task = client.rpc("tasks/get", {"taskId": task_id})
        if done(task):
            return task
        assert time.monotonic() < deadline, f"the task never got there: {task}"
        time.sleep(0.1)


def ended(task: dict) -> bool:
    return task["status"] in ("completed", "failed", "cancelled")


@pytest.mark.slow
def test_running_tasks_of_both_eras_ride_out_a_redis_stall(start_redis, start_server, tmp_path):
    redis_server = start_redis()
    cancels = tmp_path / "cancels.log"
    server = start_server(app=APP, **redis_settings(redis_server.url, workers=2), test_cancel_log=cancels)
    modern = Pinned(server.url)
    session = server.session(protocol_version="2025-11-25")
    # Each reports progress (a statusMessage) and logs every 0.3 s: through the stall and after it.
    modern_ids = [
        modern.rpc("tools/call", {"name": "steady", "arguments": {"seconds": s}})["result"]["taskId"]
        for s in (2.0, 4.5)
    ]
    session_id = session_task(session, "steady", {"seconds": 3.0})
    long_id = modern.rpc("tools/call", {"name": "steady", "arguments": {"seconds": 60}})["result"]["taskId"]
    for task_id in [*modern_ids, long_id]:
        modern.until(task_id, lambda t: t.get("statusMessage", "").startswith("step"))
    session_until(session, session_id, lambda t: t.get("statusMessage", "").startswith("step"))

    redis_server.stall(STALL)

    for task_id in modern_ids:
        task = modern.until(task_id, ended)
        assert task["status"] == "completed", task
        steps = int(task["result"]["content"][0]["text"].removeprefix("steady after ").removesuffix(" steps"))
        # The status the task wrote last is the one kept (the latest wins).
        assert task["statusMessage"] == f"step {steps}", task
    task = session_until(session, session_id, ended)
    assert task["status"] == "completed", task
    result = session.rpc("tasks/result", {"taskId": session_id})
    steps = int(result["content"][0]["text"].removeprefix("steady after ").removesuffix(" steps"))
    assert task["statusMessage"] == f"step {steps}", task

    # A task still running after the stall is cancelled as ever.
    assert modern.until(long_id, lambda t: True)["status"] == "working"
    assert modern.rpc("tasks/cancel", {"taskId": long_id})["result"]["resultType"] == "complete"
    deadline = time.monotonic() + 5
    while not (cancels.exists() and long_id in cancels.read_text()):
        assert time.monotonic() < deadline, "the handler never saw the cancel made after the stall"
        time.sleep(0.05)
    assert "RequestCancelled" in cancels.read_text()


def test_a_task_whose_start_meets_a_redis_stall_runs_and_completes(start_redis, start_server):
    redis_server = start_redis()
    # One task thread: the second task starts when the first ends, within the stall; a short
    # Redis timeout (0.5 s, tried twice) leaves the first one's end well inside it.
    settings = redis_settings(redis_server.url, workers=1, task_threads=1, redis_timeout=0.5)
    server = start_server(app=APP, **settings)
    client = Pinned(server.url)
    first = client.rpc("tools/call", {"name": "steady", "arguments": {"seconds": 1.0}})["result"]
    second = client.rpc("tools/call", {"name": "steady", "arguments": {"seconds": 1.5}})["result"]
    assert second["statusMessage"] == "waiting for a free task thread (ZEMCP_TASK_THREADS)", second

    redis_server.stall(STALL)

    for created in (first, second):
        task = client.until(created["taskId"], ended)
        assert task["status"] == "completed", task
        assert task["result"]["content"][0]["text"].startswith("steady after "), task
    assert f"task {second['taskId'][:8]}: its start could not be written now" in server.log(), (
        "the second task's start did not meet the stall"
    )
