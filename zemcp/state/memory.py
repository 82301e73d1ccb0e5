"""The in-process state backend (``ZEMCP_STATE_BACKEND=memory``, the default): everything a
session shares lives in this process, in the implementations of this package, and costs
nothing beyond the memory the caps allow."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from zemcp.config import Settings
from zemcp.state.buckets import LocalRateLimiter
from zemcp.state.correlation import CorrelationTable
from zemcp.state.eventlogs import ReplayBudget, SessionStreams
from zemcp.state.localtasks import LocalTasks
from zemcp.state.registry import SessionRegistry
from zemcp.state.seams import State
from zemcp.state.session import Session
from zemcp.state.subscriptions import SubscriptionHub


def build(settings: Settings, on_session_end: Callable[[Session, str], None]) -> State:
    """The seams, in this process (the rate limits' buckets too: each worker has its own).

    Args:
        settings: ``max_sessions``, ``session_ttl``, ``instance``, ``stream_limits``,
            ``max_replay_bytes``, ``pending_budget``, ``session_pending_budget``,
            ``client_share``, ``listen_budget``, ``max_tasks``.
        on_session_end: called as ``on_session_end(session, why)`` after a session ended.
    Returns:
        the state of one server.
    """
    replay_budget = ReplayBudget(settings.max_replay_bytes)
    sessions = SessionRegistry(
        settings.max_sessions,
        settings.session_ttl,
        on_session_end,
        settings.instance,
        partial(SessionStreams, settings.stream_limits, replay_budget),
    )
    return State(
        sessions=sessions,
        pending=CorrelationTable(settings.pending_budget, settings.session_pending_budget, settings.client_share),
        replay_budget=replay_budget,
        fanout=SubscriptionHub(settings.listen_budget),
        limiter=LocalRateLimiter(),
        tasks=LocalTasks(settings.max_tasks, settings.client_share),
        serving=_alone,
    )


def _alone() -> None:
    """Nothing to join: the streams of this process are all the streams there are."""
