"""The Redis state backend (``ZEMCP_REDIS_URL``, ``zemcp[redis]``): every worker of every
instance serves every handshake-era session.

What a session shares lives in Redis: its record (:mod:`.sessions`), the listing of its
waiting server-to-client requests and the way their answers travel to the waiting process
(:mod:`.waiting`, :mod:`.node`), the event logs of its streams (:mod:`.eventlogs`), and the
list of its standalone stream for change notifications (:mod:`.fanout`), and the records of
tasks, read and answered through any process (:mod:`.tasks`). The token buckets
of the rate limits are there too (:mod:`.buckets`), one set for the whole deployment. A running call,
and the thread that waits for its answers, stay in the process that runs it. Imported only
when this backend is chosen, so the ``redis`` package is needed only then.
"""

from __future__ import annotations

from collections.abc import Callable

from zemcp.config import Settings
from zemcp.state.redis.buckets import RedisRateLimiter
from zemcp.state.redis.client import Redis
from zemcp.state.redis.eventlogs import RedisEventLog, RedisStreamLogs
from zemcp.state.redis.fanout import RedisFanOut
from zemcp.state.redis.node import Node
from zemcp.state.redis.replay import RedisReplay
from zemcp.state.redis.sessions import RedisSessionStore
from zemcp.state.redis.tasks import RedisTasks
from zemcp.state.redis.waiting import RedisWaitingCalls
from zemcp.state.seams import State
from zemcp.state.session import Session
from zemcp.state.streamlogs import STANDALONE


def build(settings: Settings, on_session_end: Callable[[Session, str], None]) -> State:
    """The seams, in the Redis of ``settings.redis_url`` (the rate limits' buckets too, shared
    by every process).

    Args:
        settings: ``redis_url``, ``redis_prefix``, ``redis_timeout``, and the caps and
            windows of the in-process backend (``max_sessions`` then counts the sessions of
            the whole deployment, and so does ``max_tasks``; ``max_pending_per_session`` the
            waiting requests of a session in every process; the other caps stay per process).
        on_session_end: called as ``on_session_end(session, why)`` in every process that
            holds a session when it ended.
    Returns:
        the state of one server. Nothing is asked of Redis yet: a Redis that is down makes
        requests get 503 until it is back, never the server fail to start.
    """
    redis = Redis(settings)
    node = Node(redis, settings.instance)
    replay = RedisReplay(redis, node, settings.stream_limits)
    pending = RedisWaitingCalls(
        redis,
        node,
        settings.pending_budget,
        settings.session_pending_budget,
        settings.elicitation_timeout,
        settings.client_share,
    )

    def new_streams(session_id: str) -> RedisStreamLogs:
        return RedisStreamLogs(replay, session_id)

    sessions = RedisSessionStore(redis, node, settings, on_session_end, new_streams, pending)
    fanout = RedisFanOut(
        redis,
        node,
        settings.listen_budget,
        settings.resume_window * 2,
        lambda session_id, stream_id: RedisEventLog(replay, session_id, stream_id, STANDALONE),
    )
    return State(
        sessions=sessions,
        pending=pending,
        replay_budget=replay,
        fanout=fanout,
        limiter=RedisRateLimiter(redis),
        tasks=RedisTasks(redis, node, settings.max_tasks, settings.client_share),
        # A 2026-07-28 request may need nothing else of Redis: its process joins here.
        serving=node.ensure,
    )
