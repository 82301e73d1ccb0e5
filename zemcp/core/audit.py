"""The audit record of a use of a tool, a prompt or a resource, and where it goes.

One :class:`AuditRecord` per ``tools/call``, ``prompts/get`` and ``resources/read`` once it
ends (a task-augmented ``tools/call`` once its task's run ends): who, what, how it ended and
how long it took. A server's :class:`AuditTrail` writes each record on the ``zemcp.audit``
logger when ``audit_log`` is on, and hands it to every hook the site registered
(:meth:`zemcp.Server.on_audit`), which stores it where the site wants. The records of plain
calls are made by the audit layer of the request pipeline (:mod:`zemcp.pipeline.audit`),
those of tasks by the task runner (:mod:`zemcp.core.tasks`).

How a call ended is one word of :data:`OUTCOMES`, with the detail in ``reason``:
:func:`outcome` reads it from the response, from the exception that ended the handler
(noted on the call's exchange, :attr:`zemcp.core.exchange.Abortable.ending`) and from the
refusal that answered the request instead.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from zemcp import logsafe
from zemcp.auth.principal import SITE
from zemcp.core.errors import ClientTimeout
from zemcp.observe.telemetry import INPUT_REQUIRED
from zemcp.protocol.elicitation import ElicitAborted, ElicitCancelled, ElicitDeclined, ElicitTimeout, ElicitTooMany
from zemcp.protocol.jsonrpc import ProtocolError

if TYPE_CHECKING:
    from zemcp.auth.principal import Principal
    from zemcp.config import Settings

audit_log = logging.getLogger("zemcp.audit")

#: The call returned its result.
OK = "ok"
#: The tool's result has ``isError`` (the handler raised, or reported an error).
TOOL_ERROR = "tool_error"
#: The user declined or cancelled an elicitation, and the call ended so.
DECLINED = "declined"
#: The request was cancelled, or could no longer be answered (its client went away, its
#: session ended, the server process stopped).
CANCELLED = "cancelled"
#: A refusal answered the request instead of its handler (a missing scope, the call budget,
#: the client's share, the task limit, a cap on pending questions).
REFUSED = "refused"
#: An elicitation (or a sampling or roots request) got no answer in time.
TIMEOUT = "timeout"
#: The request was answered with a JSON-RPC error (an unknown tool, invalid params ...).
ERROR = "error"
# INPUT_REQUIRED (input_required): a 2026-07-28 round ended asking the user; each round of a
# call is a record of its own.
#: Every outcome a record can have.
OUTCOMES = (OK, TOOL_ERROR, DECLINED, CANCELLED, REFUSED, TIMEOUT, INPUT_REQUIRED, ERROR)

#: ``hook(record)``: receives each record (:meth:`zemcp.Server.on_audit`).
AuditHook = Callable[["AuditRecord"], object]


@dataclass(frozen=True)
class AuditRecord:
    """One use of a tool, a prompt or a resource, once it ended.

    Attributes:
        method: ``tools/call``, ``prompts/get`` or ``resources/read``.
        tool: the tool's or prompt's name, or the resource's URI, as the request gave it
            (None when it gave none).
        arguments: the names of the arguments the request gave, in its order (a resource
            read has none).
        values: the arguments themselves, ``{name: JSON value}``, only with
            ``audit_argument_values`` on (they may hold secrets); else None.
        outcome: one of :data:`OUTCOMES`.
        reason: what :attr:`outcome` stands for in detail: the class of the refusal
            (``InsufficientScope``, ``Busy``, ``ShareTaken``, ``TaskLimitReached``,
            ``ElicitTooMany``), of the exception that ended the handler (``ElicitDeclined``,
            ``ElicitCancelled``, ``ElicitTimeout``, ``RequestCancelled``, ``ValueError`` ...),
            or the JSON-RPC error code (``"-32602"``); None when there is none to tell.
        started: when the request arrived (a task: when the call that created it arrived),
            an aware UTC datetime.
        duration: [seconds] from :attr:`started` to the end (a task's run included).
        user: whom the call acted for: the name of the site's user under a framework view
            (``get_username()``, else ``username``, else ``get_id()``, else ``str(user)``),
            else the access token's subject; None without either (authorization off, stdio).
        subject: the access token's subject; None without authorization.
        client: the key the client's fair shares count under (``principal [...]`` with
            authorization, else ``address <client address>``); None over stdio.
        protocol_version: the protocol revision the request speaks, as the MCP
            specification names it (``2025-06-18``, ``2025-11-25``, ``2026-07-28`` ...):
            the session's in the handshake era, the request's own in 2026-07-28.
        session: the session's fingerprint (never its id) in the handshake era; None in
            2026-07-28.
        task_id: the task's id, for a call that ran as a task; else None.
    """

    method: str
    tool: str | None
    arguments: tuple[str, ...]
    values: dict[str, Any] | None
    outcome: str
    reason: str | None
    started: datetime
    duration: float
    user: str | None
    subject: str | None
    client: str | None
    protocol_version: str | None
    session: str | None = None
    task_id: str | None = None


class AuditTrail:
    """Where a server's audit records go: the ``zemcp.audit`` log and the site's hooks.

    Args:
        settings: ``audit_log`` (write each record on the ``zemcp.audit`` logger) and
            ``audit_argument_values`` (put argument values in the records).

    Attributes:
        logs: whether records are written on the ``zemcp.audit`` logger.
        values: whether records carry argument values.
        left_out: True once a pipeline was built without the audit layer (nothing to record
            then); a hook registered later would never be called, so :meth:`add_hook` refuses it.
    """

    def __init__(self, settings: Settings):
        self.logs = settings.audit_log
        self.values = settings.audit_argument_values
        self.left_out = False
        self._hooks: list[AuditHook] = []

    @property
    def active(self) -> bool:
        """Whether records are made at all: the log is on, or a hook is registered."""
        return self.logs or bool(self._hooks)

    def add_hook(self, hook: AuditHook) -> None:
        """Hand every record to ``hook`` from now on (see :meth:`zemcp.Server.on_audit`).

        Raises:
            TypeError: ``hook`` is not callable.
            RuntimeError: the server is served already without the audit layer.
        """
        if not callable(hook):
            raise TypeError(f"an audit hook must be callable as hook(record), got {hook!r}")
        if self.left_out:
            raise RuntimeError(
                "this server is served already (McpApp(server), zemcp.django.view(server) or stdio was built) "
                "without the audit layer, so this hook would never be called: register audit hooks before the "
                "server is served (in the module that makes the server, or in an app's mcp.py in a Django site), or turn "
                "ZEMCP_AUDIT_LOG on"
            )
        self._hooks.append(hook)

    def arguments(self, arguments: Any) -> tuple[tuple[str, ...], dict[str, Any] | None]:
        """The argument names of a request's ``arguments`` and, when :attr:`values` is on, a copy of them.

        Returns:
            ``(names, values or None)``; ``((), None)`` for arguments that are not an object.
        """
        if not isinstance(arguments, dict):
            return (), None
        names = tuple(str(name) for name in arguments)
        return names, (dict(arguments) if self.values else None)

    def record(self, record: AuditRecord) -> None:
        """Write ``record`` on the ``zemcp.audit`` logger (when :attr:`logs`), then hand it to
        every hook, in registration order. Never raises: a hook that raises is logged on
        ``zemcp.audit`` with its traceback, and the call and the other hooks go on."""
        if self.logs:
            _log(record)
        for hook in self._hooks:
            try:
                hook(record)
            except Exception:
                audit_log.exception(
                    "the audit hook %s raised on the record of %s %s; the call was served",
                    getattr(hook, "__qualname__", repr(hook)),
                    record.method,
                    logsafe.clip(record.tool),
                    extra={"event": "audit_hook_failed"},
                )


def outcome(
    response: dict[str, Any] | None, ending: BaseException | None = None, raised: BaseException | None = None
) -> tuple[str, str | None]:
    """How a use ended: ``(one of OUTCOMES, reason or None)`` (see :class:`AuditRecord`).

    Args:
        response: the JSON-RPC response the client got (None: none, the request was cancelled).
        ending: the exception that ended the handler instead of a return (an outcome of
            asking the client, an abort, or what the handler raised), when one did.
        raised: the refusal or error that answered the request instead of its handler.
    """
    if raised is not None:
        if isinstance(raised, ProtocolError):
            return ERROR, str(raised.code)
        return REFUSED, type(raised).__name__
    reason = type(ending).__name__ if ending is not None else None
    if response is None:
        return CANCELLED, reason
    if ending is not None:
        return _ending(ending), reason
    error = response.get("error")
    if isinstance(error, dict):
        return ERROR, str(error.get("code"))
    result = response.get("result")
    if isinstance(result, dict):
        if result.get("isError") is True:
            return TOOL_ERROR, None
        if result.get("resultType") == INPUT_REQUIRED:
            return INPUT_REQUIRED, None
    return OK, None


def creates_task(response: Any) -> bool:
    """True when ``response`` answers a ``tools/call`` with a new task (``CreateTaskResult``:
    ``{"task": Task}`` in 2025-11-25, ``resultType: "task"`` in 2026-07-28), whose record
    the task's run makes when it ends."""
    result = response.get("result") if isinstance(response, dict) else None
    return isinstance(result, dict) and (result.get("resultType") == "task" or isinstance(result.get("task"), dict))


