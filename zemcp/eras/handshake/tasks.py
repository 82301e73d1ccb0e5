"""Tasks in the handshake era: MCP 2025-11-25 basic/utilities/tasks (SEP-1686, experimental).

A session of protocol 2025-11-25 sees the server's ``tasks`` capability (``list``,
``cancel``, ``requests.tools.call``) and each task-capable tool's ``execution.taskSupport``.
A ``tools/call`` with ``params.task`` (``{"ttl": ms}``) of an ``optional`` or ``required``
tool is answered at once with ``{"task": Task}``; ``task`` on a ``forbidden`` tool, and a
``required`` tool called without it, get -32601. The task belongs to its session (and
principal): ``tasks/get``, ``tasks/list``, ``tasks/cancel`` and ``tasks/result`` of any other
session find nothing (-32602).

``tasks/result`` answers at once for a task that has ended (its result or JSON-RPC error,
with the related-task ``_meta``); otherwise it holds a thread of the call budget until the
end, and its response becomes an event stream that carries ``notifications/tasks/status``
at each change, and the task's questions for the user (``elicitation/create`` and the like,
with the related-task ``_meta``), whose answers the client POSTs as for any request of its
session. Other versions of the era have no tasks: their ``tasks/*`` are unknown methods and
a ``required`` tool refuses them (-32601).
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any

from zemcp import logsafe
from zemcp.core.server import Server, Work
from zemcp.core.tasks import task_object
from zemcp.eras.requestcontext import RequestContext, Running
from zemcp.protocol import jsonrpc
from zemcp.protocol.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, ProtocolError
from zemcp.protocol.pagination import PAGE_SIZE, list_result
from zemcp.protocol.tasks import CANCELLED, FORBIDDEN, REQUIRED, TASKS_VERSION, related

if TYPE_CHECKING:
    from zemcp.state.session import Session
    from zemcp.state.tasks import TaskRecord

#: The 2025-11-25 task methods a client sends.
METHODS = frozenset({"tasks/get", "tasks/list", "tasks/cancel", "tasks/result"})


def has_tasks(server: Server, session: Session) -> bool:
    """True when ``session``'s version has tasks and the server has task tools."""
    return session.protocol_version == TASKS_VERSION and server.tools.tasks


def requested(server: Server, session: Session, request: jsonrpc.Request, work: Work) -> dict[str, Any] | None:
    """The ``params.task`` of a ``tools/call`` that is to run as a task, else None (also for
    work that is not a tool's).

    Raises:
        ProtocolError: -32601 for ``task`` on a ``forbidden`` tool, or a ``required`` tool
            called without it (or by a version without tasks); -32602 for a ``task`` that
            is not an object.
    """
    tool = work.tool
    if tool is None:
        return None
    task = request.params.get("task") if has_tasks(server, session) else None
    if task is None:
        if tool.task == REQUIRED:
            how = (
                "call it with params.task"
                if has_tasks(server, session)
                else f"start a session of protocol {TASKS_VERSION} (or use 2026-07-28 with the tasks extension)"
            )
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"Method not found: tool {tool.name!r} runs only as a task (taskSupport required); {how}",
            )
        return None
    if not isinstance(task, dict):
        raise ProtocolError(INVALID_PARAMS, 'Invalid params: params.task must be an object such as {"ttl": 60000}')
    ttl = task.get("ttl")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl)):
        raise ProtocolError(
            INVALID_PARAMS, f"Invalid params: params.task.ttl must be a number of milliseconds, got {logsafe.clip(ttl)}"
        )
    if tool.task == FORBIDDEN:
        raise ProtocolError(
            METHOD_NOT_FOUND,
            f"Method not found: tool {tool.name!r} does not run as a task (taskSupport forbidden); call it "
            f"without params.task",
        )
    return task


def not_created(
    server: Server, session: Session, request: jsonrpc.Request, outcome: dict[str, Any]
) -> dict[str, Any] | None:
    """The -32602 response to a task-augmented ``tools/call`` that was answered at once with
    ``outcome``, an ``isError`` result (its arguments were refused), since a client that
    asked for a task reads a task or an error, never a tool result; None for any other
    request, whose response is the plain result."""
    if not has_tasks(server, session) or request.params.get("task") is None or outcome.get("isError") is not True:
        return None
    name = request.params.get("name")
    tool = server.tools.get(name) if isinstance(name, str) else None
    if request.method != "tools/call" or tool is None or tool.task == FORBIDDEN:
        return None
    texts = [c.get("text") for c in outcome.get("content", ()) if isinstance(c, dict)]
    why = "; ".join(t for t in texts if isinstance(t, str)) or "the arguments were refused"
    return jsonrpc.error(request.id, INVALID_PARAMS, f"Invalid params: no task was created: {why}")


def create(
    server: Server,
    session: Session,
    request: jsonrpc.Request,
    work: Work,
    task: dict[str, Any],
    client_key: str | None,
) -> dict[str, Any]:
    """Start ``work`` as a task of ``session``; returns the response: the ``CreateTaskResult``
    (``{"task": Task}``).

    Raises:
        zemcp.state.tasks.TaskLimitReached: ``max_tasks`` or the client's share of it is held.
    """
    record = server.tasks.create(work, session, request, session=session, client_key=client_key, ttl_ms=task.get("ttl"))
    return jsonrpc.result(request.id, {"task": task_object(record)})


