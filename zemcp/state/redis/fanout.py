"""Change notifications that reach every process (a :class:`zemcp.state.fanout.FanOut`).

Two kinds of stream hear ``notify_list_changed`` and ``notify_resource_updated``:

- a 2026-07-28 ``subscriptions/listen`` stream is a response held open by one process and
  is not resumable: each process keeps its own (:class:`zemcp.state.subscriptions.SubscriptionHub`),
  and an announcement travels to the others on the bus;
- a handshake-era session's standalone GET stream has its event log in Redis, which any
  process can append to and any process can read: the sessions that have one are listed in
  a hash (session id -> stream id), and the announcing process appends the notification to
  each log once, so a client that resumes the stream elsewhere gets it too.

A process announces to the others once its node started: as it begins serving (under
gunicorn once the worker loaded the app, :func:`zemcp.core.server.serve_all`), else at its
first session, tool, prompt or resource request (:attr:`zemcp.state.seams.State.serving`);
the registrations made as the app is imported, before that, stay in the process.

An announcement that cannot reach Redis is logged and dropped (this process's own listen
streams are still told): registering a tool must never fail because Redis is down.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zemcp.protocol import jsonrpc
from zemcp.state.redis.client import Redis, text
from zemcp.state.redis.node import Node
from zemcp.state.session import fingerprint
from zemcp.state.subscriptions import LIST_CHANGED, SubscriptionHub
from zemcp.state.unavailable import StateUnavailable

if TYPE_CHECKING:
    from zemcp.state.fanout import Channel
    from zemcp.state.streamlogs import EventLog

log = logging.getLogger("zemcp.subscriptions")

#: [seconds] announcements of one kind closer than this are coalesced (see RedisFanOut).
COALESCE = 1.0
#: Announcement kinds (a list, a resource URI) remembered for coalescing at most.
MAX_REMEMBERED = 1024

# KEYS: the list of standalone streams. ARGV: session id, stream id pairs. Drops each entry
# that still names that stream (a session may have opened a new one meanwhile).
_FORGET = """
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then redis.call('HDEL', KEYS[1], ARGV[i]) end
end
return 1
"""


class RedisFanOut(SubscriptionHub):
    """Listen streams of this process, standalone streams of every process.

    Args:
        redis: the connection.
        node: this process's node (the bus carries announcements to the others).
        max_streams: ``subscriptions/listen`` streams this process holds at most.
        lifetime: [seconds] how long the list of standalone streams outlives its last use
            (the resumption window and a margin).
        log_of: ``log_of(session_id, stream_id)``: the standalone stream's event log, or
            None when it is gone.
    """

    def __init__(
        self,
        redis: Redis,
        node: Node,
        max_streams: int,
        lifetime: float,
        log_of: Callable[[str, str], EventLog | None],
    ):
        super().__init__(max_streams)
        self.redis = redis
        self.node = node
        self._lifetime_ms = round(lifetime * 1000)
        self._log_of = log_of
        self._standalone = redis.key("standalone")
        self._coalescing = threading.Lock()
        self._announced: dict[str, float] = {}
        self._trailing: set[str] = set()
        self._forget = redis.client.register_script(_FORGET)
        node.on_bus("list-changed", lambda message: self._local_list_changed(message.get("flag")))
        node.on_bus("resource-updated", lambda message: self._local_resource_updated(message.get("uri")))

    def open(
        self,
        subscription_id: jsonrpc.RequestId,
        acknowledged: dict[str, Any],
        kinds: frozenset[str],
        uris: frozenset[str],
        sink: Channel,
    ) -> Channel:
        """Listen on ``sink`` in this process (as the in-process hub does); the node's bus
        then brings the announcements of the other processes.

        The acknowledgement waits (``redis_timeout`` at most, in a process that just started
        its node) until Redis confirmed this process's bus subscription, so that the stream
        hears every announcement made anywhere after it; with Redis out of reach the stream
        opens anyway and hears this process's announcements until the bus is back.

        Raises:
            ListenLimitReached: this process holds ``max_streams`` listen streams.
        """
        self.node.hears_bus(self.redis.timeout)
        return super().open(subscription_id, acknowledged, kinds, uris, sink)

    def open_session(self, session_id: str, log: EventLog, subscribed: Callable[[str], bool]) -> None:
        """List a session's standalone stream (replacing an earlier one of the session).

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        self.node.ensure()
        with self.redis.guard():
            pipe = self.redis.client.pipeline(transaction=False)
            pipe.hset(self._standalone, session_id, log.id)
            pipe.pexpire(self._standalone, self._lifetime_ms)
            pipe.execute()

    def drop_session(self, session_id: str) -> None:
        """Forget a session's standalone stream (the session ended)."""
        try:
            with self.redis.guard():
                self.redis.client.hdel(self._standalone, session_id)
        except StateUnavailable:
            pass  # an entry whose log is gone is dropped at the next announcement

    def list_changed(self, flag: str) -> int:
        """Announce a list change to every listen and standalone stream of the deployment;
        returns how many this process told (its listen streams, and the standalone streams
        when it announced to the deployment now rather than coalesced it)."""
        told = self._local_list_changed(flag)

        def announce() -> int:
            self.node.publish("list-changed", flag=flag)
            return self._to_standalone(LIST_CHANGED[flag], {}, None)

        return told + self._coalesced(f"list:{flag}", announce)

    def resource_updated(self, uri: str) -> int:
        """Announce ``notifications/resources/updated`` for ``uri`` to the streams that asked
        for it in the deployment; returns how many this process told (as :meth:`list_changed`)."""
        told = self._local_resource_updated(uri)

        def announce() -> int:
            self.node.publish("resource-updated", uri=uri)
            return self._to_standalone("notifications/resources/updated", {"uri": uri}, uri)

        return told + self._coalesced(f"uri:{uri}", announce)

    def _coalesced(self, key: str, announce: Callable[[], int]) -> int:
        if not self.node.started:
            # Before this process served anything (registrations as the app is imported): no
            # other process's list changed, and no stream of this process exists yet.
            return 0
        # Announcements of one kind within COALESCE seconds become the first and one more at
        # the end, so a burst (a worker registering its tools as it starts, say) costs every
        # stream of the deployment two notifications, not one per registration.
        now = time.monotonic()
        with self._coalescing:
            last = self._announced.get(key)
            if last is not None and now - last < COALESCE:
                if key not in self._trailing:
                    self._trailing.add(key)
                    timer = threading.Timer(COALESCE - (now - last), self._trail, (key, announce))
                    timer.daemon = True
                    timer.start()
                return 0
            if len(self._announced) >= MAX_REMEMBERED:
                self._announced = {k: t for k, t in self._announced.items() if now - t < COALESCE}
            self._announced[key] = now
        return self._announce(announce)

    def _trail(self, key: str, announce: Callable[[], int]) -> None:
        with self._coalescing:
            self._trailing.discard(key)
            self._announced[key] = time.monotonic()
        self._announce(announce)

    def _announce(self, announce: Callable[[], int]) -> int:
        try:
            return announce()
        except StateUnavailable:
            # Logged by the connection; the streams of this process were told.
            return 0

    def _local_list_changed(self, flag: Any) -> int:
        if flag not in LIST_CHANGED:
            return 0
        return super().list_changed(flag)

    def _local_resource_updated(self, uri: Any) -> int:
        if not isinstance(uri, str):
            return 0
        return super().resource_updated(uri)

    def _to_standalone(self, method: str, params: dict[str, Any], uri: str | None) -> int:
        with self.redis.guard():
            listed = self.redis.client.hgetall(self._standalone)
            entries = [(text(sid), text(stream)) for sid, stream in listed.items()]
            if uri is not None and entries:
                pipe = self.redis.client.pipeline(transaction=False)
                for session_id, _ in entries:
                    pipe.sismember(self.redis.key("subs", session_id), uri)
                entries = [entry for entry, wanted in zip(entries, pipe.execute()) if wanted]
        payload = jsonrpc.encode(jsonrpc.notification(method, params))
        told = 0
        gone: list[str] = []
        for session_id, stream_id in entries:
            event_log = self._log_of(session_id, stream_id)
            why = (
                "its log is gone"
                if event_log is None
                else "it expired"
                if event_log.expired()
                else "it finished"
                if event_log.append(payload) is None
                else None
            )
            if why is None:
                told += 1
                continue
            # Said, so that a stream that stops hearing announcements can be told from one never told.
            log.info("the standalone stream of session %s is forgotten: %s", fingerprint(session_id), why)
            gone.extend((session_id, stream_id))
        if gone:
            with self.redis.guard():
                self._forget(keys=[self._standalone], args=gone)
        return told
