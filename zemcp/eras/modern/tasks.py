"""The ``io.modelcontextprotocol/tasks`` extension of MCP 2026-07-28 (SEP-2663).

Negotiated on each request: a request whose ``clientCapabilities.extensions`` declare the
extension may get a task, and only such a request may use ``tasks/get``, ``tasks/update``
and ``tasks/cancel`` (others get -32021 with ``data.requiredCapabilities``, checked before
the task id). The server decides which calls become tasks: a tool registered with
``task="optional"`` or ``"required"`` runs as one whenever the request declares the
extension (a legacy ``params.task`` is ignored), and a ``required`` tool refuses a request
that does not (-32021). Arguments the tool asks the user for (``elicit_missing``) are asked
by multi-round-trip before the task is created, so the task starts with all of them.

``tasks/get`` returns the task with its ``inputRequests`` (input_required), ``result``
(completed, a tool's ``isError`` result included) or ``error`` (failed: a JSON-RPC error);
``tasks/update`` hands in answers and ``tasks/cancel`` asks the task to stop, each
acknowledged with an empty result (also for a task that has ended). ``tasks/result`` and
``tasks/list`` are not methods of the extension (-32601).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zemcp import logsafe
from zemcp.core.results import error_result
from zemcp.core.server import Server, Work, tool_runner
from zemcp.core.tasks import task_object
from zemcp.core.tools import ToolError
from zemcp.protocol import jsonrpc
from zemcp.protocol.envelope import MISSING_CAPABILITY
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, ProtocolError
from zemcp.protocol.tasks import COMPLETED, EXTENSION, FAILED, INPUT_REQUIRED, OPTIONAL, REQUIRED, declares_extension
from zemcp.state.tasks import TaskLimitReached

if TYPE_CHECKING:
    from zemcp.auth.principal import Principal
    from zemcp.core.context import Context
    from zemcp.protocol.capabilities import ClientView
    from zemcp.state.tasks import TaskRecord

#: The methods of the extension, and those it removed (answered -32601).
METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
REMOVED = frozenset({"tasks/result", "tasks/list"})
_NEEDS: dict[str, Any] = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}


def wants_task(server: Server, client: ClientView, work: Work) -> bool:
    """True when ``work`` (a ``tools/call``) is to run as a task for this request.

    Raises:
        ProtocolError: -32021 for a ``required`` tool the request did not declare the extension for.
    """
    tool = work.tool
    if tool is None or tool.task not in (OPTIONAL, REQUIRED):
        return False
    if declares_extension(client.capabilities):
        return True
    if tool.task == REQUIRED:
        raise ProtocolError(
            MISSING_CAPABILITY,
            f"Missing required client capability: tool {tool.name!r} runs only as a task; declare the "
            f"{EXTENSION} extension in params._meta's clientCapabilities.extensions",
            data=_NEEDS,
        )
    return False


def create(
    server: Server, client: ClientView, request: jsonrpc.Request, work: Work, client_key: str | None
) -> dict[str, Any]:
    """Start ``work`` as a task; returns the ``CreateTaskResult`` body (``resultType: "task"``).

    Args:
        client_key: whose share of ``max_tasks`` it counts in (:func:`zemcp.state.shares.client_key`).
    Raises:
        zemcp.state.tasks.TaskLimitReached: ``max_tasks`` or the client's share of it is held.
    """
    record = server.tasks.create(work, client, request, session=None, client_key=client_key)
    return {**task_object(record), "resultType": "task"}


def asking_first(
    server: Server, client: ClientView, request: jsonrpc.Request, work: Work, client_key: str | None
) -> Work:
    """``work`` as a round that first asks the user for the tool's missing arguments (by
    multi-round-trip, as any round), then creates the task with all of them; a failed
    question ends the call with the tool's ``isError`` result and no task."""
    tool = work.tool
    assert tool is not None

    def run(ctx: Context) -> dict[str, Any]:
        try:
            arguments = tool.ask_missing(work.arguments, list(work.missing), ctx)
        except ToolError as exc:
            return error_result(str(exc))
        complete = work._replace(
            arguments=arguments, missing=(), run=tool_runner(tool, arguments, (), client.protocol_version)
        )
        try:
            return create(server, client, request, complete, client_key)
        except TaskLimitReached as exc:
            # On the round's thread: the refusal is the call's JSON-RPC error.
            raise ProtocolError(INTERNAL_ERROR, str(exc)) from None

    return work._replace(run=run)