def serve(
    server: Server,
    session: Session,
    request: jsonrpc.Request,
    context: RequestContext,
) -> dict[str, Any] | Running:
    """Serve one of :data:`METHODS`: a JSON-RPC response, or (``tasks/result`` of a task that
    has not ended) the call whose stream waits for it."""
    method = request.method
    try:
        if not has_tasks(server, session):
            raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")
        owner = context.principal.key if context.principal is not None else None
        if method == "tasks/list":
            records = sorted(server.tasks.store.owned(owner, session.id), key=lambda r: r.created)
            tasks = [task_object(r) for r in records if not r.modern]
            return jsonrpc.result(request.id, list_result(request.params, "tasks", tasks, PAGE_SIZE))
        record = _owned(server, request, owner, session)
        if method == "tasks/get":
            return jsonrpc.result(request.id, task_object(record))
        if method == "tasks/cancel":
            if record.terminal:
                raise ProtocolError(
                    INVALID_PARAMS,
                    f"Invalid params: cannot cancel task {logsafe.clip(record.id)}: it already ended ({record.status})",
                )
            cancelled = server.tasks.cancel(record.id) or record
            if cancelled.status != CANCELLED:
                # It ended between the look above and the cancel.
                raise ProtocolError(
                    INVALID_PARAMS,
                    f"Invalid params: cannot cancel task {logsafe.clip(record.id)}: it already ended "
                    f"({cancelled.status})",
                )
            return jsonrpc.result(request.id, task_object(cancelled))
        if record.terminal:
            return payload(request.id, record)
        return _wait_for(server, request, record, context)
    except ProtocolError as exc:
        return jsonrpc.error(request.id, exc.code, exc.message, exc.data)


def _owned(server: Server, request: jsonrpc.Request, owner: str | None, session: Session) -> TaskRecord:
    task_id = request.params.get("taskId")
    if not isinstance(task_id, str):
        raise ProtocolError(INVALID_PARAMS, f"Invalid params: {request.method} needs params.taskId (a string)")
    record = server.tasks.store.get(task_id)
    if record is None or record.modern or not record.belongs_to(owner, session.id):
        raise ProtocolError(
            INVALID_PARAMS,
            f"Invalid params: no task {logsafe.clip(task_id)} in this session: it never existed, belongs to another "
            f"session, or its ttl has passed",
        )
    return record


def payload(request_id: jsonrpc.RequestId, record: TaskRecord) -> dict[str, Any]:
    """The ``tasks/result`` response of an ended task: exactly the call's result or JSON-RPC
    error, with the related-task ``_meta`` (in ``error.data`` for an error); a cancelled task,
    which has neither, gets -32602 saying so."""
    meta = related(record.id)
    if record.result is not None:
        result = record.result
        return jsonrpc.result(request_id, {**result, "_meta": {**result.get("_meta", {}), **meta}})
    if record.error is not None:
        error = record.error
        data = error.get("data")
        if data is None or isinstance(data, dict):
            data = data or {}
            own = data.get("_meta")
            data = {**data, "_meta": {**(own if isinstance(own, dict) else {}), **meta}}
        return jsonrpc.error(request_id, error.get("code", jsonrpc.INTERNAL_ERROR), str(error.get("message")), data)
    return jsonrpc.error(
        request_id,
        INVALID_PARAMS,
        f"Invalid params: task {logsafe.clip(record.id)} was cancelled and has no result "
        f"({record.message or 'cancelled'})",
        {"_meta": meta},
    )


def _wait_for(server: Server, request: jsonrpc.Request, record: TaskRecord, context: RequestContext) -> Running:
    """``tasks/result`` of a running task: a stream that carries its status changes and
    questions, and ends with its outcome."""
    sink = context.open_sink(None, request.id)
    gone = threading.Event()
    sink.on_close(gone.set)
    store = server.tasks.store

    def job() -> None:
        response = None
        detach = server.tasks.attach(record.id, sink)
        try:
            current: TaskRecord | None = record
            status = None
            sent: set[Any] = set()
            while True:
                if current is None:
                    response = jsonrpc.error(
                        request.id,
                        INVALID_PARAMS,
                        f"Invalid params: task {logsafe.clip(record.id)} is gone (its ttl has passed)",
                    )
                    break
                if current.status != status:
                    status = current.status
                    sink.send(jsonrpc.notification("notifications/tasks/status", task_object(current)))
                for question in current.outbox:
                    if question.get("id") not in sent:
                        sent.add(question.get("id"))
                        sink.send(question)
                if current.terminal:
                    response = payload(request.id, current)
                    break
                if gone.is_set():
                    break
                sink.tick()
                current = store.wait(record.id, current.version, sink.tick_interval)
        finally:
            detach()
            context.finish(response)
            sink.finish(response)

    return Running(job, sink)