def user_name(user: Any) -> str | None:
    """A readable name of the user a call acted for: ``get_username()`` (Django), else
    ``username`` (Flask-Login's users often), else ``get_id()`` (Flask-Login's ``UserMixin``),
    else an access token's ``subject``, else ``str(user)``; None for no user."""
    if user is None:
        return None
    for name in ("get_username", "username", "get_id", "subject"):
        value = getattr(user, name, None)
        if callable(value):
            try:
                value = value()
            except Exception:
                continue
        if isinstance(value, str) and value:
            return value
    return str(user)


def token_subject(principal: Principal | None) -> str | None:
    """The subject of the access token a request carried: ``principal.subject``, unless the
    principal is a site's user's (:func:`zemcp.auth.principal.site_principal`, no token) or None."""
    if principal is None or principal.issuer == SITE:
        return None
    return principal.subject


def started_at(seconds: float) -> datetime:
    """``seconds`` since the epoch (``time.time()``) as an aware UTC datetime."""
    return datetime.fromtimestamp(seconds, UTC)


def since(started: float) -> float:
    """[seconds] from ``started`` (``time.time()``) to now, never negative, to the microsecond."""
    return round(max(0.0, time.time() - started), 6)


#: The outcome of each exception that ends a call with its own word; others: :func:`_ending`.
_ENDINGS: dict[type[BaseException], str] = {
    ElicitDeclined: DECLINED,
    ElicitCancelled: DECLINED,
    ElicitTimeout: TIMEOUT,
    ClientTimeout: TIMEOUT,
    ElicitTooMany: REFUSED,
}


