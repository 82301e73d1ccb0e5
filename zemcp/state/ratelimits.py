"""The seam of the rate limits: token buckets per client, kept where the backend keeps them.

A client (:func:`zemcp.state.shares.client_key`: the principal with authorization on, else
the client address) has one bucket per :class:`Limit` that applies to it: one for all its
requests (``ZEMCP_RATE_LIMIT``), and one per tool with a limit of its own
(``ZEMCP_RATE_LIMIT_TOOLS``, ``@server.tool(rate_limit=...)``). A request takes a token from
each bucket of its limits, from all of them or from none (:meth:`RateLimiter.take`). The
in-process limiter (:mod:`zemcp.state.buckets`) keeps a process's buckets, so each gunicorn
worker allows the whole limit; the Redis one (:mod:`zemcp.state.redis.buckets`) keeps one
set of buckets for every process that shares the Redis.

The rate-limit layer decides which limits a request takes (:mod:`zemcp.pipeline.ratelimits`), and
refuses it with :class:`RateLimited` (HTTP 429) when a bucket is empty.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from zemcp.config.rates import Rate

#: The scope of the bucket every request of a client takes from.
CLIENT_SCOPE = "client"


@dataclass(frozen=True)
class Limit:
    """One token bucket per client that a request takes a token from.

    Attributes:
        scope: which of a client's buckets: :data:`CLIENT_SCOPE` (all its requests) or
            ``"tool <name>"`` (its calls of that tool).
        rate: the bucket's size and refill.
        setting: where the limit was set, for messages: ``ZEMCP_RATE_LIMIT``,
            ``ZEMCP_RATE_LIMIT_TOOLS`` or ``the tool's rate_limit``.
    """

    scope: str
    rate: Rate
    setting: str


class Shortfall(NamedTuple):
    """A limit whose bucket had no token for the request (nothing was taken from any bucket).

    Attributes:
        limit: the limit whose bucket fills last.
        wait: [seconds] until that bucket holds a token again (above 0).
    """

    limit: Limit
    wait: float


class RateLimiter(Protocol):
    """Token buckets per client and limit: the seam a backend implements.

    A bucket nobody took from is full; a backend may forget a full bucket at any time, since
    a forgotten bucket is a full one.
    """

    def take(self, client: str, limits: Sequence[Limit]) -> Shortfall | None:
        """Take one token from ``client``'s bucket of each of ``limits``, from all or from none.

        Args:
            client: the client key (:func:`zemcp.state.shares.client_key`).
            limits: the buckets the request takes from (at least one, distinct scopes).
        Returns:
            None when every bucket gave a token; else, with nothing taken, the limit whose
            bucket holds a token again last and how long that is.
        Raises:
            StateUnavailable: the service that keeps the buckets (Redis) cannot be reached.
        """


def client_digest(client: str) -> str:
    """``client`` as a bucket is keyed by: 32 hex digits of its SHA-256 (fixed size, and no
    address or principal in a key name)."""
    return hashlib.sha256(client.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class RateLimited(Exception):
    """A request found a bucket of its client empty (HTTP 429 with ``Retry-After``).

    Raised only by :class:`zemcp.pipeline.ratelimits.RateLimits`, and answered with a
    JSON-RPC error -32603 carrying :attr:`data` (over HTTP with 429, :mod:`zemcp.http.outcomes`).

    Args:
        shortfall: the limit whose bucket was empty and how long until it has a token.

    Attributes:
        status: the HTTP status it is answered with.
        limit: the limit whose bucket was empty.
        retry_after: [seconds] whole seconds until the bucket has a token, at least 1.
    """

    status = 429

    def __init__(self, shortfall: Shortfall):
        self.limit = shortfall.limit
        self.retry_after = max(1, math.ceil(shortfall.wait - 1e-9))
        which = "" if self.limit.scope == CLIENT_SCOPE else f" for {self.limit.scope}"
        super().__init__(
            f"Too Many Requests: this client's rate limit{which} ({self.limit.rate.text}, {self.limit.setting}) "
            f"is used up; retry after {self.retry_after} s"
        )

    @property
    def data(self) -> dict[str, Any]:
        """The JSON-RPC error's ``data``: ``{"limit": "120/minute", "retryAfter": 3, "scope": "client"}``."""
        return {"limit": self.limit.rate.text, "retryAfter": self.retry_after, "scope": self.limit.scope}
