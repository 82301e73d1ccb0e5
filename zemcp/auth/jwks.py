"""The authorization server's signing keys (its JWKS, RFC 7517) as :class:`~zemcp.auth.verifiers.JwtVerifier` uses them.

A fetch of the JWKS can hang as long as the authorization server lets it. So no request
waits for one unless it needs it: a token whose key is known is checked with the keys at
hand, also while they are due for a refresh, which then runs in the background. Fetches
happen one at a time, each on a thread of its own; only the request whose unknown key
started a fetch waits for it (at most ``timeout`` seconds), and any other request that
needs a key it does not find is refused at once (or after :data:`JOIN_WAIT`), as it is
while fetching is backed off after a failure.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

import jwt

log = logging.getLogger("zemcp.auth")

#: [seconds] the pause after a failed fetch; each further failure in a row doubles it, up to
#: the cooldown (and never below this).
FIRST_BACKOFF = 1.0
#: [seconds] how long a token with an unknown key waits for a fetch another request started
#: (so that requests arriving together at start-up are served), before it is refused.
JOIN_WAIT = 0.25


class KeysUnavailable(Exception):
    """The key a token names is not known and cannot be fetched now.

    Attributes:
        retry_after: [seconds] when a fetch may be tried again (at least 1).
    """

    def __init__(self, message: str, retry_after: float):
        super().__init__(message)
        self.retry_after = max(1, math.ceil(retry_after))


class UnknownKey(Exception):
    """The authorization server does not publish the key a token names (as of the latest fetch)."""


class JwksKeys:
    """The signing keys of one JWKS URL, fetched on first use, refreshed, never waited for needlessly.

    Args:
        url: the authorization server's ``jwks_uri`` (http or https).
        lifespan: [seconds] how long fetched keys are used before they are fetched again (in
            the background: known keys go on serving meanwhile, and while fetching fails).
        cooldown: [seconds] a key id not among the keys makes them be fetched again only when
            the last successful fetch is older than this; also the longest pause after failures.
        timeout: [seconds] bound on one fetch's connection and reads, and on the wait of the
            request that started it.
    Raises:
        jwt.PyJWKClientError: ``url`` is not http or https.
    """

    def __init__(self, url: str, *, lifespan: float, cooldown: float, timeout: float):
        self.lifespan = lifespan
        self.cooldown = cooldown
        self.timeout = timeout
        # PyJWT's client only for its fetch (no redirects, http and https only): its cache
        # would hold every request behind one lock while it fetches.
        self._client = jwt.PyJWKClient(url, cache_jwk_set=False, timeout=timeout)
        self._lock = threading.Lock()
        self._fetched = threading.Condition(self._lock)
        self._keys: dict[str, jwt.PyJWK] | None = None
        self._fetched_at = 0.0  # [monotonic seconds] of the last successful fetch
        self._fetching = False
        self._fetches = 0  # completed fetches, successful or not
        self._failures = 0  # failed fetches in a row: nonzero when the last one failed
        self._retry_at = 0.0  # [monotonic seconds] no fetch before, after a failure
        self._failure = ""  # why the last fetch failed

    def key(self, kid: str) -> jwt.PyJWK:
        """The signing key ``kid`` names.

        Returns:
            the key, at once when it is known (a refresh that is due starts in the background).
        Raises:
            UnknownKey: the keys, fetched within ``cooldown`` or just now, do not hold it.
            KeysUnavailable: it is not known and the keys cannot be fetched now (a fetch is
                under way for another request, fetching failed lately, or this fetch failed
                or took longer than ``timeout``).
        """
        now = time.monotonic()
        with self._lock:
            keys = self._keys
            if keys is not None and kid in keys:
                if now - self._fetched_at >= self.lifespan:
                    self._start(now)
                return keys[kid]
            if keys is not None and now - self._fetched_at < self.cooldown:
                raise UnknownKey(kid)
            if self._fetching:
                return self._await(kid, self._fetches, JOIN_WAIT)
            if now < self._retry_at:
                raise KeysUnavailable(
                    f"the authorization server's keys (JWKS) could not be fetched ({self._failure}); "
                    f"the next attempt is in {math.ceil(self._retry_at - now)} s",
                    self._retry_at - now,
                )
            self._start(now)
            # The fetch's own reads are bounded by ``timeout``: wait a moment more for its outcome.
            return self._await(kid, self._fetches, self.timeout + JOIN_WAIT)

    def _await(self, kid: str, fetches: int, wait: float) -> jwt.PyJWK:
        # Called with the lock held: wait (released) for the fetch under way to end.
        if not self._fetched.wait_for(lambda: self._fetches != fetches, timeout=wait):
            raise KeysUnavailable(
                "the authorization server's keys (JWKS) are being fetched and the key the access token names "
                "is not known yet",
                FIRST_BACKOFF,
            )
        keys = self._keys
        if keys is not None and kid in keys:
            return keys[kid]
        if self._failures:
            # The fetch waited for failed (the keys at hand, if any, do not hold this one).
            raise KeysUnavailable(
                f"the authorization server's keys (JWKS) could not be fetched ({self._failure})",
                self._retry_at - time.monotonic(),
            )
        raise UnknownKey(kid)

    def _start(self, now: float) -> None:
        # Called with the lock held: fetch on a thread of its own, unless one runs or fetching is backed off.
        if self._fetching or now < self._retry_at:
            return
        self._fetching = True
        try:
            threading.Thread(target=self._fetch, name="zemcp-jwks", daemon=True).start()
        except RuntimeError as exc:  # no thread to be had: the next request tries again
            self._fetching = False
            log.warning("cannot start a JWKS fetch: %s", exc)

    def _fetch(self) -> None:
        keys: dict[str, jwt.PyJWK] | None = None
        failure = ""
        try:
            keys = _signing_keys(self._client.fetch_data())
        except jwt.PyJWKClientConnectionError as exc:
            failure = "unreachable"
            log.warning("cannot fetch the JWKS to check access tokens: %s", exc)
        except Exception as exc:  # anything the URL answers that is not a key set
            failure = "unusable answer"
            log.warning("the JWKS of the authorization server is unusable (not JSON, or no signing keys): %s", exc)
        with self._lock:
            now = time.monotonic()
            if keys is not None:
                self._keys = keys
                self._fetched_at = now
                self._failures = 0
                self._retry_at = 0.0
            else:
                self._failures += 1
                self._failure = failure
                self._retry_at = now + self._backoff()
            self._fetching = False
            self._fetches += 1
            self._fetched.notify_all()

    def _backoff(self) -> float:
        # [seconds] the pause after the current run of failures.
        cap = max(self.cooldown, FIRST_BACKOFF)
        # Bounded, so that a long outage's count cannot overflow the float.
        doublings: int = min(max(self._failures - 1, 0), 32)
        return min(cap, FIRST_BACKOFF * float(2**doublings))


def _signing_keys(document: Any) -> dict[str, jwt.PyJWK]:
    """The signing keys of a JWKS document, by key id.

    Raises:
        jwt.PyJWKSetError, jwt.PyJWKClientError: no usable signing key.
    """
    keys = {
        key.key_id: key
        for key in jwt.PyJWKSet.from_dict(document).keys
        if key.public_key_use in ("sig", None) and key.key_id
    }
    if not keys:
        raise jwt.PyJWKClientError("the JWKS holds no signing key with a key id")
    return keys
