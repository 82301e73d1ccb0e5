"""Token buckets in this process (:class:`LocalRateLimiter`, the ``memory`` backend's
:class:`zemcp.state.ratelimits.RateLimiter`).

Each gunicorn worker keeps its own buckets, so with ``-w N`` a client may get up to N times
a limit (as many as the workers its connections reach). The buckets are bounded: a bucket
that filled up again is the same as none and is forgotten, the least recently used first,
and at most :data:`MAX_BUCKETS` are kept, so a flood of distinct addresses cannot grow the
memory without end (beyond the bound the longest unused bucket is forgotten, which gives
its client a full bucket again: never a refusal it did not earn).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from zemcp.config.rates import Rate
from zemcp.state.ratelimits import Limit, Shortfall, client_digest

#: The most buckets a process keeps (about 300 bytes each: some 20 MB at most).
MAX_BUCKETS = 65536
#: Least recently used buckets looked at on each take, to forget those that filled up.
SWEEP = 2


class TokenBucket:
    """One bucket's tokens at one moment; it fills at its rate up to its burst.

    Args:
        rate: its size and refill.
        now: [seconds] the clock's time; a new bucket is full.

    Attributes:
        tokens: tokens it held at :attr:`stamp` (a fraction while it fills).
        stamp: [seconds] when :attr:`tokens` was counted.
    """

    __slots__ = ("rate", "stamp", "tokens")

    def __init__(self, rate: Rate, now: float):
        self.rate = rate
        self.tokens = float(rate.burst)
        self.stamp = now

    def level(self, now: float) -> float:
        """Tokens at ``now`` [seconds]: what it held plus what came back since, at most the burst."""
        return min(float(self.rate.burst), self.tokens + max(0.0, now - self.stamp) * self.rate.per_second)

    def refill(self, rate: Rate, now: float) -> None:
        """Count the tokens that came back until ``now``, under ``rate`` from now on."""
        self.tokens, self.stamp = self.level(now), max(self.stamp, now)
        self.rate = rate

    def wait(self) -> float:
        """[seconds] until it holds a whole token, as of its last :meth:`refill`; 0 when it does."""
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate.per_second

    def full(self, now: float) -> bool:
        """True when it filled up again by ``now``, so forgetting it changes nothing."""
        return self.level(now) >= self.rate.burst


class LocalRateLimiter:
    """The token buckets of this process, by (scope, client digest); thread-safe (one lock).

    Args:
        clock: [seconds] a monotonic clock (a fake one in tests).
        max_buckets: the most buckets kept.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_buckets: int = MAX_BUCKETS):
        self._clock = clock
        self._max = max_buckets
        self._lock = threading.Lock()
        # Least recently used first, so that the buckets most likely full come first.
        self._buckets: OrderedDict[tuple[str, str], TokenBucket] = OrderedDict()

    def take(self, client: str, limits: Sequence[Limit]) -> Shortfall | None:
        """See :meth:`zemcp.state.ratelimits.RateLimiter.take` (never raises)."""
        digest = client_digest(client)
        with self._lock:
            now = self._clock()
            found = []
            for limit in limits:
                key = (limit.scope, digest)
                bucket = self._buckets.get(key)
                if bucket is None:
                    bucket = TokenBucket(limit.rate, now)
                else:
                    bucket.refill(limit.rate, now)
                found.append((key, bucket, limit))
            short = max(((bucket.wait(), limit) for _, bucket, limit in found), key=lambda pair: pair[0])
            if short[0] > 0:
                return Shortfall(short[1], short[0])
            for key, bucket, _ in found:
                bucket.tokens -= 1.0
                self._buckets[key] = bucket
                self._buckets.move_to_end(key)
            self._forget(now)
        return None

    def _forget(self, now: float) -> None:
        """Drop least recently used buckets that are full again, and the oldest beyond the bound."""
        for _ in range(SWEEP):
            if not self._buckets:
                return
            key, bucket = next(iter(self._buckets.items()))
            if not bucket.full(now):
                break
            del self._buckets[key]
        while len(self._buckets) > self._max:
            self._buckets.popitem(last=False)

    def __len__(self) -> int:
        """Buckets kept now."""
        with self._lock:
            return len(self._buckets)