def _ending(ending: BaseException) -> str:
    """The outcome of a call whose handler ended with ``ending``: an abort is a cancel, the rest a tool error."""
    for kind, word in _ENDINGS.items():
        if isinstance(ending, kind):
            return word
    return CANCELLED if isinstance(ending, ElicitAborted) else TOOL_ERROR


def _log(record: AuditRecord) -> None:
    extra: dict[str, Any] = {
        "event": "audit",
        "method": record.method,
        "tool": record.tool,
        "arguments": list(record.arguments),
        "outcome": record.outcome,
        "reason": record.reason,
        "duration": record.duration,
        "user": record.user,
        "subject": record.subject,
        "client": record.client,
        "protocol_version": record.protocol_version,
        "session": record.session,
        # A task's id lets its owner reach it: the log shows its start, as zemcp's task records do.
        "task_id": record.task_id[:8] if record.task_id is not None else None,
    }
    if record.values is not None:
        extra["values"] = json.dumps(record.values, default=str)
    who = record.user or record.client
    audit_log.info(
        "%s %s%s by %s%s: %s%s in %.3f s%s%s",
        record.method,
        logsafe.clip(record.tool) if record.tool is not None else "-",
        f" ({', '.join(logsafe.shorten(name, 40) for name in record.arguments[:20])})" if record.arguments else "",
        logsafe.clip(who) if who is not None else "the stdio client",
        f" over {record.protocol_version}" if record.protocol_version else "",
        record.outcome,
        f" ({record.reason})" if record.reason else "",
        record.duration,
        f" as task {record.task_id[:8]}" if record.task_id else "",
        f" with {logsafe.clip(record.values, 400)}" if record.values is not None else "",
        extra=extra,
    )
