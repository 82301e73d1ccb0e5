"""The shared state of one server: its seams, as a backend builds them (:class:`State`)."""

from __future__ import annotations

from dataclasses import dataclass

from zemcp.state.interfaces import ByteBudget, FanOut, SessionStore, WaitingCalls
from zemcp.state.ratelimits import RateLimiter
from zemcp.state.session import Session
from zemcp.state.tasks import TaskStore


@dataclass(frozen=True)
class State:
    """The shared state of one :class:`zemcp.Server`, built by :func:`zemcp.state.open_state`.

    Attributes:
        sessions: the handshake-era sessions; each session's stream logs come from it.
        pending: server-to-client requests waiting for the client's answer.
        replay_budget: the bound on bytes kept by finished streams, which every session's
            stream logs count against (its ``held`` figure is in ``server status``).
        fanout: who hears change notifications.
        limiter: the token buckets of the rate limits, per client.
        tasks: the task records (MCP tasks), kept in this process in every backend so far.
    """

    sessions: SessionStore[Session]
    pending: WaitingCalls
    replay_budget: ByteBudget
    fanout: FanOut
    limiter: RateLimiter
    tasks: TaskStore
