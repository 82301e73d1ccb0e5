"""The shared state of one server: its seams, as a backend builds them (:class:`State`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zemcp.state.fanout import FanOut
from zemcp.state.ratelimits import RateLimiter
from zemcp.state.session import Session
from zemcp.state.sessionstore import SessionStore
from zemcp.state.streamlogs import ByteBudget
from zemcp.state.tasks import TaskStore
from zemcp.state.waitingcalls import WaitingCalls


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
        serving: ``serving()`` is called as this process begins serving (gunicorn's
            ``post_worker_init``, :func:`zemcp.core.server.serve_all`) and as it serves a tool,
            prompt or resource request of either era (:meth:`zemcp.core.server.Server.prepare`,
            for other WSGI servers); at the first call, a
            backend that several processes share makes this one of them (Redis: its node
            starts), so that what is announced here from then on (``fanout``) reaches the
            streams of every process. Before it, as the app is imported, nothing is asked of
            a shared store, and registrations announce to this process alone.
    """

    sessions: SessionStore[Session]
    pending: WaitingCalls
    replay_budget: ByteBudget
    fanout: FanOut
    limiter: RateLimiter
    tasks: TaskStore
    serving: Callable[[], object]
