"""Caching hints of list and read results (MCP 2026-07-28 server/utilities/caching, SEP-2549).

``tools/list``, ``prompts/list``, ``resources/list``, ``resources/templates/list``,
``resources/read`` and ``server/discover`` results carry ``ttlMs`` (how long a client may
consider the result fresh) and ``cacheScope`` (``"public"``: the same for every caller, any
cache may keep it; ``"private"``: for this caller only). Each registration can set its own;
a list carries the most cautious hint of its items (the shortest TTL, ``private`` if any
item is private). The default, ``ttlMs: 0`` and ``private``, tells clients not to reuse a
result. Only the 2026-07-28 era sends hints. Pure data, no HTTP.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

SCOPES = ("public", "private")


@dataclass(frozen=True)
class CacheHint:
    """``ttlMs`` and ``cacheScope`` of a result.

    Attributes:
        ttl_ms: [milliseconds] how long the result may be considered fresh; 0: stale at once.
        scope: ``"public"`` or ``"private"``.
    Raises:
        ValueError: a negative or non-integer ``ttl_ms``, or another scope.
    """

    ttl_ms: int = 0
    scope: str = "private"

    def __post_init__(self) -> None:
        if isinstance(self.ttl_ms, bool) or not isinstance(self.ttl_ms, int) or self.ttl_ms < 0:
            raise ValueError(f"ttl_ms must be a whole number of milliseconds >= 0, got {self.ttl_ms!r}")
        if self.scope not in SCOPES:
            raise ValueError(f"cache_scope must be 'public' or 'private', got {self.scope!r}")

    def fields(self) -> dict[str, Any]:
        """The result fields: ``{"ttlMs": ..., "cacheScope": ...}``."""
        return {"ttlMs": self.ttl_ms, "cacheScope": self.scope}


#: What a result carries unless its registration says otherwise: do not reuse it.
NO_CACHE = CacheHint()


def combine(hints: Iterable[CacheHint]) -> CacheHint:
    """The hint of a list of items: the shortest TTL, ``private`` if any item is (NO_CACHE when empty)."""
    hints = list(hints)
    if not hints:
        return NO_CACHE
    return CacheHint(min(h.ttl_ms for h in hints), "private" if any(h.scope == "private" for h in hints) else "public")
