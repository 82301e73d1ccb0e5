"""A session whose record is in Redis, as one process serves it (:class:`RedisSession`)."""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

from zemcp.state.session import Session
from zemcp.state.streamlogs import StreamLogs


class Record(Protocol):
    """What a :class:`RedisSession` writes through to and reads from (the session store)."""

    instance: str

    def write(self, session_id: str, field: str, value: str) -> None:
        """Set one changing field of the session's record."""

    def initialized(self, session_id: str) -> bool:
        """True when the record says the client sent ``notifications/initialized``."""

    def subscribe(self, session_id: str, uri: str, limit: int) -> bool:
        """Add ``uri`` to the session's subscriptions; False at ``limit``."""

    def unsubscribe(self, session_id: str, uri: str) -> None:
        """Remove ``uri`` from the session's subscriptions."""

    def is_subscribed(self, session_id: str, uri: str) -> bool:
        """True when ``uri`` is among the session's subscriptions."""

    def publish_cancel(self, session_id: str, request_id: Any, reason: str | None) -> None:
        """Tell every process to cancel ``request_id`` of the session where it runs."""


class RedisSession(Session):
    """A session whose record is in Redis, as one process serves it.

    What a request may change (the log level, ``notifications/initialized``, resource
    subscriptions) is written through to Redis, so the next request reads it on whichever
    process serves it; running requests and the waits of their handlers stay here.

    Args:
        store: the store it belongs to.
        session_id: its id.
        fields: its record (``v``, ``ci``, ``caps``, ``p``, ``c``, ``lvl``, ``init``).
        streams: its stream logs.
    """

    def __init__(self, store: Record, session_id: str, fields: dict[str, str], streams: StreamLogs):
        self._store: Record | None = None
        self._log_level: str | None = fields.get("lvl") or "info"
        super().__init__(
            fields["v"],
            json.loads(fields["ci"]),
            json.loads(fields["caps"]),
            store.instance,
            fields.get("p") or None,
            streams,
        )
        self.id = session_id
        self.created = float(fields["c"])
        self.log_level = fields.get("lvl") or "info"
        if fields.get("init") == "1":
            self._initialized.set()
        self._store = store
        #: [monotonic seconds] when the record was last read from Redis.
        self.verified = time.monotonic()

    @property
    def log_level(self) -> str | None:
        """The lowest ``notifications/message`` level sent (``logging/setLevel``), shared."""
        return self._log_level

    @log_level.setter
    def log_level(self, level: str | None) -> None:
        self._log_level = level
        if self._store is not None:
            self._store.write(self.id, "lvl", level or "")

    def refresh(self, fields: dict[str, str]) -> None:
        """Take the changing fields another process may have written."""
        self._log_level = fields.get("lvl") or self._log_level
        if fields.get("init") == "1":
            self._initialized.set()
        self.verified = time.monotonic()

    def mark_initialized(self) -> None:
        """Record ``notifications/initialized`` here and in Redis."""
        super().mark_initialized()
        if self._store is not None:
            self._store.write(self.id, "init", "1")

    def _await_initialized(self, grace: float) -> bool:
        # The notification may have reached another process: look in Redis every 20 ms.
        deadline = time.monotonic() + grace
        while True:
            if self._store is not None and self._store.initialized(self.id):
                self._initialized.set()
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if self._initialized.wait(min(0.02, remaining)):
                return True

    def subscribe(self, uri: str, limit: int) -> bool:
        """Record ``resources/subscribe`` of ``uri`` in Redis; False at ``limit``."""
        assert self._store is not None
        return self._store.subscribe(self.id, uri, limit)

    def unsubscribe(self, uri: str) -> None:
        """Forget the subscription to ``uri`` in Redis."""
        assert self._store is not None
        self._store.unsubscribe(self.id, uri)

    def subscribed(self, uri: str) -> bool:
        """True when the session subscribed to ``uri`` (asked of Redis)."""
        assert self._store is not None
        return self._store.is_subscribed(self.id, uri)

    def relay_cancel(self, request_id: Any, reason: str | None) -> None:
        """Tell every process: the one that runs ``request_id`` of this session cancels it."""
        assert self._store is not None
        self._store.publish_cancel(self.id, request_id, reason)

    def busy(self) -> bool:
        """True while this process runs a request or a task of it or reads its standalone stream."""
        if self.calls() or self.tasks:
            return True
        standalone = self.streams.standalone
        return standalone is not None and standalone.attached and not standalone.finished
