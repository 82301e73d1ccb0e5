"""``subscriptions/listen``: the 2026-07-28 stream of change notifications (basic/patterns/subscriptions).

With the tasks extension declared, ``notifications.taskIds`` asks for ``notifications/tasks``
(the whole task, as ``tasks/get`` shows it): once as it is, then at each change of those
tasks; the acknowledgement names the ids accepted (the caller's own tasks that exist).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zemcp.eras.modern import tasks
from zemcp.protocol import jsonrpc, versions
from zemcp.protocol.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, ProtocolError
from zemcp.replies.sinks import ReplySink

if TYPE_CHECKING:
    from zemcp.eras.requestcontext import RequestContext
    from zemcp.protocol.capabilities import ClientView


def open_listen(
    server: Any,
    request: jsonrpc.Request,
    context: RequestContext,
    client: ClientView | None = None,
) -> ReplySink:
    """Open a listen stream for ``request`` of ``server`` (a :class:`zemcp.core.server.Server`):
    a stream that starts with the acknowledgement. It holds a thread for as long as it is open:
    it is admitted to the call budget, and to its client's shares of it and of the listen
    streams, here.

    Args:
        context: the request's context (its client's shares; its principal, whose own tasks
            alone are accepted).
        client: what the request declared (``taskIds`` need the tasks extension).
    Raises:
        ProtocolError: -32601 when listen streams are off, -32602 for bad ``notifications``,
            -32021 for ``taskIds`` without the tasks extension.
        ListenLimitReached, Busy, ShareTaken: no room for another stream.
    """
    if server.subscriptions.max_streams == 0:
        # Turned off: server/discover then declares nothing a listen stream would carry.
        raise ProtocolError(
            METHOD_NOT_FOUND,
            "Method not found: subscriptions/listen is turned off on this server (ZEMCP_MAX_LISTEN_STREAMS=0)",
        )
    capabilities = server.capabilities(versions.STATELESS)
    supported = {
        "toolsListChanged": capabilities.get("tools", {}).get("listChanged", False),
        "promptsListChanged": capabilities.get("prompts", {}).get("listChanged", False),
        "resourcesListChanged": capabilities.get("resources", {}).get("listChanged", False),
        "resourceSubscriptions": capabilities.get("resources", {}).get("subscribe", False),
    }
    requested = request.params.get("notifications")
    task_ids: list[str] = []
    if isinstance(requested, dict) and "taskIds" in requested:
        requested = dict(requested)
        task_ids = tasks.listened(server, client, requested.pop("taskIds"), context.principal)
    try:
        acknowledged, kinds, uris = server.subscriptions.honoured(requested, supported)
    except ValueError as exc:
        raise ProtocolError(INVALID_PARAMS, f"Invalid params: {exc}") from None
    if task_ids:
        acknowledged["taskIds"] = task_ids
    # A listen stream holds a thread for as long as it is open: it counts in the call budget.
    sink = ReplySink()
    server.admission.open_stream(
        lambda: server.subscriptions.open(request.id, acknowledged, kinds, uris, sink),
        context.client,
    )
    for task_id in task_ids:
        # The task as it is first (it may have changed, or ended, since it was accepted), then its changes.
        watch = server.tasks.store.watch(task_id, lambda record: sink.send(tasks.notification(record)), current=True)
        sink.on_close(watch)
    return sink
