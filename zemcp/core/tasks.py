"""Tasks: a tool call that outlives its request, on a thread of the task pool.

MCP 2025-11-25 basic/utilities/tasks (SEP-1686) and the 2026-07-28 tasks extension
(SEP-2663): a task-augmented ``tools/call`` is answered at once with the new task; the
handler runs on a thread of this process's task pool (``Settings.task_threads``), counted
apart from the call budget, so long tasks never take the threads that answers, cancels and
pings need. The task's record (:class:`zemcp.state.tasks.TaskRecord`, in the server's
:class:`zemcp.state.tasks.TaskStore`) carries its status, its outcome until its ttl
ends, and its questions for the user.

The handler gets the same :class:`zemcp.Context` as in a plain call; its exchange here is a
:class:`zemcp.core.task_exchange.TaskExchange`, which asks the user as the task's era says.
The changes the runner makes to a running task's record (its start, its status messages, its
outcome) go through :class:`zemcp.core.task_writes.KeptWrites`, so that a task rides out an
outage of a shared store as a plain call does.
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from zemcp import logsafe
from zemcp.core import audit as audits
from zemcp.core.errors import CallFinished
from zemcp.core.task_exchange import TaskExchange
from zemcp.core.task_writes import KEPT, Change, Kept, KeptWrites
from zemcp.protocol import jsonrpc
from zemcp.protocol.elicitation import ElicitAborted, RequestCancelled, ServerStopping
from zemcp.protocol.tasks import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, WORKING, timestamp
from zemcp.state.session import fingerprint
from zemcp.state.tasks import FINISHED_POLLS, TaskLimitReached, TaskRecord
from zemcp.state.unavailable import StateUnavailable

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from zemcp.config import Settings
    from zemcp.protocol.capabilities import ClientView
    from zemcp.state.session import Session
    from zemcp.state.tasks import TaskStore
    from zemcp.state.waitingcalls import WaitingCalls

log = logging.getLogger("zemcp.tasks")


class TasksStopping(TaskLimitReached):
    """The process is stopping: it takes no new task (HTTP 503 with ``Retry-After``)."""

    status = 503
    reason = "stopping"
    retry_after = 2


def task_object(record: TaskRecord) -> dict[str, Any]:
    """The wire ``Task`` of a record, in the shape of the era that created it (``ttl`` and
    ``pollInterval`` in 2025-11-25, ``ttlMs`` and ``pollIntervalMs`` in 2026-07-28; both [ms])."""
    ttl = None if record.ttl is None else round(record.ttl * 1000)
    task: dict[str, Any] = {
        "taskId": record.id,
        "status": record.status,
        "createdAt": timestamp(record.created),
        "lastUpdatedAt": timestamp(record.updated),
    }
    if record.message is not None:
        task["statusMessage"] = record.message
    poll = max(1, round(record.poll * 1000))
    if record.modern:
        task.update(ttlMs=ttl, pollIntervalMs=poll)
    else:
        task.update(ttl=ttl, pollInterval=poll)
    return task


class TaskRunner:
    """The tasks of one server in this process: the task pool and the running tasks.

    Args:
        settings: ``task_threads``, ``task_ttl``, ``task_poll_interval``, ``elicitation_timeout``.
        store: where the task records live.
        table: the table of waiting calls (handshake-era questions wait there).
        execute: runs a handler with a Context on an exchange and returns its JSON-RPC
            response, None when it was cancelled (:meth:`zemcp.core.server.Server.execute`).
        abort: ends a running request's waits (:meth:`zemcp.core.server.Server.abort`).
        audit: where the audit record of each task's run goes when it ends (the call that
            created the task has none of its own); None, or an inactive trail, records nothing.

    Attributes:
        stopping: True once :meth:`stop` was called: no new task is taken.
    """

    def __init__(
        self,
        settings: Settings,
        store: TaskStore,
        table: WaitingCalls,
        execute: Callable[[Any, Any], dict[str, Any] | None],
        abort: Callable[[Any, ElicitAborted], None],
        *,
        audit: audits.AuditTrail | None = None,
    ):
        self.settings = settings
        self._audit = audit
        self.store = store
        self.table = table
        self._execute = execute
        self._abort = abort
        self._lock = threading.Condition()
        self._running: dict[str, TaskExchange] = {}
        self._writes = KeptWrites(store)
        self._pool: ThreadPoolExecutor | None = None
        self.stopping = False

    @property
    def running(self) -> int:
        """Tasks of this process not finished yet (running or waiting for a task thread)."""
        with self._lock:
            return len(self._running)

    def create(
        self,
        work: Any,
        client: ClientView,
        request: jsonrpc.Request,
        *,
        session: Session | None,
        client_key: str | None,
        ttl_ms: Any = None,
    ) -> TaskRecord:
        """Create a task that runs ``work`` (a :class:`zemcp.core.server.Work`) on the task pool.

        The record is in the store before this returns, so a ``tasks/get`` finds it at once.

        Args:
            work: the handler call (its principal owns the task).
            client: what the creating request declared.
            request: the creating ``tools/call`` (its ``_meta.progressToken`` stays valid).
            session: the handshake-era session, None in 2026-07-28.
            client_key: whose share of ``max_tasks`` it counts in.
            ttl_ms: [milliseconds] the retention the client asked for (2025-11-25
                ``params.task.ttl``, checked by the era), between 1 s and ``task_ttl``; None: ``task_ttl``.
        Returns:
            the new record.
        Raises:
            TaskLimitReached: ``max_tasks`` or the client's share of it is held.
            TasksStopping: the process is stopping.
        """
        if self.stopping:
            raise TasksStopping(
                f"Service Unavailable: this server process is stopping and takes no new task; retry in "
                f"{TasksStopping.retry_after} s (another process will take it)"
            )
        ttl = self.settings.task_ttl
        if isinstance(ttl_ms, (int, float)) and not isinstance(ttl_ms, bool) and math.isfinite(ttl_ms):
            ttl = min(max(ttl_ms / 1000, 1.0), ttl)
        now = time.time()
        with self._lock:
            # Counted with the ones submitted and not started yet: they take the threads first.
            queued = len(self._running) >= self.settings.task_threads
        meta = request.params.get("_meta")
        progress = meta.get("progressToken") if isinstance(meta, dict) else None
        record = TaskRecord(
            id=secrets.token_urlsafe(24),
            owner=work.auth.key if work.auth is not None else None,
            session=session.id if session is not None else None,
            client=client_key,
            modern=session is None,
            tool=work.target,
            created=now,
            ttl=ttl,
            poll=self.settings.task_poll_interval,
            message="waiting for a free task thread (ZEMCP_TASK_THREADS)" if queued else None,
        )
        self.store.create(record)
        exchange = TaskExchange(
            self,
            record.id,
            client,
            session,
            request.id,
            progress if jsonrpc.valid_id(progress) else None,
            self.settings.elicitation_timeout,
            client_key,
            None if record.ttl is None else record.created + record.ttl,
        )
        with self._lock:
            self._running[record.id] = exchange
        if session is not None:
            # A session with a running task is never idle (its client may poll rarely).
            session.task_running(True)
        # A cancel may come through any process (a shared store): the record tells this one.
        unwatch = self.store.watch(record.id, self._changed)
        try:
            self._task_pool().submit(self._run, record.id, work, exchange, unwatch, now)
        except RuntimeError:
            # The interpreter is shutting down: no thread will run it.
            unwatch()
            if session is not None:
                session.task_running(False)
            exchange.abort(ServerStopping())
            self._settle(record.id, exchange, None)
            with self._lock:
                self._running.pop(record.id, None)
            raise TasksStopping("Service Unavailable: this server process is stopping and takes no new task") from None
        log.info(
            "task %s created for tool %s", record.id[:8], logsafe.clip(work.target), extra={"event": "task_created"}
        )
        return record

    def _run(
        self, task_id: str, work: Any, exchange: TaskExchange, unwatch: Callable[[], None], created: float
    ) -> None:
        response = None
        try:
            if self.stopping:
                exchange.abort(ServerStopping())
            else:
                started = self.write(exchange, "start", _note_start)
                # Kept (the store does not answer): it runs, and a cancel made meanwhile reaches
                # it once the store answers. A task cancelled (or gone) before a thread took it
                # never runs its handler.
                runs = started is KEPT or (isinstance(started, TaskRecord) and not started.terminal)
                if runs and exchange.aborted is None:
                    response = self._execute(work, exchange)
        except BaseException:
            log.exception("task %s (tool %s) failed outside its handler", task_id[:8], logsafe.clip(work.target))
            response = jsonrpc.error(
                exchange.request_id, jsonrpc.INTERNAL_ERROR, "Internal error while running the task"
            )
        finally:
            unwatch()
            if exchange.session is not None:
                exchange.session.task_running(False)
            try:
                self._settle(task_id, exchange, response)
            finally:
                with self._lock:
                    self._running.pop(task_id, None)
                    self._lock.notify_all()
                if self._audit is not None and self._audit.active:
                    self._audit.record(_audit_record(task_id, work, exchange, response, created, self._audit))

    def write(self, exchange: TaskExchange, kind: str, change: Change) -> TaskRecord | Literal[Kept.KEPT] | None:
        """Apply ``change`` to the record of the task ``exchange`` runs, now or, while the store
        does not answer, when it answers again (:class:`zemcp.core.task_writes.KeptWrites`;
        the latest change of a ``kind`` wins), within the task's ttl.

        Args:
            exchange: the task's exchange.
            kind: ``start``, ``status`` or ``end`` (what the change sets).
            change: returns True when it changed the record; it may be called more than once.
        Returns:
            the record after the change, None when there is no record, ``KEPT`` when kept.
        """
        until = math.inf
        if exchange.ttl_end is not None:
            # A task that outran its ttl: as long as a finished one is kept at least (TaskRecord.expires).
            until = max(exchange.ttl_end, time.time() + max(FINISHED_POLLS * self.settings.task_poll_interval, 1.0))
        return self._writes.write(exchange.task_id, kind, change, until)

    def _settle(
        self, task_id: str, exchange: TaskExchange, response: dict[str, Any] | None, stopped: bool = False
    ) -> None:
        """Give the task its terminal status from the handler's response (a cancelled task stays
        cancelled); ``stopped``: the process stopped it (failed)."""
        stopped = stopped or isinstance(exchange.aborted, ServerStopping)
        settled = False

        def settle(record: TaskRecord) -> bool:
            nonlocal settled
            # Called again when a shared store retries the change: decide afresh each time.
            settled = False
            if record.terminal:
                return False
            settled = True
            record.inputs.clear()
            record.answers.clear()
            if stopped:
                record.status, record.message = FAILED, STOPPED_MESSAGE
                record.error = {"code": jsonrpc.INTERNAL_ERROR, "message": STOPPED_MESSAGE}
            elif response is None:
                record.status, record.message = CANCELLED, record.message or "cancelled"
            elif "error" in response:
                record.status, record.error = FAILED, response["error"]
                record.message = str(response["error"].get("message", "failed"))
            else:
                record.result = response["result"]
                # 2025-11-25: a tool's isError result fails the task; the extension keeps it completed.
                if record.result.get("isError") is True and not record.modern:
                    record.status, record.message = FAILED, _first_text(record.result) or "the tool reported an error"
                else:
                    record.status = COMPLETED
            return True

        record = self.write(exchange, "end", settle)
        # Only the change is logged (a task cancelled or failed earlier keeps its status); a
        # kept one is logged when it is written.
        if isinstance(record, TaskRecord) and settled:
            log.info("task %s %s", task_id[:8], record.status, extra={"event": "task_" + record.status})

    def cancel(self, task_id: str, why: str = "cancelled by the client") -> TaskRecord | None:
        """Set a task ``cancelled`` (unless it has ended); the process that runs it aborts its
        handler, which raises ``RequestCancelled`` at its next ``ctx`` use.

        Returns:
            the record after the change (it may have ended before), None when there is none.
        """

        def cancel(record: TaskRecord) -> bool:
            if record.terminal:
                return False
            record.status, record.message = CANCELLED, why
            record.inputs.clear()
            record.answers.clear()
            return True

        record = self.store.update(task_id, cancel)
        if record is not None and record.status == CANCELLED and record.message == why:
            log.info("task %s cancelled (%s)", task_id[:8], why, extra={"event": "task_cancelled"})
        # The process that runs it aborts its handler when it sees the record change (_changed).
        return record

    def _changed(self, record: TaskRecord) -> None:
        """A record of a task this process runs changed (here or elsewhere): a cancel aborts its handler."""
        if record.status != CANCELLED:
            return
        with self._lock:
            exchange = self._running.get(record.id)
        if exchange is not None:
            self._abort(exchange, RequestCancelled(f"the task was {record.message or 'cancelled'}"))

    def answer(self, task_id: str, responses: dict[str, Any]) -> TaskRecord | None:
        """(2026-07-28 ``tasks/update``) Hand in answers to the task's open questions, at once;
        keys that name no open question, and answers that are not objects, are ignored.

        Returns:
            the record after the change, None when there is none.
        """

        def take(record: TaskRecord) -> bool:
            changed = False
            for key, value in responses.items():
                if key in record.inputs and isinstance(value, dict):
                    record.answers[key] = value
                    del record.inputs[key]
                    changed = True
            if changed and not record.inputs and record.status == INPUT_REQUIRED:
                record.status = WORKING
            return changed

        return self.store.update(task_id, take)

    def attach(self, task_id: str, stream: Any) -> Callable[[], None]:
        """Send a 2025-11-25 task's notifications on ``stream`` (an open ``tasks/result``
        request's) while it is attached, if the task runs here; returns the function that
        detaches it. (Its questions travel in the record's ``outbox``, to every stream.)"""
        with self._lock:
            exchange = self._running.get(task_id)
        if exchange is None:
            return lambda: None
        return exchange.sink.attach(stream)

    def session_ended(self, session: Session) -> int:
        """Cancel the unfinished tasks of a session that ended (nobody can read them any more),
        in whichever process they run, unless this process is stopping; returns how many."""
        if self.stopping:
            return 0
        try:
            ended = [r for r in self.store.owned(session.principal, session.id) if not r.terminal]
            for record in ended:
                self.cancel(record.id, "cancelled because its session ended")
        except StateUnavailable as exc:
            # The session's end goes on; its tasks run out, and their records expire.
            log.warning("the tasks of an ended session could not be cancelled: %s", exc)
            return 0
        return len(ended)

    def stop(self, grace: float) -> int:
        """Take no new task; let the running ones finish within ``grace`` [seconds], then fail
        the rest with a status message saying so and abort their handlers. Returns at once
        (a thread of its own waits) unless ``grace`` is 0.

        Returns:
            how many tasks were still running.
        """
        self.stopping = True
        count = self.running
        if not count:
            return 0

        def finish_off() -> None:
            deadline = time.monotonic() + max(0.0, grace)
            with self._lock:
                while self._running and time.monotonic() < deadline:
                    self._lock.wait(min(1.0, max(0.0, deadline - time.monotonic())))
                left = list(self._running.items())
            for task_id, exchange in left:
                if isinstance(exchange.aborted, CallFinished):
                    continue  # its handler returned: its own thread settles it with its outcome
                self._abort(exchange, ServerStopping())
                self._settle(task_id, exchange, None, stopped=True)
            if left:
                log.warning(
                    "%d task handler(s) still running after the graceful stop's %g s; the unfinished tasks "
                    "among them were marked failed",
                    len(left),
                    grace,
                    extra={"event": "tasks_stopped"},
                )

        if grace <= 0:
            finish_off()
        else:
            threading.Thread(target=finish_off, name="zemcp-task-stop", daemon=True).start()
        return count

    def _task_pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=self.settings.task_threads, thread_name_prefix="zemcp-task")
            return self._pool


