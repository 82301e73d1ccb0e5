"""The in-process session store: the sessions of this process (a :class:`zemcp.state.sessionstore.SessionStore`).

Sessions live in the process that created them; a sweeper thread, started on first use (so
that it runs in the gunicorn worker after the fork), ends those idle longer than the TTL.
A session id names its instance before the first ``.``, so an id of another instance that
reaches this one is logged as a routing mistake; and it names the worker that created it
(:mod:`zemcp.state.workers`), so a request that reached another worker of the same gunicorn
is told so, and the operator what to set.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from zemcp import logsafe
from zemcp.config import StreamLimits
from zemcp.state import workers
from zemcp.state.eventlogs import ReplayBudget, SessionStreams
from zemcp.state.session import UNKNOWN_SESSION, Session
from zemcp.state.sessionstore import SessionLimitReached, SessionNotFound, SessionRequired
from zemcp.state.streamlogs import StreamLogs

log = logging.getLogger("zemcp.session")

#: The answer for a session of another live worker of this gunicorn (the in-process backend
#: cannot serve it here).
SIBLING_SESSION = (
    "Session not found here: it belongs to another worker of this gunicorn, and sessions live in the worker "
    "that created them: set ZEMCP_REDIS_URL to share them between workers, or serve one worker (ZEMCP_WORKERS=1)"
)
#: The answer for a session whose worker process has stopped.
STOPPED_SESSION = (
    "Session not found: the worker process that created it has stopped (it was restarted or ended), and its "
    "sessions ended with it; send initialize again without Mcp-Session-Id"
)
#: [seconds] at most one warning about sessions of other workers in this long.
SIBLING_WARNING_INTERVAL = 60.0


class SessionRegistry:
    """The sessions of this process.

    Attributes:
        shared: False: sessions live and end with this process.

    Args:
        max_sessions: live sessions at most.
        ttl: [seconds] idle time after which a session is ended.
        on_end: called as ``on_end(session, why)`` after a session ended (outside the lock).
        instance: this process's instance name, the prefix of every session id it creates.
        new_streams: makes the stream logs of a new session (the backend's
            :class:`zemcp.state.streamlogs.StreamLogs`); in-process logs under a 32 MiB replay
            budget when omitted.
    """

    shared = False

    def __init__(
        self,
        max_sessions: int,
        ttl: float,
        on_end: Callable[[Session, str], None],
        instance: str = "local",
        new_streams: Callable[[], StreamLogs] | None = None,
    ):
        self.instance = instance
        self._new_streams = new_streams or partial(SessionStreams, StreamLimits(), ReplayBudget(32 * 1024 * 1024))
        self.max_sessions = max_sessions
        self.ttl = ttl
        self._on_end = on_end
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._sweeper: threading.Thread | None = None
        # When the last warning about a session of another worker was logged (monotonic
        # seconds), and how many such requests went unlogged since.
        self._sibling_warned: float | None = None
        self._sibling_unlogged = 0

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
        streams = self._new_streams()
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
            SessionNotFound: no live session has that id; the message says whether it belongs to
                another live worker of this gunicorn, or to a worker that has stopped.
        """
        if session_id is None:
            raise SessionRequired(
                "Bad Request: the Mcp-Session-Id header is required; send initialize first and "
                "repeat the Mcp-Session-Id it returns on every later request"
            )
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFound(self._why_not_here(session_id))
        session.touch()
        return session

    def _why_not_here(self, session_id: str) -> str:
        """The 404 message for ``session_id``, which names no live session of this process;
        logs what the operator must know (a routing mistake, a session of another worker)."""
        owner = session_id.partition(".")[0]
        if owner != self.instance and "." in session_id:
            # To the client this is a lost session (404, re-initialize); to the operator
            # it is a routing mistake, which must never pass silently.
            log.warning(
                "request for a session of instance %s reached instance %r: either a proxy routed it "
                "wrongly (route every request by its Mcp-Session-Id to the instance named before the "
                "first '.', see docs/deploy.md) or that instance restarted and its sessions are gone",
                logsafe.clip(owner),
                self.instance,
            )
            return UNKNOWN_SESSION
        pid = workers.creator(session_id)
        if pid is None or pid == os.getpid():
            return UNKNOWN_SESSION
        if not workers.is_sibling(pid):
            return STOPPED_SESSION
        self._warn_sibling(pid)
        return SIBLING_SESSION

    def _warn_sibling(self, pid: int) -> None:
        """Log that a request of a session of worker ``pid`` reached this one, at most once per
        :data:`SIBLING_WARNING_INTERVAL` (with the count of those not logged since): every such
        request would otherwise log the same line."""
        now = time.monotonic()
        with self._lock:
            if self._sibling_warned is not None and now - self._sibling_warned < SIBLING_WARNING_INTERVAL:
                self._sibling_unlogged += 1
                return
            self._sibling_warned, unlogged, self._sibling_unlogged = now, self._sibling_unlogged, 0
        since = f"; {unlogged} more such request(s) since the last one logged" if unlogged else ""
        log.warning(
            "request for a session of worker %d reached worker %d of this gunicorn and got 404 (a lost "
            "elicitation answer leaves its call waiting until ZEMCP_ELICITATION_TIMEOUT): handshake-era sessions "
            "live in the worker that created them; set ZEMCP_REDIS_URL (pip install redis, or '.[redis]' in a zemcp checkout) to share them "
            "between workers, or serve one worker (ZEMCP_WORKERS=1); see docs/deploy.md (logged at most once per "
            "%g s%s)",
            pid,
            os.getpid(),
            SIBLING_WARNING_INTERVAL,
            since,
        )

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

    def local(self) -> list[Session]:
        """The live sessions (all live in this process), oldest first."""
        return self.sessions()

    def close(self) -> None:
        """Nothing to stop: the sweeper thread is a daemon that ends with the process."""

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
