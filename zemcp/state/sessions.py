"""Sessions (MCP basic/transports, "Session Management") and the requests running in them.

A session is created by ``initialize`` and named by the ``Mcp-Session-Id`` header on every
later request. It lives in the process that created it. It ends on DELETE, or after
``session_ttl`` seconds without traffic unless it has a request running (a pending
elicitation keeps it alive). Ending a session wakes every handler of it that waits for an
elicitation answer. Pure Python: no HTTP here.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zemcp import logsafe
from zemcp.protocol.capabilities import ClientView
from zemcp.protocol.elicitation import ElicitAborted, RequestCancelled
from zemcp.protocol.jsonrpc import RequestId
from zemcp.replies.sinks import ReplySink
from zemcp.state.eventlogs import ReplayBudget, SessionStreams, StreamLimits

if TYPE_CHECKING:
    from zemcp.protocol import jsonrpc
    from zemcp.state.correlation import CorrelationTable
    from zemcp.protocol.inputs import InputRequest
    from zemcp.replies.direct import DirectSink

log = logging.getLogger("zemcp.session")

#: [seconds] how long a server-to-client request of a session waits for the client's
#: ``notifications/initialized`` before it is sent anyway (see :meth:`Session.wait_initialized`).
INITIALIZED_GRACE = 0.5


def fingerprint(session_id: str) -> str:
    """A short, non-reversible label for a session id (safe to log and to show)."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:12]


class SessionError(Exception):
    """Base of the session lookup failures; the transport maps each to an HTTP status."""


class SessionRequired(SessionError):
    """A request other than ``initialize`` came without ``Mcp-Session-Id`` (HTTP 400)."""


#: The answer for a session id that names no live session of this process (or, with
#: authorization on, one of another principal: the two must not be told apart).
UNKNOWN_SESSION = (
    "Session not found: it ended, expired or was never created here; send initialize again without Mcp-Session-Id"
)


class SessionNotFound(SessionError):
    """The ``Mcp-Session-Id`` names no live session of this process (HTTP 404)."""


class SessionLimitReached(SessionError):
    """``initialize`` found ``max_sessions`` live sessions (HTTP 429 with ``Retry-After``)."""


class Session(ClientView):
    """One client's session (a :class:`zemcp.protocol.capabilities.ClientView` for all its requests).

    Attributes:
        id: the ``Mcp-Session-Id`` value: the owning instance's name, ``.``, then 192 random
            bits from ``secrets`` in URL-safe base64, so a proxy can route on the prefix.
        protocol_version: the version negotiated at initialize.
        client_info: ``clientInfo`` from initialize (``name``, ``version``, ...).
        capabilities: ``capabilities`` the client declared at initialize.
        created: [seconds, ``time.time()``] creation time.
        principal: with authorization on, the key (:attr:`zemcp.auth.Principal.key`) of the
            principal that initialized it, the only one that may use it; else None.
        initialized: True once the client sent ``notifications/initialized``.
        streams: its resumable SSE streams (:class:`zemcp.state.eventlogs.SessionStreams`).
    """

    def __init__(
        self,
        protocol_version: str,
        client_info: dict[str, Any],
        capabilities: dict[str, Any],
        instance: str = "local",
        principal: str | None = None,
        streams: SessionStreams | None = None,
    ):
        # log_level: the lowest notifications/message level sent, until logging/setLevel.
        super().__init__(protocol_version, client_info, capabilities, log_level="info")
        self.principal = principal
        self.streams = streams if streams is not None else SessionStreams(StreamLimits(), ReplayBudget(0))
        self.id = f"{instance}.{secrets.token_urlsafe(24)}"
        self.created = time.time()
        self._lock = threading.Lock()
        self._last_seen = time.monotonic()
        self._calls: dict[RequestId, Call] = {}
        self.ended: str | None = None
        #: Connections that read a resumed request stream of this session and hold a thread.
        self.resumed = 0
        self._initialized = threading.Event()
        # Set once a grace ran out: a client that skipped the notification is not waited for again.
        self._gave_up_waiting = False

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
        if self._initialized.wait(grace):
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
        """[seconds] since the last traffic; 0 while a request of the session is running or
        a connection reads its standalone stream."""
        with self._lock:
            if self._calls:
                return 0.0
        standalone = self.streams.standalone
        if standalone is not None and not standalone.abandoned(now) and not standalone.finished:
            self.touch()
        return now - self._last_seen

    def begin(self, call: Call) -> Call:
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

    def close(self, why: str) -> None:
        """Mark the session ended (no new request can begin in it)."""
        with self._lock:
            self.ended = why

    def finish(self, call: Call) -> None:
        """Forget a request whose handler returned."""
        with self._lock:
            if self._calls.get(call.request_id) is call:
                del self._calls[call.request_id]
        self.touch()

    def call(self, request_id: Any) -> Call | None:
        """The running request with this id, if any."""
        with self._lock:
            return self._calls.get(request_id)

    def calls(self) -> list[Call]:
        """The running requests."""
        with self._lock:
            return list(self._calls.values())


