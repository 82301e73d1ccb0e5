"""Task records in Redis (a :class:`zemcp.state.tasks.TaskStore`): any worker of any
instance answers ``tasks/get``, ``tasks/list``, ``tasks/result``, ``tasks/update`` and
``tasks/cancel`` for a task that runs in another.

A task is a JSON record under ``task:<id>``, listed in a sorted set of the deployment's tasks
(and of its client, and of its session), each scored by when the record expires: a finished
task at the end of its ttl, a running one a few minutes ahead, pushed on by the heartbeat of
the process that runs it, so the records of a process that died without a graceful stop
expire too. Until then a reader that finds such a task still running, its process's
heartbeat gone, marks it failed. Changes are optimistic transactions (``WATCH``); each is
announced on the node bus, which wakes the waiters of every process (a ``tasks/result``
stream, a task waiting for its answers, the runner that must see a cancel), and the waiters
look again every half second as well, since the bus delivers at most once.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from zemcp.protocol.tasks import FAILED
from zemcp.state.redis.client import Redis
from zemcp.state.redis.node import Node
from zemcp.state.tasks import TaskLimitReached, TaskRecord, Watchers
from zemcp.state.unavailable import StateUnavailable

#: [seconds] how far ahead a running task's record expires; its process renews it.
RUNNING_LIFE = 300.0
#: [seconds] how often a process renews the records of the tasks it runs.
RENEW_EVERY = 60.0
#: [seconds] the longest a waiter sleeps before it looks at the record again.
LOOK_AGAIN = 0.5
#: The status message of a task whose process died while it ran.
DIED = (
    "the server process running this task stopped without a graceful stop (it was killed or crashed); "
    "start the task again"
)
_FIELDS = {f.name for f in dataclasses.fields(TaskRecord)}

# KEYS: the deployment's set, the client's set, the session's set, the record.
# ARGV: id, max_tasks, per-client cap (0: none), record JSON, now ms, expiry ms, life ms,
# has client (1/0), has session (1/0). Returns 0, or 1 (process cap) / 2 (client share).
_CREATE = """
local function extend(key, ms)
  if redis.call('PTTL', key) < tonumber(ms) then redis.call('PEXPIRE', key, ms) end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[5])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 1 end
if ARGV[8] == '1' then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[5])
  if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return 2 end
  redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
  extend(KEYS[2], ARGV[7])
end
if ARGV[9] == '1' then
  redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
  extend(KEYS[3], ARGV[7])
end
redis.call('SET', KEYS[4], ARGV[4], 'PX', ARGV[7])
redis.call('ZADD', KEYS[1], ARGV[6], ARGV[1])
return 0
"""

# KEYS: sorted sets. ARGV: ms. Each set lives at least ms more (an expiry is never shortened).
_EXTEND = """
for _, key in ipairs(KEYS) do
  if redis.call('PTTL', key) < tonumber(ARGV[1]) then redis.call('PEXPIRE', key, ARGV[1]) end
