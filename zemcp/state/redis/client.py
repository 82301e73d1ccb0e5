"""The Redis connection of the shared state: clients, key names, and Redis trouble as
:class:`zemcp.state.unavailable.StateUnavailable`.

Every command is bounded by ``Settings.redis_timeout`` (connecting included) and retried at
most once, at once (a pooled connection that a Redis restart broke fails once, then the pool
reconnects), so an unreachable Redis is an answer within about twice that bound, never a
hang. Blocking reads (``XREAD BLOCK``, ``BLPOP``) use a second client whose socket waits for
the block plus that bound. Every key is named by :meth:`Redis.key` under
``Settings.redis_prefix`` and written with an expiry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from zemcp import logsafe
from zemcp.config import Settings
from zemcp.state.unavailable import StateUnavailable

log = logging.getLogger("zemcp.redis")

#: [seconds] the longest block of one blocking read; waits longer than this loop.
MAX_BLOCK = 10.0
#: [seconds] ``Retry-After`` of a request refused because Redis cannot be reached.
RETRY_AFTER = 2
#: [seconds] between two log lines about the same Redis outage.
LOG_EVERY = 30.0

# Replies that mean "Redis cannot serve now" rather than "zemcp sent a bad command".
_UNAVAILABLE_REPLIES = ("LOADING", "READONLY", "MASTERDOWN", "OOM", "MISCONF", "BUSY", "TRYAGAIN", "CLUSTERDOWN")


def text(value: Any) -> str:
    """A Redis reply (bytes) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


class Redis:
    """The shared state's two Redis clients and its key names.

    Args:
        settings: ``redis_url``, ``redis_prefix``, ``redis_timeout``.

    Attributes:
        client: for ordinary commands (each bounded by ``redis_timeout``).
        blocking: for blocking reads of at most :data:`MAX_BLOCK` seconds.
        prefix: the key prefix.
        where: the URL without credentials, for messages.
    """

    def __init__(self, settings: Settings):
        self.prefix = settings.redis_prefix
        self.where = logsafe.without_credentials(settings.redis_url)
        self.timeout = settings.redis_timeout
        common: dict[str, Any] = {
            "socket_connect_timeout": settings.redis_timeout,
            "retry": Retry(NoBackoff(), 1),
            "health_check_interval": 30,
            "client_name": "zemcp",
        }
        self.client = redis.Redis.from_url(settings.redis_url, socket_timeout=settings.redis_timeout, **common)
        self.blocking = redis.Redis.from_url(
            settings.redis_url, socket_timeout=MAX_BLOCK + settings.redis_timeout, **common
        )
        self._lock = threading.Lock()
        self._last_logged = 0.0
        self._down_since: float | None = None

    def key(self, *parts: str) -> str:
        """The name of a key or channel: the prefix, then ``parts`` joined by ``:``."""
        return self.prefix + ":".join(parts)

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Turn Redis trouble inside the block into :class:`StateUnavailable` (logged once
        per outage and then every :data:`LOG_EVERY` seconds), and note a recovery.

        Raises:
            StateUnavailable: Redis could not be reached, timed out, or said it cannot serve.
        """
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise self.unavailable(exc) from None
        except redis.ResponseError as exc:
            if not str(exc).startswith(_UNAVAILABLE_REPLIES):
                raise
            raise self.unavailable(exc) from None
        else:
            if self._down_since is not None:
                self._recovered()

    def unavailable(self, exc: BaseException) -> StateUnavailable:
        """The error for a failed command (logged with the same bounds as :meth:`guard`)."""
        now = time.monotonic()
        with self._lock:
            if self._down_since is None:
                self._down_since = now
            if now - self._last_logged >= LOG_EVERY:
                self._last_logged = now
                log.warning(
                    "Redis at %s (ZEMCP_REDIS_URL) cannot serve: %s: %s; requests that need the shared "
                    "session state get 503 until it is back",
                    self.where,
                    type(exc).__name__,
                    str(exc)[:200],
                )
        if isinstance(exc, redis.AuthenticationError):
            # Waiting does not help: the configuration does.
            return StateUnavailable(
                f"Service Unavailable: the shared session state (Redis at {self.where}) refused this server's "
                f"credentials ({type(exc).__name__}); check the user name and password in ZEMCP_REDIS_URL",
                RETRY_AFTER,
            )
        return StateUnavailable(
            f"Service Unavailable: the shared session state (Redis at {self.where}, ZEMCP_REDIS_URL) cannot be "
            f"reached ({type(exc).__name__}); retry in {RETRY_AFTER} s, and if it lasts, check that Redis is up "
            f"and reachable from this server",
            RETRY_AFTER,
        )

    def _recovered(self) -> None:
        with self._lock:
            since, self._down_since = self._down_since, None
            self._last_logged = 0.0
        if since is not None:
            log.info("Redis at %s answers again after %.1f s", self.where, time.monotonic() - since)

    def close(self) -> None:
        """Close both clients' connections."""
        self.client.close()
        self.blocking.close()
