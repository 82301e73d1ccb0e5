"""The JWKS key set (zemcp/auth/jwks.py) without HTTP: its fetch replaced by one the test controls."""

from __future__ import annotations

import json
import threading
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from zemcp.auth.jwks import FIRST_BACKOFF, JwksKeys, KeysUnavailable, UnknownKey


def _jwk(kid: str) -> dict:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())), "kid": kid, "use": "sig"}


class Fetches:
    """What the authorization server answers, one fetch at a time: keys, a failure, or a hang."""

    def __init__(self, *kids: str):
        self.document = {"keys": [_jwk(kid) for kid in kids]}
        self.failing = False
        self.release = threading.Event()
        self.release.set()
        self.count = 0

    def fetch_data(self) -> dict:
        self.count += 1
        self.release.wait(10)
        if self.failing:
            raise jwt.PyJWKClientConnectionError("down")
        return self.document


def keys_of(fetches: Fetches, **settings: float) -> JwksKeys:
    keys = JwksKeys("https://as.example/jwks", **{"lifespan": 300, "cooldown": 0, "timeout": 1, **settings})
    keys._client = fetches  # the fetch under test's control
    return keys


def test_a_known_key_is_served_while_its_refresh_hangs():
    fetches = Fetches("k1")
    keys = keys_of(fetches, lifespan=0.05)
    assert keys.key("k1").key_id == "k1"
    time.sleep(0.1)
    fetches.release.clear()
    started = time.monotonic()
    for _ in range(5):
        assert keys.key("k1").key_id == "k1"
    assert time.monotonic() - started < 0.1 and fetches.count == 2, "one refresh, in the background"
    with pytest.raises(KeysUnavailable, match="being fetched"):
        keys.key("k2")
    fetches.release.set()


def test_failures_back_off_doubling_up_to_the_cooldown():
    fetches = Fetches("k1")
    fetches.failing = True
    keys = keys_of(fetches, cooldown=2 * FIRST_BACKOFF)
    with pytest.raises(KeysUnavailable, match="could not be fetched") as first:
        keys.key("k1")
    assert first.value.retry_after == 1
    with pytest.raises(KeysUnavailable, match="next attempt"):
        keys.key("k1")
    assert fetches.count == 1, "no fetch while backed off"
    time.sleep(FIRST_BACKOFF + 0.05)
    with pytest.raises(KeysUnavailable) as second:
        keys.key("k1")
    assert fetches.count == 2 and second.value.retry_after == 2
    fetches.failing = False
    time.sleep(2 * FIRST_BACKOFF + 0.05)
    assert keys.key("k1").key_id == "k1"


def test_an_unknown_key_within_the_cooldown_is_unknown_without_a_fetch():
    fetches = Fetches("k1")
    keys = keys_of(fetches, cooldown=60)
    keys.key("k1")
    with pytest.raises(UnknownKey):
        keys.key("k9")
    assert fetches.count == 1
