"""A session (MCP basic/transports, "Session Management") and the requests running in it.

A session is created by ``initialize`` and named by the ``Mcp-Session-Id`` header on every
later request. It ends on DELETE, or after ``session_ttl`` seconds without traffic unless it
has a request running (a pending elicitation keeps it alive). Ending a session wakes every
handler of it that waits for an elicitation answer. Pure Python: no HTTP here.

:class:`Session` is the record every :class:`zemcp.state.sessionstore.SessionStore` keeps (the
in-process one is :class:`zemcp.state.registry.SessionRegistry`); the code above the state
layer uses it, :func:`fingerprint` and :data:`UNKNOWN_SESSION`, never a store's own classes.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from zemcp.config import StreamLimits
from zemcp.protocol.capabilities import ClientView
from zemcp.protocol.jsonrpc import RequestId
from zemcp.state import workers
from zemcp.state.eventlogs import ReplayBudget, SessionStreams
from zemcp.state.sessionstore import SessionNotFound

if TYPE_CHECKING:
    from zemcp.state.streamlogs import StreamLogs
    from zemcp.state.waitingcalls import RunningCall

log = logging.getLogger("zemcp.session")

_C = TypeVar("_C", bound="RunningCall")


def new_session_id(instance: str) -> str:
    """A new ``Mcp-Session-Id``: the instance's name, this worker's tag, then 192 random bits
    from ``secrets`` in URL-safe base64 (``<instance>.<worker>.<random>``)."""
    return f"{instance}.{workers.tag()}.{secrets.token_urlsafe(24)}"


@functools.lru_cache(maxsize=4096)
def fingerprint(session_id: str) -> str:
    """A short, non-reversible label for a session id (safe to log and to show).

    Remembered for the most recent 4,096 ids: telemetry asks it on every request of a session.
    """
    return hashlib.sha256(session_id.encode()).hexdigest()[:12]


#: The answer for a session id that names no live session of this process (or, with
#: authorization on, one of another principal: the two must not be told apart).
UNKNOWN_SESSION = (
    "Session not found: it ended, expired or was never created here; send initialize again without Mcp-Session-Id"
)


class Session(ClientView):
    """One client's session (a :class:`zemcp.protocol.capabilities.ClientView` for all its requests).

    Attributes:
        id: the ``Mcp-Session-Id`` value: the owning instance's name, ``.``, the creating
            process's worker tag (:func:`zemcp.state.workers.tag`), ``.``, then 192 random bits
            from ``secrets`` in URL-safe base64; a proxy routes on the part before the first ``.``.
        protocol_version: the version negotiated at initialize.
        client_info: ``clientInfo`` from initialize (``name``, ``version``, ...).
        capabilities: ``capabilities`` the client declared at initialize.
        created: [seconds, ``time.time()``] creation time.
        principal: with authorization on, the key (:attr:`zemcp.auth.Principal.key`) of the
            principal that initialized it, the only one that may use it; else None.
        initialized: True once the client sent ``notifications/initialized``.
        streams: its resumable SSE streams (:class:`zemcp.state.streamlogs.StreamLogs`; in-process ones
            when none are given).
    """

    def __init__(
        self,
        protocol_version: str,
        client_info: dict[str, Any],
        capabilities: dict[str, Any],
        instance: str = "local",
        principal: str | None = None,
        streams: StreamLogs | None = None,
    ):
        # log_level: the lowest notifications/message level sent, until logging/setLevel.
        super().__init__(protocol_version, client_info, capabilities, log_level="info")
        self.principal = principal
        self.streams: StreamLogs = streams if streams is not None else SessionStreams(StreamLimits(), ReplayBudget(0))
        self.id = new_session_id(instance)
        self.created = time.time()
        #: How the client reaches the session: ``tcp`` (HTTP) or ``pipe`` (stdio).
        self.transport = "tcp"
        self._lock = threading.Lock()
        self._last_seen = time.monotonic()
        self._calls: dict[RequestId, RunningCall] = {}
        #: Tasks of this session that this process runs (they keep it from going idle).
        self.tasks = 0
        self.ended: str | None = None
        #: Connections that read a resumed request stream of this session and hold a thread.
        self.resumed = 0
        self._initialized = threading.Event()
        # Set once a grace ran out: a client that skipped the notification is not waited for again.
        self._gave_up_waiting = False
        self._subscriptions: set[str] = set()

    @property
    def initialized(self) -> bool:
        """True once the client sent ``notifications/initialized`` (MCP basic/lifecycle)."""
        return self._initialized.is_set()

    def mark_initialized(self) -> None:
        """Record the client's ``notifications/initialized``; wakes the requests waiting for it."""
        self._initialized.set()

    def wait_initialized(self, grace: float) -> bool:
        """Hold a server-to-client request until the client sent ``notifications/initialized``.

        MCP basic/lifecycle: the server SHOULD NOT send requests other than pings before
        it; the client MUST send it after initialize. A client that sends it and its first
        call at once (on two connections) may have the call arrive first: the request
        waits up to ``grace`` for it. A client that never sends it breaks its MUST; rather
        than make every question of its session fail, the request then goes out anyway,
        with a warning logged, and later requests of the session do not wait again.

        Args:
            grace: [seconds] the longest wait.
        Returns:
            True when the notification arrived, False when the grace ran out (now or before).
        """
        if self._initialized.is_set():
            return True
        if self._gave_up_waiting:
            return False
        if self._await_initialized(grace):
            return True
        if not self._gave_up_waiting:
            self._gave_up_waiting = True
            log.warning(
                "session %s: the client sent no notifications/initialized after initialize (MCP basic/lifecycle: it "
                "MUST); a server-to-client request waited %g s for it and is sent anyway, as are the later ones "
                "of this session",
                fingerprint(self.id),
                grace,
            )
        return False

    def subscribe(self, uri: str, limit: int) -> bool:
        """Record a ``resources/subscribe`` of ``uri``; False when the session holds ``limit``
        other subscriptions already."""
        with self._lock:
            if uri not in self._subscriptions and len(self._subscriptions) >= limit:
                return False
            self._subscriptions.add(uri)
            return True

    def unsubscribe(self, uri: str) -> None:
        """Forget the subscription to ``uri`` (``resources/unsubscribe``), if any."""
        with self._lock:
            self._subscriptions.discard(uri)

    def subscribed(self, uri: str) -> bool:
        """True when the session subscribed to ``uri``: its standalone stream then carries
        ``notifications/resources/updated`` for it."""
        with self._lock:
            return uri in self._subscriptions

    def _await_initialized(self, grace: float) -> bool:
        # Where the notification can arrive at another process, a shared store looks there too.
        return self._initialized.wait(grace)

    def count_resumed(self, release: Callable[[], None]) -> Callable[[], None]:
        """Count a resumed stream's connection in :attr:`resumed`; returns ``release`` wrapped
        to take it out of the count too (call it once)."""
        with self._lock:
            self.resumed += 1

        def released() -> None:
            with self._lock:
                self.resumed -= 1
            release()

        return released

    def touch(self) -> None:
        """Record traffic now (resets the idle timer)."""
        self._last_seen = time.monotonic()

    def idle_for(self, now: float) -> float:
        """[seconds] since the last traffic; 0 while a request or a task of the session is
        running or a connection reads its standalone stream."""
        with self._lock:
            if self._calls or self.tasks:
                return 0.0
        standalone = self.streams.standalone
        if standalone is not None and not standalone.abandoned(now) and not standalone.finished:
            self.touch()
        return now - self._last_seen

    def begin(self, call: _C) -> _C:
        """Register a running request of this session; returns it.

        Raises:
            SessionNotFound: the session ended meanwhile.
            ValueError: a request with the same id is still running in this session (MCP
                forbids reusing an id within a session).
        """
        request_id = call.request_id
        with self._lock:
            if self.ended is not None:
                # It ended between the lookup of this request and now (DELETE, expiry).
                raise SessionNotFound("Session not found: it ended while this request arrived; send initialize again")
            if request_id in self._calls:
                raise ValueError(f"request id {request_id!r} is already in use by a running request of this session")
            self._calls[request_id] = call
        return call

    def relay_cancel(self, request_id: RequestId, reason: str | None) -> None:
        """Pass ``notifications/cancelled`` for a request this process does not run to the
        process that does; nothing to do here, where a session's requests all run in one
        process (a shared store's sessions override it)."""

    def close(self, why: str) -> None:
        """Mark the session ended (no new request can begin in it)."""
        with self._lock:
            self.ended = why

    def task_running(self, running: bool) -> None:
        """Count a task of this session that starts (True) or ends (False) here."""
        with self._lock:
            self.tasks += 1 if running else -1
        self.touch()

    def finish(self, call: RunningCall) -> None:
        """Forget a request whose handler returned."""
        with self._lock:
            if self._calls.get(call.request_id) is call:
                del self._calls[call.request_id]
        self.touch()

    def call(self, request_id: Any) -> RunningCall | None:
        """The running request with this id, if any."""
        with self._lock:
            return self._calls.get(request_id)

    def calls(self) -> list[RunningCall]:
        """The running requests."""
        with self._lock:
            return list(self._calls.values())