def serve(server: Server, client: ClientView, request: jsonrpc.Request, principal: Principal | None) -> dict[str, Any]:
    """Serve ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` (one of :data:`METHODS`);
    returns the result body.

    Raises:
        ProtocolError: -32601 when the server has no task tools, -32021 when the request did
            not declare the extension, -32602 for a missing or unknown ``taskId`` (a task of
            another principal is unknown too) or malformed ``inputResponses``.
    """
    method = request.method
    if not server.tools.tasks:
        raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}; this server has no tools that run as tasks")
    if not declares_extension(client.capabilities):
        raise ProtocolError(
            MISSING_CAPABILITY,
            f"Missing required client capability: {method} belongs to the {EXTENSION} extension; declare it "
            f"in params._meta's clientCapabilities.extensions",
            data=_NEEDS,
        )
    task_id = request.params.get("taskId")
    if not isinstance(task_id, str):
        raise ProtocolError(INVALID_PARAMS, f"Invalid params: {method} needs params.taskId (a string)")
    record = server.tasks.store.get(task_id)
    owner = principal.key if principal is not None else None
    if record is None or not record.modern or not record.belongs_to(owner, None):
        raise ProtocolError(
            INVALID_PARAMS,
            f"Invalid params: no task {logsafe.clip(task_id)} here: it never existed, belongs to someone else, or "
            f"its ttl has passed",
        )
    if method == "tasks/get":
        return detailed(record)
    if method == "tasks/update":
        responses = request.params.get("inputResponses")
        if not isinstance(responses, dict):
            raise ProtocolError(
                INVALID_PARAMS,
                "Invalid params: tasks/update needs params.inputResponses, an object mapping each "
                "inputRequests key to the client's result for it",
            )
        malformed = [key for key, value in responses.items() if key in record.inputs and not isinstance(value, dict)]
        if malformed:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: inputResponses[{logsafe.clip(malformed[0])}] must be a result object (an "
                f"ElicitResult, CreateMessageResult or ListRootsResult) answering that inputRequests entry",
            )
        server.tasks.answer(task_id, responses)
        return {}
    server.tasks.cancel(task_id)
    return {}


#: Task ids one listen stream may follow at most.
MAX_LISTENED = 64


def listened(server: Server, client: ClientView | None, requested: Any, principal: Principal | None) -> list[str]:
    """The ids of ``notifications.taskIds`` a listen stream follows: the caller's own 2026-07-28
    tasks that exist (others are left out of the acknowledgement, as unknown).

    Raises:
        ProtocolError: -32021 without the extension declared, -32602 for a malformed list.
    """
    if client is None or not declares_extension(client.capabilities):
        raise ProtocolError(
            MISSING_CAPABILITY,
            f"Missing required client capability: notifications.taskIds belongs to the {EXTENSION} extension; "
            f"declare it in params._meta's clientCapabilities.extensions",
            data=_NEEDS,
        )
    if (
        not isinstance(requested, list)
        or not all(isinstance(i, str) for i in requested)
        or len(requested) > MAX_LISTENED
    ):
        raise ProtocolError(
            INVALID_PARAMS, f"Invalid params: notifications.taskIds must be a list of at most {MAX_LISTENED} task ids"
        )
    owner = principal.key if principal is not None else None
    accepted = []
    for task_id in dict.fromkeys(requested):
        record = server.tasks.store.get(task_id)
        if record is not None and record.modern and record.belongs_to(owner, None):
            accepted.append(task_id)
    return accepted


def notification(record: TaskRecord) -> dict[str, Any]:
    """``notifications/tasks``: the whole task, as ``tasks/get`` shows it."""
    return jsonrpc.notification("notifications/tasks", detailed(record))


def removed(method: str) -> ProtocolError:
    """The -32601 of ``tasks/result`` and ``tasks/list``, which the 2026-07-28 extension removed."""
    instead = (
        "tasks/get returns the result once the task has ended"
        if method == "tasks/result"
        else ("keep the taskId of each task you create")
    )
    return ProtocolError(
        METHOD_NOT_FOUND, f"Method not found: {method} is not a method of the 2026-07-28 tasks extension; {instead}"
    )


def detailed(record: TaskRecord) -> dict[str, Any]:
    """The ``tasks/get`` body: the task, with what its status adds (``inputRequests``,
    ``result`` or ``error``)."""
    body = task_object(record)
    if record.status == INPUT_REQUIRED and record.inputs:
        body["inputRequests"] = record.inputs
    elif record.status == COMPLETED and record.result is not None:
        body["result"] = record.result
    elif record.status == FAILED and record.error is not None:
        body["error"] = record.error
    return body
