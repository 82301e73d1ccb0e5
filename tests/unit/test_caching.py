"""Caching hints (zemcp.protocol.caching): validation and how a list combines its items' hints."""

import pytest

import zemcp
from zemcp.protocol.caching import NO_CACHE, CacheHint, combine


def test_the_default_says_do_not_reuse():
    """Without a setting a result is stale at once and private."""
    assert NO_CACHE.fields() == {"ttlMs": 0, "cacheScope": "private"}


@pytest.mark.parametrize("ttl, scope", [(-1, "public"), (1.5, "public"), (True, "public"), (10, "shared")])
def test_bad_hints_are_refused(ttl, scope):
    """A negative or fractional TTL, or a scope other than public/private, is a ValueError."""
    with pytest.raises(ValueError):
        CacheHint(ttl, scope)


def test_a_list_takes_the_most_cautious_hint():
    """Shortest TTL; private when any item is private; NO_CACHE for an empty list."""
    assert combine([CacheHint(60000, "public"), CacheHint(5000, "public")]) == CacheHint(5000, "public")
    assert combine([CacheHint(60000, "public"), CacheHint(90000, "private")]) == CacheHint(60000, "private")
    assert combine([]) == NO_CACHE


def test_registrations_carry_their_hints():
    """The decorators take ttl_ms and cache_scope and refuse bad ones at registration."""
    server = zemcp.Server("c", settings=zemcp.Settings())

    @server.tool(ttl_ms=60000, cache_scope="public")
    def a() -> str:
        return "a"

    @server.resource("test://r", ttl_ms=1000, cache_scope="public")
    def r() -> str:
        return "r"

    assert server.tools.cache_hint() == CacheHint(60000, "public")
    assert server.resources.cache_hints() == (CacheHint(1000, "public"), NO_CACHE)
    with pytest.raises(ValueError, match="cache_scope"):
        server.prompt(cache_scope="everyone")
