"""Change notifications on ``subscriptions/listen`` streams (MCP 2026-07-28 basic/patterns/subscriptions).

A 2026-07-28 client opens a long-lived SSE response with ``subscriptions/listen`` and a
filter (``toolsListChanged``, ``promptsListChanged``, ``resourcesListChanged``,
``resourceSubscriptions``). The stream first carries ``notifications/subscriptions/acknowledged``
with the part of the filter this server honours, then only the notifications the filter
asks for, each with ``_meta["io.modelcontextprotocol/subscriptionId"]`` set to the listen
request's id. The client ends it by closing the stream; the server ends it (shutdown) with
a result for the listen request.

Each open stream holds a gunicorn thread for as long as it is open, so they are capped per
process (``Settings.max_listen_streams``) and the cap is taken out of the thread budget.
Streams are per process: a change announced in one worker reaches the streams of that
worker.

A handshake-era session's standalone GET stream (MCP basic/transports, "Listening for
Messages from the Server") listens here too (:class:`SessionListener`): it gets every list
change and ``notifications/resources/updated`` for the URIs the session subscribed to with
``resources/subscribe``, untagged. Its cap and thread count are the server's
(``Settings.standalone_budget``): it holds a thread only while a connection reads it, and is
registered here from its first GET until it ends or its client stays away past the
resumption window. Pure threading, no HTTP.

This is the in-process implementation of :class:`zemcp.state.fanout.FanOut`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zemcp.protocol import jsonrpc
from zemcp.state.fanout import ListenLimitReached

if TYPE_CHECKING:
    from zemcp.state.fanout import Channel
    from zemcp.state.streamlogs import EventLog

log = logging.getLogger("zemcp.subscriptions")

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
#: Filter flag -> the list-changed notification it asks for.
LIST_CHANGED = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
#: The most ``resourceSubscriptions`` URIs one stream may ask for.
MAX_URIS_PER_STREAM = 256


class Listener:
    """One open ``subscriptions/listen`` stream.

    Attributes:
        subscription_id: the listen request's JSON-RPC id.
        kinds: the list-changed notification methods it asked for.
        uris: the resource URIs whose ``notifications/resources/updated`` it asked for.
        sink: where its notifications go.
    """

    def __init__(self, subscription_id: jsonrpc.RequestId, kinds: frozenset[str], uris: frozenset[str], sink: Channel):
        self.subscription_id = subscription_id
        self.kinds = kinds
        self.uris = uris
        self.sink = sink

    def send(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Queue a notification tagged with the subscription id."""
        self.sink.send(
            jsonrpc.notification(method, {**(params or {}), "_meta": {SUBSCRIPTION_ID: self.subscription_id}})
        )

    def wants_uri(self, uri: str) -> bool:
        """True when the stream asked for ``notifications/resources/updated`` of ``uri``."""
        return uri in self.uris

    def expired(self) -> bool:
        """Never: a listen stream leaves the hub when its connection closes."""
        return False


