"""What a session shares across requests, behind one small interface for each kind.

The seams are declared in :mod:`zemcp.state.interfaces`: sessions (:class:`SessionStore`),
the server-to-client requests waiting for answers (:class:`WaitingCalls`), streams' event
logs (:class:`StreamLogs`) and the fan-out of change notifications (:class:`FanOut`).
:func:`open_state` is the one place that chooses their implementations from the settings;
today that is always the in-process one (:mod:`zemcp.state.registry`,
:mod:`zemcp.state.correlation`, :mod:`zemcp.state.eventlogs`,
:mod:`zemcp.state.subscriptions`), which costs nothing and needs no service.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zemcp.config import Settings
from zemcp.state.correlation import CorrelationTable
from zemcp.state.eventlogs import ReplayBudget
from zemcp.state.interfaces import FanOut, SessionStore, WaitingCalls
from zemcp.state.registry import SessionRegistry
from zemcp.state.session import Session
from zemcp.state.subscriptions import SubscriptionHub

#: The implementations :func:`open_state` can choose; the contract tests run each of them.
BACKENDS = ("memory",)


@dataclass(frozen=True)
class State:
    """The shared state of one :class:`zemcp.Server`.

    Attributes:
        backend: the name of the implementation (one of :data:`BACKENDS`).
        sessions: the handshake-era sessions.
        pending: server-to-client requests waiting for the client's answer.
        replay_budget: the process-wide bound on bytes kept by finished streams (each
            session's :class:`zemcp.state.interfaces.StreamLogs` counts against it).
        fanout: who hears change notifications.
    """

    backend: str
    sessions: SessionStore[Session]
    pending: WaitingCalls
    replay_budget: ReplayBudget
    fanout: FanOut


def open_state(settings: Settings, on_session_end: Callable[[Session, str], None], backend: str = "memory") -> State:
    """Build the shared state of a server from its settings.

    Args:
        settings: the caps and windows (``max_sessions``, ``session_ttl``, ``instance``,
            ``stream_limits``, ``max_replay_bytes``, ``pending_budget``,
            ``session_pending_budget``, ``listen_budget``).
        on_session_end: called as ``on_session_end(session, why)`` after a session ended
            (DELETE, expiry, shutdown).
        backend: one of :data:`BACKENDS`.
    Returns:
        the four seams, ready to use.
    Raises:
        ValueError: ``backend`` is not one of :data:`BACKENDS`.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown state backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    replay_budget = ReplayBudget(settings.max_replay_bytes)
    sessions = SessionRegistry(
        settings.max_sessions,
        settings.session_ttl,
        on_session_end,
        settings.instance,
        settings.stream_limits,
        replay_budget,
    )
    return State(
        backend=backend,
        sessions=sessions,
        pending=CorrelationTable(settings.pending_budget, settings.session_pending_budget),
        replay_budget=replay_budget,
        fanout=SubscriptionHub(settings.listen_budget),
    )
