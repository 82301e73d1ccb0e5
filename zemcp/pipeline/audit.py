"""The audit layer: one audit record per use of a tool, a prompt or a resource.

When the server's audit trail records (``audit_log`` on, or a hook registered with
:meth:`zemcp.Server.on_audit`), every ``tools/call``, ``prompts/get`` and ``resources/read``
that reaches the pipeline's layers inside the rate limits gets one
:class:`zemcp.core.audit.AuditRecord` once it ends, those refused there included (a missing
scope, the call budget, the client's share): who (the site's user or the token's subject, and
the client key), what (the method, the tool, prompt or resource, the argument names, their
values only with ``audit_argument_values``), the outcome and its reason, the duration, the
protocol revision and the session's fingerprint. A ``tools/call`` answered with a new task is
recorded by the task's run when it ends (:mod:`zemcp.core.tasks`), with the task's id.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from zemcp.core import audit
from zemcp.eras.requestcontext import Running
from zemcp.protocol import jsonrpc
from zemcp.protocol.envelope import version_of
from zemcp.state.session import fingerprint

if TYPE_CHECKING:
    from zemcp.core.server import Server
    from zemcp.eras.requestcontext import Outcome, RequestContext, Serve

#: The methods that use a tool, a prompt or a resource, with the parameter naming it.
AUDITED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class Audit:
    """Records the uses of one server's tools, prompts and resources (when its audit trail records).

    Args:
        server: the :class:`zemcp.core.server.Server` (its :attr:`audit` trail).
        next: serves the message.
    """

    def __init__(self, server: Server, next: Serve):
        self._trail = server.audit
        self._next = next

    @staticmethod
    def applies(server: Server) -> bool:
        """Whether the server's audit trail records (``audit_log`` on, or a hook registered);
        when not, the trail learns that this pipeline has no audit layer."""
        if server.audit.active:
            return True
        server.audit.left_out = True
        return False

    def __call__(self, message: jsonrpc.Message, context: RequestContext) -> Outcome:
        """Serve ``message``, recording its use once it ends.

        Raises:
            whatever serving it raised, once recorded.
        """
        if not isinstance(message, jsonrpc.Request) or message.method not in AUDITED:
            return self._next(message, context)
        started, clock = time.time(), time.perf_counter()

        def record(response: dict[str, Any] | None, raised: BaseException | None = None) -> None:
            if raised is None and message.method == "tools/call" and audit.creates_task(response):
                return  # the task's run records the call when it ends
            outcome, reason = audit.outcome(response, context.ending, raised)
            self._trail.record(_record(self._trail, message, context, started, clock, outcome, reason))

        context.on_finish(record)
        try:
            outcome = self._next(message, context)
        except BaseException as exc:
            record(None, exc)
            raise
        if not isinstance(outcome, Running):
            record(outcome if isinstance(outcome, dict) else None)
        return outcome


def _record(
    trail: audit.AuditTrail,
    message: jsonrpc.Request,
    context: RequestContext,
    started: float,
    clock: float,
    outcome: str,
    reason: str | None,
) -> audit.AuditRecord:
    """The record of ``message``, which arrived at ``started`` (``time.time()``) and
    ``clock`` (``time.perf_counter()``) and ended with ``outcome`` for ``reason``."""
    target = message.params.get(AUDITED[message.method])
    names, values = (
        trail.arguments(message.params.get("arguments")) if message.method != "resources/read" else ((), None)
    )
    subject = audit.token_subject(context.principal)
    session = context.session
    return audit.AuditRecord(
        method=message.method,
        tool=target if isinstance(target, str) else None,
        arguments=names,
        values=values,
        outcome=outcome,
        reason=reason,
        started=audit.started_at(started),
        duration=round(max(0.0, time.perf_counter() - clock), 6),
        user=audit.user_name(context.user) or subject,
        subject=subject,
        client=context.client,
        protocol_version=session.protocol_version if session is not None else version_of(message),
        session=fingerprint(session.id) if session is not None else None,
    )