class SessionListener:
    """A handshake-era session's standalone GET stream, as a listener.

    It gets every list change the server announces and ``notifications/resources/updated``
    for the URIs the session subscribed to, without a subscription id (the handshake era has
    none). Its notifications go to the stream's log, so a client that resumes the stream
    with ``Last-Event-ID`` gets the ones it missed.

    Args:
        session_id: the session's id.
        log: the stream's events.
        subscribed: ``subscribed(uri)`` is True when the session subscribed to ``uri``.
    """

    kinds = frozenset(LIST_CHANGED.values())

    def __init__(self, session_id: str, log: EventLog, subscribed: Callable[[str], bool]):
        self.session_id = session_id
        self.log = log
        self._subscribed = subscribed

    def send(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Add a notification to the stream."""
        self.log.append(jsonrpc.encode(jsonrpc.notification(method, params or {})))

    def wants_uri(self, uri: str) -> bool:
        """True when the session subscribed to ``uri``."""
        return self._subscribed(uri)

    def expired(self) -> bool:
        """True once the stream ended or its client stayed away past the resumption window."""
        return self.log.finished or self.log.expired()


class SubscriptionHub:
    """The open listen streams of one process, and the fan-out of change notifications.

    Args:
        max_streams: streams open at once at most (0 refuses every ``subscriptions/listen``).
    """

    def __init__(self, max_streams: int):
        self.max_streams = max_streams
        self._lock = threading.Lock()
        self._listeners: list[Listener | SessionListener] = []
        # Listen streams among the listeners (each holds a thread): counted on every call.
        self._listen_count = 0

    def honoured(
        self, requested: Any, supported: dict[str, bool]
    ) -> tuple[dict[str, Any], frozenset[str], frozenset[str]]:
        """The part of a listen request's ``notifications`` filter this server honours.

        Args:
            requested: ``params.notifications`` of the listen request.
            supported: filter flag -> whether the server can announce it (``resourceSubscriptions``
                included).
        Returns:
            the acknowledged filter, the list-changed methods and the resource URIs it covers.
        Raises:
            ValueError: the filter is not an object, a flag is not a boolean, or
                ``resourceSubscriptions`` is not a list of at most :data:`MAX_URIS_PER_STREAM` strings.
        """
        if requested is None:
            requested = {}
        if not isinstance(requested, dict):
            raise ValueError('params.notifications must be an object such as {"toolsListChanged": true}')
        acknowledged: dict[str, Any] = {}
        kinds = set()
        for flag, method in LIST_CHANGED.items():
            value = requested.get(flag, False)
            if not isinstance(value, bool):
                raise ValueError(f"params.notifications.{flag} must be true or false")
            if value and supported.get(flag):
                acknowledged[flag] = True
                kinds.add(method)
        uris = requested.get("resourceSubscriptions", [])
        if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris) or len(uris) > MAX_URIS_PER_STREAM:
            raise ValueError(
                f"params.notifications.resourceSubscriptions must be a list of at most "
                f"{MAX_URIS_PER_STREAM} resource URIs"
            )
        if uris and supported.get("resourceSubscriptions"):
            acknowledged["resourceSubscriptions"] = list(dict.fromkeys(uris))
        else:
            uris = []
        return acknowledged, frozenset(kinds), frozenset(uris)

    def open(
        self,
        subscription_id: jsonrpc.RequestId,
        acknowledged: dict[str, Any],
        kinds: frozenset[str],
        uris: frozenset[str],
        sink: Channel,
    ) -> Channel:
        """Listen on ``sink`` (a new reply sink of the listen request), which is given the
        acknowledgement first; returns it.

        Raises:
            ListenLimitReached: the cap is reached.
        """
        listener = Listener(subscription_id, kinds, uris, sink)
        self._add(listener)
        sink.on_close(lambda: self._drop(listener))
        listener.send("notifications/subscriptions/acknowledged", {"notifications": acknowledged})
        return sink

    def open_session(self, session_id: str, log: EventLog, subscribed: Callable[[str], bool]) -> None:
        """Register a session's standalone stream (replacing an earlier one of the session);
        the server counts and caps the connections that read it."""
        listener = SessionListener(session_id, log, subscribed)
        self.prune()
        with self._lock:
            self._listeners = [
                other
                for other in self._listeners
                if not (isinstance(other, SessionListener) and other.session_id == session_id)
            ]
            self._listeners.append(listener)

    def drop_session(self, session_id: str) -> None:
        """Forget a session's standalone stream (the session ended)."""
        with self._lock:
            self._listeners = [
                other
                for other in self._listeners
                if not (isinstance(other, SessionListener) and other.session_id == session_id)
            ]

    def prune(self) -> int:
        """Forget the standalone streams that ended or whose client stayed away too long; returns how many."""
        with self._lock:
            kept = [listener for listener in self._listeners if not listener.expired()]
            pruned = len(self._listeners) - len(kept)
            self._listeners = kept
        return pruned

    def _add(self, listener: Listener) -> None:
        with self._lock:
            if self._listen_count >= self.max_streams:
                raise ListenLimitReached(
                    f"this process already holds its maximum of {self.max_streams} subscriptions/listen streams "
                    f"(ZEMCP_MAX_LISTEN_STREAMS); close one or retry later"
                )
            self._listeners.append(listener)
            self._listen_count += 1

    def list_changed(self, flag: str) -> int:
        """Announce that a list changed (``toolsListChanged``, ``promptsListChanged`` or
        ``resourcesListChanged``); returns how many streams were told."""
        method = LIST_CHANGED[flag]
        return self._fan_out(lambda listener: method in listener.kinds, method, None)

    def resource_updated(self, uri: str) -> int:
        """Announce ``notifications/resources/updated`` for ``uri``; returns how many streams were told."""
        return self._fan_out(lambda listener: listener.wants_uri(uri), "notifications/resources/updated", {"uri": uri})

    def close_all(self, result: dict[str, Any]) -> int:
        """End every stream with ``result`` for its listen request (a graceful server-side end)."""
        with self._lock:
            listeners = [listener for listener in self._listeners if isinstance(listener, Listener)]
            self._listeners = [listener for listener in self._listeners if not isinstance(listener, Listener)]
            self._listen_count = 0
        for listener in listeners:
            listener.sink.finish(
                jsonrpc.result(
                    listener.subscription_id,
                    {**result, "_meta": {**result.get("_meta", {}), SUBSCRIPTION_ID: listener.subscription_id}},
                )
            )
        return len(listeners)

    def count(self) -> int:
        """Open ``subscriptions/listen`` streams."""
        return self._listen_count

    def _fan_out(
        self, wants: Callable[[Listener | SessionListener], bool], method: str, params: dict[str, Any] | None
    ) -> int:
        self.prune()
        with self._lock:
            targets = [listener for listener in self._listeners if wants(listener)]
        for listener in targets:
            listener.send(method, params)
        return len(targets)

    def _drop(self, listener: Listener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)
                self._listen_count -= 1
