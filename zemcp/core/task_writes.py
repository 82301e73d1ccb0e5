"""The changes a runner makes to its tasks' records, kept while the store does not answer.

MCP 2025-11-25 basic/utilities/tasks and the 2026-07-28 tasks extension: what ``tasks/get``
reads of a task is its record, and a running task's handler changes it: its start, its status
messages (``ctx.report_progress``), its outcome. With the records in Redis, an outage (a
failover, a restart) must not fail the task nor lose its outcome, as it fails no plain call:
:class:`KeptWrites` writes each change at once while the store answers; when it does not
(:class:`zemcp.state.unavailable.StateUnavailable`), it keeps the task's latest change of each
kind and one thread of its own writes them when the store answers again, until the task's
ttl ends. A change still unwritten then is lost, and logged.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from zemcp.state.unavailable import StateUnavailable

if TYPE_CHECKING:
    from zemcp.state.tasks import TaskRecord, TaskStore

log = logging.getLogger("zemcp.tasks")

#: [seconds] between two tries of the kept changes while the store does not answer.
RETRY_EVERY = 0.5

Change = Callable[["TaskRecord"], bool]


class Kept(enum.Enum):
    """What :meth:`KeptWrites.write` returns for a change it kept, to write later."""

    KEPT = "kept"


#: A change kept for later (:meth:`KeptWrites.write`).
KEPT = Kept.KEPT


@dataclass
class _Waiting:
    """The kept changes of one task, by kind, oldest first."""

    until: float
    since: float = field(default_factory=time.monotonic)
    changes: dict[str, Change] = field(default_factory=dict)


class KeptWrites:
    """Changes of task records, written at once or, while the store does not answer, kept and
    written when it answers again (the latest change of a kind wins).

    While any change waits, a new one waits too, without asking the store: a handler's thread
    waits for an unreachable store at most once (``ZEMCP_REDIS_TIMEOUT``, tried twice) per
    outage, and one task's changes are written in the order they were made.

    Args:
        store: where the records are.
        retry_every: [seconds] between two tries while the store does not answer.
    """

    def __init__(self, store: TaskStore, retry_every: float = RETRY_EVERY):
        self._store = store
        self._retry_every = retry_every
        self._cond = threading.Condition()
        self._waiting: dict[str, _Waiting] = {}
        self._writer: threading.Thread | None = None

    @property
    def kept(self) -> int:
        """How many tasks have changes waiting for the store."""
        with self._cond:
            return len(self._waiting)

    def write(self, task_id: str, kind: str, change: Change, until: float) -> TaskRecord | Literal[Kept.KEPT] | None:
        """Apply ``change`` to the task's record (:meth:`zemcp.state.tasks.TaskStore.update`),
        or keep it to apply when the store answers again.

        Args:
            task_id: the task.
            kind: what the change sets (``start``, ``status``, ``end``): a kept change of the
                same kind is replaced, and the new one goes after the others.
            change: returns True when it changed the record; it may be called more than once.
            until: [seconds since the epoch] when a kept change is given up (the task's ttl).
        Returns:
            the record after the change, None when there is no record, :data:`KEPT` when kept.
        """
        with self._cond:
            # The store did not answer lately: this change waits behind the others.
            first = self._keep(task_id, kind, change, until) if self._waiting else None
        if first is None:
            try:
                return self._store.update(task_id, change)
            except StateUnavailable:
                with self._cond:
                    first = self._keep(task_id, kind, change, until)
        if first:
            log.warning(
                "task %s: its %s could not be written now (the task store does not answer); it is kept and "
                "written when the store answers again, within the task's ttl",
                task_id[:8],
                kind,
                extra={"event": "task_write_kept"},
            )
        return KEPT

    def _keep(self, task_id: str, kind: str, change: Change, until: float) -> bool:
        """(Under the lock.) Keep ``change``; True when it is the task's first kept one."""
        waiting = self._waiting.get(task_id)
        first = waiting is None
        if waiting is None:
            waiting = self._waiting[task_id] = _Waiting(until)
        waiting.until = max(waiting.until, until)
        waiting.changes.pop(kind, None)  # the latest of a kind wins, and comes last
        waiting.changes[kind] = change
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_kept, name="zemcp-task-writes", daemon=True)
            self._writer.start()
        return first

    def _write_kept(self) -> None:
        """(The writer's thread.) Write the kept changes until none is left, retrying every
        :attr:`_retry_every` while the store does not answer; give up those past their ``until``."""
        while True:
            now = time.time()
            with self._cond:
                lost = {task_id: list(w.changes) for task_id, w in self._waiting.items() if now > w.until}
                for task_id in lost:
                    del self._waiting[task_id]
                if not self._waiting:
                    self._writer = None
                rounds = [(task_id, waiting, dict(waiting.changes)) for task_id, waiting in self._waiting.items()]
            for task_id, kinds in lost.items():
                log.error(
                    "task %s: its %s could not be written within the task's ttl (the task store did not answer); "
                    "it is lost",
                    task_id[:8],
                    ", ".join(kinds),
                    extra={"event": "task_write_lost"},
                )
            if not rounds:
                return
            for task_id, waiting, changes in rounds:
                if not self._write_one(task_id, waiting, changes):
                    time.sleep(self._retry_every)
                    break

    def _write_one(self, task_id: str, waiting: _Waiting, changes: dict[str, Change]) -> bool:
        """Write one task's kept ``changes``; False when the store still does not answer."""
        try:
            record = self._store.update(task_id, _all(list(changes.values())))
        except StateUnavailable:
            return False
        except Exception:
            # Not the store's absence: trying again would fail again.
            log.exception("task %s: its kept %s could not be written", task_id[:8], ", ".join(changes))
            record = None
        with self._cond:
            # Only what was written goes: a change made meanwhile stays for the next round.
            for kind, change in changes.items():
                if waiting.changes.get(kind) is change:
                    del waiting.changes[kind]
            if not waiting.changes and self._waiting.get(task_id) is waiting:
                del self._waiting[task_id]
        if record is not None:
            log.info(
                "task %s: its kept %s written after %.1f s (now %s)",
                task_id[:8],
                ", ".join(changes),
                time.monotonic() - waiting.since,
                record.status,
                extra={"event": "task_write_done"},
            )
        return True


def _all(changes: list[Change]) -> Change:
    """One change that applies ``changes`` in order (True when any changed the record)."""

    def apply(record: TaskRecord) -> bool:
        changed = False
        for change in changes:
            changed = change(record) or changed
        return changed

    return apply