#: The status message of a task the process stopped before it finished.
STOPPED_MESSAGE = (
    "the server process running this task stopped before the task finished (it ran past the graceful "
    "stop); start it again"
)


def _audit_record(
    task_id: str,
    work: Any,
    exchange: TaskExchange,
    response: dict[str, Any] | None,
    created: float,
    trail: audits.AuditTrail,
) -> audits.AuditRecord:
    """The audit record of a task's run that ended with ``response`` (None: cancelled), for
    the user and client of the call that created it at ``created`` [seconds since the epoch]."""
    ended, reason = audits.outcome(response, exchange.ending)
    aborted = exchange.aborted
    if aborted is not None and not isinstance(aborted, CallFinished):
        # Cancelled (or stopped) before its handler ran, or while it ran: it ends so whatever the handler returned.
        ended, reason = audits.CANCELLED, type(aborted).__name__
    names, values = trail.arguments(work.arguments)
    subject = audits.token_subject(work.auth)
    session = exchange.session
    return audits.AuditRecord(
        method=work.method,
        tool=work.target,
        arguments=names,
        values=values,
        outcome=ended,
        reason=reason,
        started=audits.started_at(created),
        duration=audits.since(created),
        user=audits.user_name(work.user) or subject,
        subject=subject,
        client=exchange.client_key,
        protocol_version=exchange.client.protocol_version,
        session=fingerprint(session.id) if session is not None else None,
        task_id=task_id,
    )


def _note_start(record: TaskRecord) -> bool:
    # The "waiting for a thread" note is over once a thread runs it.
    if record.message is None or record.terminal:
        return False
    record.message = None
    return True


def _first_text(result: dict[str, Any]) -> str | None:
    for item in result.get("content", ()):
        if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
            return str(item["text"])[:500]
    return None