end
return 0
"""


def _dump(record: TaskRecord) -> str:
    return json.dumps(dataclasses.asdict(record), separators=(",", ":"))


def _load(raw: bytes | str) -> TaskRecord:
    data = json.loads(raw)
    return TaskRecord(**{k: v for k, v in data.items() if k in _FIELDS})


def _expiry(record: TaskRecord, now: float) -> float:
    """[seconds since the epoch] when the record goes: a finished task when it expires."""
    expires = record.expires()
    if expires is not None:
        return max(now + 0.001, expires)
    return now + RUNNING_LIFE


class RedisTasks:
    """The task records of the deployment, in Redis.

    Args:
        redis: the shared state's connection.
        node: this process among the others (its id marks the tasks it runs; its bus carries changes).
        max_tasks: tasks the whole deployment holds at most.
        client_share: the fraction of it one client may hold.
    """

    shared = True

    def __init__(self, redis: Redis, node: Node, max_tasks: int, client_share: float):
        self.redis = redis
        self.node = node
        self._max = max_tasks
        self._per_client = max(1, int(max_tasks * client_share))
        self._create = redis.client.register_script(_CREATE)
        self._extend = redis.client.register_script(_EXTEND)
        self._cond = threading.Condition()
        self._watchers = Watchers()
        self._renewed = 0.0
        node.on_bus("task", self._changed_elsewhere)
        node.every_heartbeat(self._look_at_watched)

    def _key(self, task_id: str) -> str:
        return self.redis.key("task", task_id)

    def _sets(self, record: TaskRecord) -> list[str]:
        keys = [self.redis.key("tasks")]
        if record.client is not None:
            keys.append(self.redis.key("tasks", "client", record.client))
        if record.session is not None:
            keys.append(self.redis.key("tasks", "session", record.session))
        return keys

    def create(self, record: TaskRecord) -> None:
        """Keep a new record; every process finds it from now on.

        Raises:
            TaskLimitReached: the deployment holds ``max_tasks``, or the client its share.
            StateUnavailable: Redis cannot be reached.
        """
        record.node = self.node.ensure()
        record.updated = record.created
        now = time.time()
        expiry = _expiry(record, now)
        keys = [
            self.redis.key("tasks"),
            self.redis.key("tasks", "client", record.client or "-"),
            self.redis.key("tasks", "session", record.session or "-"),
            self._key(record.id),
        ]
        life = max(1, round((expiry - now) * 1000)) + round(RUNNING_LIFE * 1000)
        args: list[str | int] = [
            record.id,
            self._max,
            self._per_client,
            _dump(record),
            round(now * 1000),
            round(expiry * 1000),
            life,
            "1" if record.client is not None else "0",
            "1" if record.session is not None else "0",
        ]
        with self.redis.guard():
            refused = int(self._create(keys=keys, args=args))
        if refused == 1:
            raise TaskLimitReached(
                f"Too Many Requests: the deployment holds its maximum of {self._max} tasks (ZEMCP_MAX_TASKS), "
                f"running or finished and kept until their ttl; retry in {TaskLimitReached.retry_after} s"
            )
        if refused == 2:
            raise TaskLimitReached(
                f"Too Many Requests: this client holds its share of {self._per_client} tasks "
                f"(ZEMCP_MAX_TASKS x ZEMCP_CLIENT_SHARE); cancel tasks it no longer needs, or retry in "
                f"{TaskLimitReached.retry_after} s"
            )

    def get(self, task_id: str) -> TaskRecord | None:
        """The record, or None; a running task whose process died is marked failed first."""
        with self.redis.guard():
            raw = self.redis.client.get(self._key(task_id))
        if raw is None:
            return None
        record = _load(raw)
        if not record.terminal and record.node is not None and not self.node.alive(record.node):
            return self.update(task_id, _died) or record
        return record

    def owned(self, owner: str | None, session: str) -> list[TaskRecord]:
        """The records of ``session`` that ``owner`` may see, oldest first."""
        listing = self.redis.key("tasks", "session", session)
        with self.redis.guard():
            self.redis.client.zremrangebyscore(listing, "-inf", round(time.time() * 1000))
            ids = [i.decode() if isinstance(i, bytes) else str(i) for i in self.redis.client.zrange(listing, 0, -1)]
            raws = self.redis.client.mget([self._key(i) for i in ids]) if ids else []
        records = [_load(raw) for raw in raws if raw is not None]
        return sorted((r for r in records if r.belongs_to(owner, session)), key=lambda r: r.created)

    def update(self, task_id: str, change: Callable[[TaskRecord], bool]) -> TaskRecord | None:
        """Apply ``change`` in a transaction (again if another process changed the record
        meanwhile), announce it, and call this process's watchers.

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        key = self._key(task_id)
        with self.redis.guard():
            while True:
                with self.redis.client.pipeline() as pipe:
                    try:
                        pipe.watch(key)  # type: ignore[no-untyped-call, unused-ignore]  # untyped in redis-py
                        raw = pipe.get(key)
                        if raw is None:
                            return None
                        record = _load(raw)
                        if not change(record):
                            pipe.unwatch()
                            return record
                        now = time.time()
                        record.updated = max(now, record.updated)
                        record.version += 1
                        expiry = _expiry(record, now)
                        life = max(1, round((expiry - now) * 1000))
                        pipe.multi()
                        pipe.set(key, _dump(record), px=life)
                        self._list(pipe, record, expiry, life)
                        pipe.execute()
                        break
                    except redis.WatchError:
                        continue
            self.node.publish("task", task=task_id)
        self._woken(task_id, record)
        return record

    def wait(self, task_id: str, seen: int, timeout: float) -> TaskRecord | None:
        """The record once its version passed ``seen``, or after ``timeout`` [seconds]; None when gone."""
        deadline = time.monotonic() + timeout
        while True:
            record = self.get(task_id)
            remaining = deadline - time.monotonic()
            if record is None or record.version > seen or remaining <= 0:
                return record
            with self._cond:
                self._cond.wait(min(remaining, LOOK_AGAIN))

    def watch(
        self, task_id: str, callback: Callable[[TaskRecord], object], current: bool = False
    ) -> Callable[[], None]:
        """Call ``callback(record)`` after changes of the record in any process (by the bus,
        and at each heartbeat in case a message was lost), and with ``current`` first with
        the record as it is."""
        try:
            with self.redis.guard():
                raw = self.redis.client.get(self._key(task_id))
        except StateUnavailable:
            raw = None  # no baseline: the first look reports the record as it is
        now = _load(raw) if raw is not None else None
        # Without ``current``, what the record is now is no change: only later versions count.
        stop = self._watchers.add(task_id, callback, -1 if current or now is None else now.version)
        if current and now is not None:
            self._watchers.deliver(now)
        return stop

    def sweep(self, now: float | None = None) -> int:
        """Forget the listing of records past their expiry (the records expire on their own)."""
        moment = round((time.time() if now is None else now) * 1000)
        with self.redis.guard():
            return int(self.redis.client.zremrangebyscore(self.redis.key("tasks"), "-inf", moment))

    def __len__(self) -> int:
        with self.redis.guard():
            return int(self.redis.client.zcount(self.redis.key("tasks"), round(time.time() * 1000), "+inf"))

    # -- waking the waiters ------------------------------------------------------------------

    def _list(self, pipe: Any, record: TaskRecord, expiry: float, life: int) -> None:
        """(In ``pipe``.) Score the record in its sorted sets by ``expiry`` [seconds since the
        epoch], and let each set live at least ``life`` [ms] more (never shortened)."""
        listings = self._sets(record)
        for listing in listings:
            pipe.zadd(listing, {record.id: round(expiry * 1000)})
        self._extend(keys=listings, args=[life + round(RUNNING_LIFE * 1000)], client=pipe)

    def _changed_elsewhere(self, message: dict[str, Any]) -> None:
        task_id = message.get("task")
        with self._cond:
            self._cond.notify_all()
        if isinstance(task_id, str) and task_id in self._watchers.watched():
            record = self.get(task_id)
            if record is not None:
                self._woken(task_id, record)

    def _woken(self, task_id: str, record: TaskRecord) -> None:
        with self._cond:
            self._cond.notify_all()
        self._watchers.deliver(record)

    def _look_at_watched(self) -> None:
        """(On the heartbeat thread.) Look at the watched records, in case a bus message was
        lost; mark failed those whose process died; push on the expiry of the running ones
        this process runs."""
        ids = self._watchers.watched()
        if not ids:
            return
        with self.redis.guard():
            raws = self.redis.client.mget([self._key(i) for i in ids])
        records = [_load(raw) for raw in raws if raw is not None]
        me = self.node.ensure()
        alive: dict[str, bool] = {me: True}
        for record in records:
            node = record.node
            if not record.terminal and node is not None and node not in alive:
                alive[node] = self.node.alive(node)
            if not record.terminal and node is not None and not alive[node]:
                self.update(record.id, _died)
            else:
                self._woken(record.id, record)
        now = time.time()
        if now - self._renewed < RENEW_EVERY:
            return
        self._renewed = now
        expiry = now + RUNNING_LIFE
        life = round(RUNNING_LIFE * 1000)
        with self.redis.guard(), self.redis.client.pipeline(transaction=False) as pipe:
            for record in records:
                # Only this process's own: another's record must lapse if that process died.
                if not record.terminal and record.node == me:
                    pipe.pexpire(self._key(record.id), life)
                    self._list(pipe, record, expiry, life)
            pipe.execute()


def _died(record: TaskRecord) -> bool:
    if record.terminal:
        return False
    record.status, record.message = FAILED, DIED
    record.error = {"code": -32603, "message": DIED}
    record.inputs.clear()
    record.outbox.clear()
    return True
