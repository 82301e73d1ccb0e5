"""The fan-out seam: who hears a change notification.

``subscriptions/listen`` streams of 2026-07-28 and the standalone GET streams of sessions
hear ``notifications/*/list_changed`` and ``notifications/resources/updated``;
:class:`FanOut` keeps who listens and tells them (in-process:
:class:`zemcp.state.subscriptions.SubscriptionHub`; Redis:
:class:`zemcp.state.redis.fanout.RedisFanOut`, across processes). :class:`Channel` is a
listen stream as the fan-out sees it, and :class:`ListenLimitReached` its cap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from zemcp.protocol import jsonrpc
    from zemcp.state.streamlogs import EventLog


class Channel(Protocol):
    """A stream that a ``subscriptions/listen`` request holds open (its reply sink)."""

    def send(self, message: dict[str, Any]) -> bool:
        """Queue one notification on the stream; False when nobody reads it any more."""

    def finish(self, response: dict[str, Any] | None) -> None:
        """End the stream with the listen request's response."""

    def on_close(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` once when the stream's reader is gone."""


class ListenLimitReached(Exception):
    """The cap on streams that listen for notifications is reached; the message names the cap."""


class FanOut(Protocol):
    """Who hears a change notification: listen streams and sessions' standalone streams.

    Attributes:
        max_streams: ``subscriptions/listen`` streams open at once at most.
    """

    max_streams: int

    def honoured(
        self, requested: Any, supported: dict[str, bool]
    ) -> tuple[dict[str, Any], frozenset[str], frozenset[str]]:
        """The part of a listen request's ``notifications`` filter this server honours: the
        acknowledged filter, the list-changed methods and the resource URIs.

        Raises:
            ValueError: the filter is malformed (the message says how).
        """

    def open(
        self,
        subscription_id: jsonrpc.RequestId,
        acknowledged: dict[str, Any],
        kinds: frozenset[str],
        uris: frozenset[str],
        sink: Channel,
    ) -> Channel:
        """Listen on ``sink`` (the acknowledgement is sent on it first); returns it.

        Raises:
            ListenLimitReached: ``max_streams`` streams are open.
        """

    def open_session(self, session_id: str, log: EventLog, subscribed: Callable[[str], bool]) -> None:
        """Let a session's standalone stream ``log`` hear changes (replacing an earlier one of the
        session); ``subscribed(uri)`` (the session's :meth:`zemcp.state.session.Session.subscribed`)
        says whether the session subscribed to a resource, which a backend that shares sessions
        between processes reads from the session's record instead."""

    def drop_session(self, session_id: str) -> None:
        """Forget a session's standalone stream (the session ended)."""

    def list_changed(self, flag: str) -> int:
        """Announce that a list changed (``toolsListChanged``, ``promptsListChanged`` or
        ``resourcesListChanged``); returns how many streams were told."""

    def resource_updated(self, uri: str) -> int:
        """Announce ``notifications/resources/updated`` for ``uri``; returns how many streams were told."""

    def close_all(self, result: dict[str, Any]) -> int:
        """End every listen stream with ``result`` for its request; returns how many."""

    def count(self) -> int:
        """Open ``subscriptions/listen`` streams."""
