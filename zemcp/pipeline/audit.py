"""The audit layer: one ``zemcp.audit`` record per use of a tool, a prompt or a resource.

With ``audit_log`` on (``ZEMCP_AUDIT_LOG``), every ``tools/call``, ``prompts/get`` and
``resources/read`` that reaches the pipeline's layers inside the rate limits leaves an INFO
record on the ``zemcp.audit`` logger once it ends, those refused there included (a missing
scope, the call budget): who (``subject``, the token's subject, and ``client``, the key its fair shares
count under: the user, or the client address without authorization), what (``method``,
``tool``: the tool or prompt name, or the resource URI), the ``outcome`` (``ok``,
``tool_error``, ``input_required`` for a 2026-07-28 round that asked the user, ``cancelled``,
a JSON-RPC error code, or the refusal's class such as ``InsufficientScope``) and the
``duration`` in seconds. The records go wherever the application's logging sends them
(``ZEMCP_LOG_FORMAT=json`` writes each as one JSON line); arguments and results are never in
them.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from zemcp import logsafe
from zemcp.eras.requestcontext import Running
from zemcp.observe.telemetry import INPUT_REQUIRED, failure_type
from zemcp.protocol import jsonrpc

if TYPE_CHECKING:
    from zemcp.core.server import Server
    from zemcp.eras.requestcontext import Outcome, RequestContext, Serve

audit_log = logging.getLogger("zemcp.audit")

#: The methods that use a tool, a prompt or a resource, with the parameter naming it.
AUDITED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class Audit:
    """Records the uses of one server's tools, prompts and resources (when ``audit_log`` is on).

    Args:
        server: the :class:`zemcp.core.server.Server` (its ``audit_log`` setting).
        next: serves the message.
    """

    def __init__(self, server: Server, next: Serve):
        self._next = next

    @staticmethod
    def applies(server: Server) -> bool:
        """Whether the server's ``audit_log`` is on."""
        return server.settings.audit_log

    def __call__(self, message: jsonrpc.Message, context: RequestContext) -> Outcome:
        """Serve ``message``, recording its use once it ends.

        Raises:
            whatever serving it raised, once recorded.
        """
        if not isinstance(message, jsonrpc.Request) or message.method not in AUDITED:
            return self._next(message, context)
        started = time.perf_counter()
        context.on_finish(lambda response: _record(message, context, started, _outcome(response)))
        try:
            outcome = self._next(message, context)
        except BaseException as exc:
            _record(message, context, started, failure_type(exc))
            raise
        if not isinstance(outcome, Running):
            _record(message, context, started, _outcome(outcome if isinstance(outcome, dict) else None))
        return outcome


def _outcome(response: dict[str, Any] | None) -> str:
    """The outcome a response tells: ``ok``, ``tool_error``, ``input_required``, an error code, or ``cancelled``."""
    if response is None:
        return "cancelled"
    error = response.get("error")
    if isinstance(error, dict):
        return str(error.get("code"))
    result = response.get("result")
    if isinstance(result, dict):
        if result.get("isError") is True:
            return "tool_error"
        if result.get("resultType") == INPUT_REQUIRED:
            return INPUT_REQUIRED
    return "ok"


def _record(message: jsonrpc.Request, context: RequestContext, started: float, outcome: str) -> None:
    target = message.params.get(AUDITED[message.method])
    principal = context.principal
    extra: dict[str, Any] = {
        "event": "audit",
        "method": message.method,
        "tool": target if isinstance(target, str) else None,
        "outcome": outcome,
        "duration": round(time.perf_counter() - started, 6),
        "subject": principal.subject if principal is not None else None,
        "client": context.client,
    }
    who = extra["subject"] or context.client
    audit_log.info(
        "%s %s by %s: %s",
        message.method,
        logsafe.clip(extra["tool"]) if extra["tool"] is not None else "-",
        logsafe.clip(who) if who is not None else "the stdio client",
        outcome,
        extra=extra,
    )
