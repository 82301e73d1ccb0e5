"""What a session shares across requests, behind one small interface for each kind.

Each seam is declared in a module of its own: sessions (``SessionStore``,
:mod:`zemcp.state.sessionstore`), the server-to-client requests waiting for answers
(``WaitingCalls``, :mod:`zemcp.state.waitingcalls`), streams' event logs (``StreamLogs`` and
``EventLog``, :mod:`zemcp.state.streamlogs`), the fan-out of change notifications (``FanOut``,
:mod:`zemcp.state.fanout`), the token buckets of the rate limits (``RateLimiter``,
:mod:`zemcp.state.ratelimits`) and the task records (``TaskStore``, :mod:`zemcp.state.tasks`);
what every seam of a remote store can raise, ``StateUnavailable``, is in
:mod:`zemcp.state.unavailable`. A backend is one module of this package with a ``build(settings, on_session_end)`` that returns
them as a :class:`zemcp.state.seams.State`; :func:`open_state` is the one place that
chooses it, by ``Settings.state_backend`` (``ZEMCP_STATE_BACKEND``, or ``ZEMCP_REDIS_URL``),
and imports it only then, so that a backend's own libraries load only where it is chosen.
``memory`` (:mod:`zemcp.state.memory`) keeps everything in the process and needs no
service; ``redis`` (:mod:`zemcp.state.redis`, ``zemcp[redis]``) keeps what sessions share in
Redis, so that every worker and instance serves every session.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from zemcp.config import Settings
from zemcp.state.seams import State
from zemcp.state.session import Session

#: Backend name -> its module (a ``build(settings, on_session_end) -> State``). The contract
#: tests (tests/unit/test_state_contracts.py) run every backend named here.
BACKENDS = {
    "memory": "zemcp.state.memory",
    "redis": "zemcp.state.redis",
}


def open_state(settings: Settings, on_session_end: Callable[[Session, str], None]) -> State:
    """Build the shared state of a server with the backend its settings name.

    Args:
        settings: ``state_backend`` chooses the backend; the caps and windows size it.
        on_session_end: called as ``on_session_end(session, why)`` after a session ended
            (DELETE, expiry, shutdown).
    Returns:
        the seams, ready to use.
    Raises:
        ValueError: ``state_backend`` names no backend of :data:`BACKENDS`.
        ImportError: the backend's library is not installed (the message names the extra).
    """
    module = BACKENDS.get(settings.state_backend)
    if module is None:
        raise ValueError(
            f"ZEMCP_STATE_BACKEND={settings.state_backend!r} names no state backend; "
            f"choose one of: {', '.join(BACKENDS)}"
        )
    try:
        backend = importlib.import_module(module)
    except ImportError as exc:
        if exc.name is None or not exc.name.startswith("redis"):
            raise
        raise ImportError(
            f"the {settings.state_backend} state backend (ZEMCP_REDIS_URL) needs the redis package: "
            f"pip install redis (or pip install '.[redis]' in a zemcp checkout)"
        ) from exc
    built: State = backend.build(settings, on_session_end)
    return built
