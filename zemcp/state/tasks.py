"""Task records and the seam of their store (:class:`TaskStore`).

A task (MCP 2025-11-25 basic/utilities/tasks; the 2026-07-28 tasks extension) outlives the
request that created it: its record is what ``tasks/get`` reads, and it keeps the outcome
until the task's ``ttl`` has passed. The thread that runs a task stays in the process that
created it (:mod:`zemcp.core.tasks`); the store is where its status, outcome and questions
meet the requests that read and answer them. The in-process store is
:class:`zemcp.state.localtasks.LocalTasks`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from zemcp.protocol.tasks import TERMINAL, WORKING

#: A finished task is kept at least this many poll intervals after it ended, whatever its ttl.
FINISHED_POLLS = 3


class TaskLimitReached(Exception):
    """The process (or the client) holds as many tasks as it may (HTTP 429 with ``Retry-After``).

    Attributes:
        status: the HTTP status it is answered with.
        reason: what it is counted under (the refusals metric of zemcp.observe).
        retry_after: [seconds] when to try again.
    """

    status = 429
    reason = "tasks"
    retry_after = 30


@dataclass
class TaskRecord:
    """One task as the store keeps it.

    Attributes:
        id: the ``taskId`` (unguessable).
        owner: the principal key with authorization on, else None.
        session: the handshake-era session it belongs to, None in 2026-07-28.
        client: whose share of ``max_tasks`` it counts in (the client key), or None.
        modern: True when created by a 2026-07-28 request (the extension's shapes apply).
        tool: the tool it runs.
        created, updated: [seconds since the epoch] creation and last change.
        version: how many changes the record has seen (what :meth:`TaskStore.wait` compares).
        ttl: [seconds] how long after ``created`` it is kept; None for ever.
        poll: [seconds] the suggested interval between polls.
        status: ``working``, ``input_required``, ``completed``, ``failed`` or ``cancelled``.
        message: ``statusMessage``, or None.
        result: the request's result once it ended with one.
        error: the request's JSON-RPC error object once it ended with one.
        inputs: (2026-07-28) the open questions, key -> ``{"method", "params"}``.
        answers: (2026-07-28) answers that arrived by ``tasks/update``, key -> result,
            until the task takes them.
        keys: (2026-07-28) every input key used so far (keys are never reused).
        outbox: (2025-11-25) the server-to-client requests of the question being asked,
            which every ``tasks/result`` stream of the task sends (in any process).
        node: the process that runs it, where the store is shared (else None).
    """

    id: str
    owner: str | None
    session: str | None
    client: str | None
    modern: bool
    tool: str
    created: float
    ttl: float | None
    poll: float
    updated: float = 0.0
    version: int = 0
    status: str = WORKING
    message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    outbox: list[dict[str, Any]] = field(default_factory=list)
    node: str | None = None

    @property
    def terminal(self) -> bool:
        """True once the status is ``completed``, ``failed`` or ``cancelled`` (it never changes again)."""
        return self.status in TERMINAL

    def expires(self) -> float | None:
        """[seconds since the epoch] when a finished task is forgotten: its ``ttl`` after its
        creation, but never sooner than three poll intervals (at least 1 s) after it ended,
        so a client that polls as told can read the outcome; None while it runs (or without a ttl)."""
        if not self.terminal or self.ttl is None:
            return None
        return max(self.created + self.ttl, self.updated + max(FINISHED_POLLS * self.poll, 1.0))

    def expired(self, now: float) -> bool:
        """True when a finished task is to be forgotten (:meth:`expires`)."""
        expires = self.expires()
        return expires is not None and now >= expires

    def belongs_to(self, owner: str | None, session: str | None) -> bool:
        """True when a request of ``owner`` (and ``session``, handshake era) may see it."""
        return self.owner == owner and (self.session is None or self.session == session)


class TaskStore(Protocol):
    """The records of tasks (MCP 2025-11-25 basic/utilities/tasks, the 2026-07-28 tasks
    extension): what ``tasks/get`` reads, and where a running task's status, outcome and
    questions meet the requests that read and answer them. Every method returns copies.

    Attributes:
        shared: True when every process reads the same records.
    """

    shared: bool

    def create(self, record: TaskRecord) -> None:
        """Keep a new record; a ``get`` finds it from the moment this returns.

        Raises:
            zemcp.state.tasks.TaskLimitReached: ``max_tasks``, or the client's share of it, is held.
        """

    def get(self, task_id: str) -> TaskRecord | None:
        """The record, or None (never was, or expired)."""

    def owned(self, owner: str | None, session: str) -> list[TaskRecord]:
        """The records of handshake-era ``session`` that ``owner`` may see, oldest first."""

    def update(self, task_id: str, change: Callable[[TaskRecord], bool]) -> TaskRecord | None:
        """Apply ``change`` (True when it changed something) at once for every reader; None when there is no record."""

    def wait(self, task_id: str, seen: int, timeout: float) -> TaskRecord | None:
        """The record once it changed after ``seen`` (its ``version``), or after ``timeout`` [seconds]; None when gone."""

    def watch(
        self, task_id: str, callback: Callable[[TaskRecord], object], current: bool = False
    ) -> Callable[[], None]:
        """Call ``callback(record)`` after changes of the record, made in any process (on
        another thread; versions in order, a shared store may skip some), and with
        ``current`` first with the record as it is; returns the function that stops it."""

    def sweep(self, now: float | None = None) -> int:
        """Forget finished tasks past their ttl; returns how many."""

    def __len__(self) -> int: ...


class Watchers:
    """The callbacks of :meth:`TaskStore.watch`, by task id (for the stores' own use). Each
    callback gets a task's versions in order, each once: an older one that arrives late (two
    changes told on two threads) is dropped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_task: dict[str, list[_Watcher]] = {}

    def add(self, task_id: str, callback: Callable[[TaskRecord], object], seen: int = -1) -> Callable[[], None]:
        """Watch ``task_id`` with ``callback``, for versions after ``seen``; returns the function that stops it."""
        watcher = _Watcher(callback, seen)
        with self._lock:
            self._by_task.setdefault(task_id, []).append(watcher)

        def stop() -> None:
            with self._lock:
                watchers = self._by_task.get(task_id, [])
                if watcher in watchers:
                    watchers.remove(watcher)
                if not watchers:
                    self._by_task.pop(task_id, None)

        return stop

    def deliver(self, record: TaskRecord) -> None:
        """Give ``record`` to the callbacks watching it that have not seen this version."""
        with self._lock:
            watchers = list(self._by_task.get(record.id, ()))
        for watcher in watchers:
            watcher.deliver(record)

    def watched(self) -> list[str]:
        """The task ids watched now."""
        with self._lock:
            return list(self._by_task)


class _Watcher:
    def __init__(self, callback: Callable[[TaskRecord], object], seen: int):
        self._lock = threading.Lock()
        self._callback = callback
        self._seen = seen

    def deliver(self, record: TaskRecord) -> None:
        # Under its own lock, so that two threads cannot hand it versions out of order.
        with self._lock:
            if record.version <= self._seen:
                return
            self._seen = record.version
            self._callback(record)