class Call:
    """A handshake-era client request whose handler is running: its
    :class:`zemcp.protocol.inputs.Exchange`, which pushes input requests on the request's stream.

    Args:
        session: the session it belongs to.
        request_id: its JSON-RPC id.
        sink: where its output goes.
        progress_token: the request's ``_meta.progressToken``, or None.
        table: the process's correlation table, where the handler waits for answers.
        timeout: [seconds] the longest wait for the answers to one :meth:`ask`.
        can_wait: False under a WSGI server that is not multithreaded: the answer, a request
            of its own, could not be served while this one waits.

    Attributes:
        session, request_id, sink, progress_token, timeout, can_wait: as given; ``client`` is the session.
        aborted: why it can no longer be answered, or None.
    """

    def __init__(
        self,
        session: Session,
        request_id: RequestId,
        sink: ReplySink | DirectSink,
        progress_token: RequestId | None = None,
        table: CorrelationTable | None = None,
        timeout: float = 600.0,
        can_wait: bool = True,
    ):
        self._lock = threading.Lock()
        self.session = session
        self.client = session
        self.request_id = request_id
        self.sink = sink
        self.progress_token = progress_token
        self.aborted: ElicitAborted | None = None
        self._table = table
        self.timeout = timeout
        self.can_wait = can_wait

    def ask(self, requests: list[InputRequest], timeout: float | None = None) -> list[jsonrpc.Response]:
        """Send ``requests`` on this call's stream and wait for every answer (see
        :meth:`zemcp.state.correlation.CorrelationTable.ask_all`).

        Nothing is sent before the client's ``notifications/initialized``, for up to
        :data:`INITIALIZED_GRACE` (:meth:`Session.wait_initialized`); that wait counts in
        ``timeout``.

        Args:
            requests: the questions.
            timeout: [seconds] the longest wait for all the answers, at most
                :attr:`timeout` (which None means).
        Raises:
            as :meth:`zemcp.state.correlation.CorrelationTable.ask_all`.
        """
        if self._table is None:
            raise RuntimeError("this call was made without a correlation table and cannot ask the client")
        limit = self.timeout if timeout is None else min(timeout, self.timeout)
        start = time.monotonic()
        self.session.wait_initialized(min(INITIALIZED_GRACE, limit))
        remaining = max(0.0, limit - (time.monotonic() - start))
        return self._table.ask_all(self, [(r.method, r.params) for r in requests], remaining)

    def notify(self, message: dict[str, Any]) -> None:
        """Queue a notification on the call's stream (raises the abort reason once aborted)."""
        self.raise_if_aborted()
        self.sink.send(message)

    def end_stream(self) -> None:
        """End the client's connection to this request's stream on purpose (SSE polling); the
        client resumes it with ``Last-Event-ID``. Nothing happens where streams are not
        resumable (stdio)."""
        end = getattr(self.sink, "end_stream", None)
        if end is not None:
            end()

    def note_missing(self, required: dict[str, Any]) -> None:
        """Nothing to do: the handshake era has no error for a missing capability; the handler
        gets ``ElicitUnsupported`` or ``CapabilityMissing`` and decides."""

    def abort(self, reason: ElicitAborted) -> bool:
        """Mark the request as one that can no longer be answered (first reason wins).

        Returns:
            True if this call set the reason.
        """
        with self._lock:
            if self.aborted is None:
                self.aborted = reason
                return True
            return False

    @property
    def cancelled(self) -> bool:
        """True when the client sent ``notifications/cancelled`` for this request."""
        return isinstance(self.aborted, RequestCancelled)

    def raise_if_aborted(self) -> None:
        """Raise the abort reason, if any (checked before a new elicitation is sent)."""
        if self.aborted is not None:
            raise self.aborted


