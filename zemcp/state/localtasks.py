"""The in-process task store (every state backend so far): the records of this process's tasks.

Reads and changes go through one condition variable, which also wakes whoever waits for a
task to change (a ``tasks/result`` stream, a task waiting for its answers). Finished tasks
are forgotten once their ttl has passed, looked for at most once a second.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable

from zemcp.state.tasks import TaskLimitReached, TaskRecord, Watchers


class LocalTasks:
    """The task records of one process, for :class:`zemcp.state.tasks.TaskStore`.

    Args:
        max_tasks: records held at most, running or finished and not yet expired.
        client_share: the fraction of ``max_tasks`` one client may hold (at least one).
    """

    shared = False

    def __init__(self, max_tasks: int, client_share: float):
        self._cond = threading.Condition()
        self._tasks: dict[str, TaskRecord] = {}
        self._max = max_tasks
        self._per_client = max(1, int(max_tasks * client_share))
        self._swept = 0.0
        self._watchers = Watchers()

    def create(self, record: TaskRecord) -> None:
        """Keep a new record (a ``tasks/get`` finds it from now on).

        Raises:
            TaskLimitReached: the process or the record's client holds its maximum of tasks.
        """
        now = time.time()
        with self._cond:
            self._sweep(now, force=len(self._tasks) >= self._max)
            if len(self._tasks) >= self._max:
                raise TaskLimitReached(
                    f"Too Many Requests: this process holds its maximum of {self._max} tasks (ZEMCP_MAX_TASKS), "
                    f"running or finished and kept until their ttl; retry in {TaskLimitReached.retry_after} s, "
                    f"when some may have expired"
                )
            if record.client is not None:
                held = sum(1 for t in self._tasks.values() if t.client == record.client)
                if held >= self._per_client:
                    raise TaskLimitReached(
                        f"Too Many Requests: this client holds its share of {self._per_client} tasks "
                        f"(ZEMCP_MAX_TASKS x ZEMCP_CLIENT_SHARE); cancel tasks it no longer needs, or retry in "
                        f"{TaskLimitReached.retry_after} s, when its finished ones may have expired"
                    )
            record.updated = record.created
            self._tasks[record.id] = copy.deepcopy(record)

    def get(self, task_id: str) -> TaskRecord | None:
        """A copy of the record, or None when there is none (never was, or expired)."""
        with self._cond:
            self._sweep(time.time())
            record = self._tasks.get(task_id)
            return copy.deepcopy(record) if record is not None else None

    def owned(self, owner: str | None, session: str) -> list[TaskRecord]:
        """Copies of the records of ``session`` that ``owner`` may see, oldest first."""
        with self._cond:
            self._sweep(time.time())
            mine = [t for t in self._tasks.values() if t.session == session and t.belongs_to(owner, session)]
            return [copy.deepcopy(t) for t in sorted(mine, key=lambda t: t.created)]

    def update(self, task_id: str, change: Callable[[TaskRecord], bool]) -> TaskRecord | None:
        """Apply ``change`` to the record (it returns True when it changed something) and wake
        whoever waits for the task.

        Returns:
            a copy of the record after the change; None when there is no record.
        """
        with self._cond:
            record = self._tasks.get(task_id)
            if record is None:
                return None
            changed = change(record)
            if changed:
                record.updated = max(time.time(), record.updated)
                record.version += 1
                self._cond.notify_all()
            after = copy.deepcopy(record)
        if changed:
            self._watchers.deliver(after)
        return after

    def watch(
        self, task_id: str, callback: Callable[[TaskRecord], object], current: bool = False
    ) -> Callable[[], None]:
        """Call ``callback(record)`` after each change of the record (on the changing thread),
        and with ``current`` first with the record as it is."""
        with self._cond:
            record = self._tasks.get(task_id)
            now = copy.deepcopy(record) if record is not None else None
        stop = self._watchers.add(task_id, callback, -1 if current or now is None else now.version)
        if current and now is not None:
            self._watchers.deliver(now)
        return stop

    def wait(self, task_id: str, seen: int, timeout: float) -> TaskRecord | None:
        """Wait up to ``timeout`` [seconds] for the record to change after ``seen`` (its
        ``version`` as last read); returns a copy of it (changed or not), None when it is gone."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                record = self._tasks.get(task_id)
                if record is None or record.version > seen:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            return copy.deepcopy(record) if record is not None else None

    def sweep(self, now: float | None = None) -> int:
        """Forget finished tasks whose ``ttl`` has passed; returns how many."""
        with self._cond:
            return self._sweep(time.time() if now is None else now, force=True)

    def _sweep(self, now: float, force: bool = False) -> int:
        # At most once a second: every read passes here.
        if not force and now - self._swept < 1.0:
            return 0
        self._swept = now
        gone = [task_id for task_id, record in self._tasks.items() if record.expired(now)]
        for task_id in gone:
            del self._tasks[task_id]
        if gone:
            self._cond.notify_all()
        return len(gone)

    def __len__(self) -> int:
        with self._cond:
            return len(self._tasks)
