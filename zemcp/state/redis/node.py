"""This process among the others that share one Redis: its node id, heartbeat, inbox and bus.

A running call and the thread that waits for its answers stay in the process that runs
them. What must reach that process from another one travels here:

- the **inbox** (a Redis list per node, read with ``BLPOP``): a message for one node, such
  as an elicitation answer POSTed to another worker and claimed there for the request that
  waits here (:mod:`zemcp.state.redis.waiting`);
- the **bus** (one pub/sub channel): a message for every node, such as a session's end, a
  ``notifications/cancelled``, or a list change; pub/sub delivers at most once, to the
  nodes connected at that moment;
- the **heartbeat**: a key per node that lives :data:`HEARTBEAT_TTL` seconds and is renewed
  every :data:`HEARTBEAT`, so that others learn within seconds that a node died (SIGKILL,
  OOM) and stop waiting for it.

The threads start on first use in each process (after gunicorn's fork: importing an app and
building its server asks nothing of Redis) and survive Redis outages: they retry with a
growing pause and resume when Redis is back.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from zemcp.state.redis.client import Redis
from zemcp.state.unavailable import StateUnavailable

log = logging.getLogger("zemcp.redis")

#: [seconds] how often a node renews its heartbeat.
HEARTBEAT = 1.0
#: [seconds] how long a heartbeat lives: a node silent this long is taken for dead.
HEARTBEAT_TTL = 3.0
#: [seconds] how long a missing heartbeat is looked for again before its node counts as dead.
DEATH_CHECK = 1.5 * HEARTBEAT
#: [seconds] the longest pause between two attempts to reach Redis again: a node is back
#: within about this long after Redis is.
MAX_PAUSE = 1.0

Handler = Callable[[dict[str, Any]], Any]


class Node:
    """This process's place among the processes that share one Redis.

    Args:
        redis: the shared state's connection.
        instance: the instance name (``Settings.instance``), the first part of the node id.

    Attributes:
        id: ``<instance>.<pid>.<random>``, new in every process (so a forked child is a new node).
    """

    def __init__(self, redis: Redis, instance: str):
        self.redis = redis
        self.instance = instance
        self._lock = threading.Lock()
        self._pid = 0
        self.id = ""
        self._bus: dict[str, Handler] = {}
        self._inbox: dict[str, Handler] = {}
        self._periodic: list[Callable[[], None]] = []
        self._closed = False
        self._hearing = threading.Event()

    # -- set-up ----------------------------------------------------------------------------

    def on_bus(self, kind: str, handler: Handler) -> None:
        """Call ``handler(message)`` for every bus message of ``kind`` another node publishes."""
        self._bus[kind] = handler

    def on_inbox(self, kind: str, handler: Handler) -> None:
        """Call ``handler(message)`` for every inbox message of ``kind`` (from :meth:`message`)."""
        self._inbox[kind] = handler

    def every_heartbeat(self, task: Callable[[], None]) -> None:
        """Run ``task()`` on the heartbeat thread after each heartbeat (errors are logged)."""
        self._periodic.append(task)

    def ensure(self) -> str:
        """This process's node id; starts the node's threads on first use in a process."""
        pid = os.getpid()
        if self._pid == pid or self._closed:
            return self.id
        with self._lock:
            if self._pid != pid:
                self.id = f"{self.instance}.{pid}.{secrets.token_hex(4)}"
                # A forked child hears the bus only once its own subscription is confirmed.
                self._hearing = threading.Event()
                # Started before the heartbeat is first written: once another process can see
                # this node, an announcement of this one must not be taken for one made before
                # it served (started), and dropped.
                self._pid = pid
                for target, name in (
                    (self._heartbeat_forever, "heartbeat"),
                    (self._inbox_forever, "inbox"),
                    (self._bus_forever, "bus"),
                ):
                    threading.Thread(target=target, args=(self.id,), name=f"zemcp-redis-{name}", daemon=True).start()
        return self.id

    def hears_bus(self, timeout: float) -> bool:
        """Start the node and wait up to ``timeout`` [seconds] until Redis confirmed its bus
        subscription: from then on, every bus message published reaches it. False when that
        did not happen in time (Redis is out of reach) or the node is closed."""
        self.ensure()
        return not self._closed and self._hearing.wait(timeout)

    @property
    def started(self) -> bool:
        """True once this process used the node (served a request that needs the shared state)."""
        return self._pid == os.getpid() and not self._closed

    # -- talking to other nodes ------------------------------------------------------------

    def alive(self, node_id: str) -> bool:
        """True while ``node_id`` renews its heartbeat (this process always is).

        A heartbeat found missing is looked for again for :data:`DEATH_CHECK` seconds before
        the node counts as dead: after Redis restarted, or an outage longer than the
        heartbeat's life, every node's heartbeat is missing until its next beat, and a live
        node must not be taken for a dead one (a dead node's stream would be ended).

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        if node_id == self.ensure():
            return True
        key = self.redis.key("node", node_id)
        deadline = time.monotonic() + DEATH_CHECK
        while True:
            with self.redis.guard():
                if self.redis.client.exists(key):
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def publish(self, kind: str, **fields: Any) -> None:
        """Tell every other node (at most once each, those connected now).

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        message = json.dumps({"kind": kind, "from": self.ensure(), **fields})
        with self.redis.guard():
            self.redis.client.publish(self.redis.key("bus"), message)

    def message(self, kind: str, timeout: float, **fields: Any) -> str:
        """An inbox message of ``kind`` carrying ``fields`` (JSON), to put in a node's inbox.

        Args:
            timeout: [seconds] how long the message stays worth acting on; a node that reads
                it later drops it.
        """
        return json.dumps({"kind": kind, "until": time.time() + timeout, **fields}, separators=(",", ":"))

    # -- the threads -----------------------------------------------------------------------

    def _current(self, node_id: str) -> bool:
        # A fork copies no thread: these run only in the process that started them, until it
        # closes the node (or, in a forked child, makes a new one).
        return self.id == node_id

    def close(self) -> None:
        """Stop this process's node: its threads end within a second, its heartbeat lapses."""
        with self._lock:
            self._closed = True
            self.id = ""

    def _retry(self, pause: float, exc: BaseException) -> float:
        if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
            self.redis.unavailable(exc)
        elif not isinstance(exc, StateUnavailable):
            log.exception("the Redis %s thread failed; it starts again", threading.current_thread().name)
        time.sleep(pause)
        return min(MAX_PAUSE, pause * 2)

    def _heartbeat_forever(self, node_id: str) -> None:
        key = self.redis.key("node", node_id)
        while self._current(node_id):
            try:
                with self.redis.guard():
                    self.redis.client.set(key, b"1", px=round(HEARTBEAT_TTL * 1000))
            except StateUnavailable:
                pass
            for task in self._periodic:
                try:
                    task()
                except StateUnavailable:
                    pass
                except Exception:
                    log.exception("a periodic task of the shared state failed")
            time.sleep(HEARTBEAT)

    def _inbox_forever(self, node_id: str) -> None:
        inbox = self.redis.key("inbox", node_id)
        pause = 0.1
        while self._current(node_id):
            try:
                popped = self.redis.blocking.blpop([inbox], timeout=1)
                pause = 0.1
            except Exception as exc:
                pause = self._retry(pause, exc)
                continue
            if popped is not None:
                self._serve(popped[1])

    def _serve(self, raw: bytes | str) -> None:
        try:
            message = json.loads(raw)
            handler = self._inbox.get(message.get("kind"))
            # Past its deadline the message is stale (its sender gave up on it).
            if handler is not None and time.time() <= message.get("until", 0):
                handler(message)
        except Exception:
            log.exception("an inbox message could not be served")

    def _bus_forever(self, node_id: str) -> None:
        channel = self.redis.key("bus")
        pause = 0.1
        while self._current(node_id):
            pubsub = self.redis.blocking.pubsub()  # type: ignore[no-untyped-call, unused-ignore]  # untyped before redis 8.2
            try:
                pubsub.subscribe(channel)
                pause = 0.1
                while self._current(node_id):
                    received = pubsub.get_message(timeout=1.0)
                    if received is None:
                        continue
                    if received.get("type") == "subscribe":
                        self._hearing.set()
                    elif received.get("type") == "message":
                        self._dispatch(node_id, received["data"])
            except Exception as exc:
                self._hearing.clear()
                pause = self._retry(pause, exc)
            finally:
                try:
                    pubsub.close()
                except Exception:
                    pass

    def _dispatch(self, node_id: str, raw: bytes | str) -> None:
        try:
            message = json.loads(raw)
            if message.get("from") == node_id:
                return  # the publisher acted on its own message already
            handler = self._bus.get(message.get("kind"))
            if handler is not None:
                handler(message)
        except Exception:
            log.exception("a bus message could not be handled")