class SessionRegistry:
    """The sessions of this process.

    Args:
        max_sessions: live sessions at most.
        ttl: [seconds] idle time after which a session is ended.
        on_end: called as ``on_end(session, why)`` after a session ended (outside the lock).
        instance: this process's instance name, the prefix of every session id it creates.
        stream_limits: the knobs of every session's resumable streams.
        replay_budget: the process's bound on bytes kept by finished streams.
    """

    def __init__(
        self,
        max_sessions: int,
        ttl: float,
        on_end: Callable[[Session, str], None],
        instance: str = "local",
        stream_limits: StreamLimits | None = None,
        replay_budget: ReplayBudget | None = None,
    ):
        self.instance = instance
        self.stream_limits = stream_limits if stream_limits is not None else StreamLimits()
        self.replay_budget = replay_budget if replay_budget is not None else ReplayBudget(32 * 1024 * 1024)
        self.max_sessions = max_sessions
        self.ttl = ttl
        self._on_end = on_end
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._sweeper: threading.Thread | None = None

    def create(
        self,
        protocol_version: str,
        client_info: dict[str, Any],
        capabilities: dict[str, Any],
        principal: str | None = None,
    ) -> Session:
        """Create and register a session (bound to ``principal``, a principal key, when given).

        Raises:
            SessionLimitReached: ``max_sessions`` sessions are live.
        """
        self._start_sweeper()
        streams = SessionStreams(self.stream_limits, self.replay_budget)
        session = Session(protocol_version, client_info, capabilities, self.instance, principal, streams)
        with self._lock:
            if len(self._sessions) >= self.max_sessions:
                raise SessionLimitReached(
                    f"this server holds its maximum of {self.max_sessions} sessions; retry later "
                    f"or end unused sessions with DELETE"
                )
            self._sessions[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session:
        """The live session named by ``session_id``, touched.

        Raises:
            SessionRequired: ``session_id`` is None.
            SessionNotFound: no live session has that id.
        """
        if session_id is None:
            raise SessionRequired(
                "Bad Request: the Mcp-Session-Id header is required; send initialize first and "
                "repeat the Mcp-Session-Id it returns on every later request"
            )
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            owner = session_id.partition(".")[0]
            if owner != self.instance and "." in session_id:
                # To the client this is a lost session (404, re-initialize); to the operator
                # it is a routing mistake, which must never pass silently.
                log.warning(
                    "request for a session of instance %s reached instance %r: either a proxy routed it "
                    "wrongly (route every request by its Mcp-Session-Id to the instance named before the "
                    "'.', see docs/deploy.md) or that instance restarted and its sessions are gone",
                    logsafe.clip(owner),
                    self.instance,
                )
            raise SessionNotFound(UNKNOWN_SESSION)
        session.touch()
        return session

    def end(self, session_id: str, why: str) -> bool:
        """End a session; returns False when it was not live."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        session.close(why)
        self._on_end(session, why)
        return True

    def sweep(self, now: float | None = None) -> int:
        """Forget streams past their resumption window, and end every session idle for longer
        than the TTL; returns how many sessions ended."""
        now = time.monotonic() if now is None else now
        ended = 0
        with self._lock:
            live = list(self._sessions.values())
        for session in live:
            session.streams.prune(now)
        with self._lock:
            idle = [s for s in self._sessions.values() if s.idle_for(now) > self.ttl]
        for session in idle:
            # A request may have begun since the list was made: end only what is still idle.
            with self._lock:
                if session.idle_for(now) <= self.ttl or self._sessions.pop(session.id, None) is None:
                    continue
            session.close("expired")
            self._on_end(session, "expired")
            ended += 1
        return ended

    def sessions(self) -> list[Session]:
        """The live sessions, oldest first."""
        with self._lock:
            return sorted(self._sessions.values(), key=lambda s: s.created)

    def __contains__(self, session_id: object) -> bool:
        with self._lock:
            return session_id in self._sessions

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _start_sweeper(self) -> None:
        # Started on first use, not at import, so it runs in the gunicorn worker after fork.
        if self._sweeper is not None:
            return
        with self._lock:
            if self._sweeper is not None:
                return
            interval = min(30.0, max(0.5, self.ttl / 4))
            self._sweeper = threading.Thread(
                target=self._sweep_forever, args=(interval,), name="zemcp-session-sweeper", daemon=True
            )
            self._sweeper.start()

    def _sweep_forever(self, interval: float) -> None:
        while True:
            time.sleep(interval)
            try:
                ended = self.sweep()
            except Exception:
                log.exception("session sweep failed")
                continue
            if ended:
                log.info("ended %d idle session(s)", ended)
