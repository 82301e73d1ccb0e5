"""Token buckets in Redis (:class:`RedisRateLimiter`): one set of buckets for every worker and
instance that shares the Redis, so a limit is the deployment's, not each process's.

A bucket is a hash (``t``: tokens, ``at``: when they were counted, in Redis's milliseconds)
under ``<prefix>rate:<scope>:<client digest>``. One script takes the tokens of a request
from all its buckets or from none, on Redis's own clock (``TIME``), so processes whose
clocks differ still share one bucket fairly; it sets each bucket to expire once it would be
full again, so idle buckets vanish. A Redis that cannot be reached makes the requests that
take tokens get 503 with ``Retry-After`` (:class:`zemcp.state.unavailable.StateUnavailable`),
as the rest of the Redis backend does; requests that take none are not held up.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from zemcp.state.ratelimits import Limit, Shortfall, client_digest
from zemcp.state.redis.client import Redis

#: [milliseconds] how long a bucket's key outlives the moment it is full again.
MARGIN_MS = 1000

# KEYS: the buckets. ARGV: burst and tokens per millisecond of each, in KEYS' order, then the
# margin. Returns {0, 0} when a token was taken from every bucket, else {i, ms}: nothing was
# taken, and bucket i (1-based) holds a token again last, in ms milliseconds.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local levels = {}
local worst, wait = 0, 0
for i = 1, #KEYS do
  local burst, rate = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local held = redis.call('HMGET', KEYS[i], 't', 'at')
  local tokens = burst
  if held[1] and held[2] then
    tokens = math.min(burst, tonumber(held[1]) + math.max(0, now - tonumber(held[2])) * rate)
  end
  levels[i] = tokens
  if tokens < 1 and (1 - tokens) / rate > wait then
    worst, wait = i, (1 - tokens) / rate
  end
end
if worst > 0 then return {worst, math.ceil(wait)} end
local margin = tonumber(ARGV[2 * #KEYS + 1])
for i = 1, #KEYS do
  local burst, rate = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local left = levels[i] - 1
  redis.call('HSET', KEYS[i], 't', left, 'at', now)
  redis.call('PEXPIRE', KEYS[i], math.ceil((burst - left) / rate) + margin)
end
return {0, 0}
"""


class RedisRateLimiter:
    """The token buckets of a deployment, in Redis (a :class:`zemcp.state.ratelimits.RateLimiter`).

    Args:
        redis: the shared state's connection (its prefix and its bound on each command).
    """

    def __init__(self, redis: Redis):
        self.redis = redis
        self._take = redis.client.register_script(_TAKE)

    def key(self, scope: str, client: str) -> str:
        """The key of ``client``'s bucket of ``scope`` (``tool report`` -> ``...rate:tool:report:<digest>``)."""
        return self.redis.key("rate", *scope.split(" "), client_digest(client))

    def take(self, client: str, limits: Sequence[Limit]) -> Shortfall | None:
        """See :meth:`zemcp.state.ratelimits.RateLimiter.take`.

        Raises:
            StateUnavailable: Redis cannot be reached, timed out, or answered with an error.
        """
        keys = [self.key(limit.scope, client) for limit in limits]
        args: list[float | int] = []
        for limit in limits:
            args += [limit.rate.burst, limit.rate.per_second / 1000]
        args.append(MARGIN_MS)
        try:
            with self.redis.guard():
                index, wait_ms = self._take(keys, args)
        except redis.RedisError as exc:
            # Any other error (a key of another type under the prefix, a script refused) is
            # Redis trouble too: the request is told to come back, never given a 500.
            raise self.redis.unavailable(exc) from None
        if index == 0:
            return None
        return Shortfall(limits[int(index) - 1], max(int(wait_ms), 1) / 1000)
