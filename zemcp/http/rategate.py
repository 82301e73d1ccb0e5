"""Which POSTed messages take tokens of the rate limits, from which buckets, and the refusal.

Every JSON-RPC request POSTed to the endpoint takes a token from its client's bucket
(``ZEMCP_RATE_LIMIT``), in both eras, except ``ping``; a ``tools/call`` of a tool with a limit
of its own (``@server.tool(rate_limit=...)``, else ``ZEMCP_RATE_LIMIT_TOOLS``) takes one from
that tool's bucket too, or from neither. Never limited: responses (the answers to the
server's questions, which a waiting call needs), notifications (a cancellation must reach
its call), GETs, DELETEs, and the stdio transport, which never comes here. The buckets are
the server's :class:`zemcp.state.ratelimits.RateLimiter` (per process, or in Redis).
"""

from __future__ import annotations

import logging

from zemcp import logsafe
from zemcp.core.server import Server
from zemcp.protocol import jsonrpc
from zemcp.state.ratelimits import CLIENT_SCOPE, Limit, RateLimited

log = logging.getLogger("zemcp.rates")

#: Methods no bucket limits: a ping tells whether the server is there, and must.
UNLIMITED_METHODS = frozenset({"ping"})


class RateGate:
    """The rate limits of one server's HTTP endpoint.

    Args:
        server: its settings (``rate_limit``, ``rate_limit_tools``), its tools (their own
            ``rate_limit``; tools registered later count too) and its buckets
            (``server.state.limiter``).
    """

    def __init__(self, server: Server):
        settings = server.settings
        rate = settings.client_rate
        self._client = None if rate is None else Limit(CLIENT_SCOPE, rate, "ZEMCP_RATE_LIMIT")
        self._by_setting = {
            name: Limit(f"tool {name}", rate, "ZEMCP_RATE_LIMIT_TOOLS") for name, rate in settings.tool_rates.items()
        }
        self._tools = server.tools
        self._limiter = server.state.limiter
        unknown = sorted(name for name in self._by_setting if self._tools.get(name) is None)
        if unknown:
            # Most likely a typo, which would leave the tool unlimited without a word.
            log.warning(
                "ZEMCP_RATE_LIMIT_TOOLS names %s, which this server has no tool of (yet): no limit applies "
                "until a tool of that name is registered; check the spelling against tools/list",
                ", ".join(logsafe.clip(name) for name in unknown),
            )

    def limits(self, message: jsonrpc.Message) -> list[Limit]:
        """The limits whose buckets ``message`` takes a token from (empty: it is not limited)."""
        if self._client is None and not self._by_setting and not self._tools.rate_limited:
            return []  # no limit is set anywhere: the common case, answered at once
        if not isinstance(message, jsonrpc.Request) or message.method in UNLIMITED_METHODS:
            return []
        limits = [] if self._client is None else [self._client]
        if message.method == "tools/call":
            name = message.params.get("name")
            tool = self._tools.get(name) if isinstance(name, str) else None
            if tool is not None and tool.rate_limit is not None:
                limits.append(Limit(f"tool {tool.name}", tool.rate_limit, "the tool's rate_limit"))
            elif tool is not None and tool.name in self._by_setting:
                limits.append(self._by_setting[tool.name])
        return limits

    def check(self, message: jsonrpc.Message, client: str) -> None:
        """Take ``message``'s tokens for ``client``, or refuse it: the one place where a request
        is refused for its rate (a counter of refusals belongs here).

        Args:
            message: the parsed POST body.
            client: its client key (:func:`zemcp.state.shares.client_key`).
        Raises:
            RateLimited: a bucket of its limits is empty; no token was taken.
            StateUnavailable: the buckets' Redis cannot be reached.
        """
        limits = self.limits(message)
        if not limits:
            return
        shortfall = self._limiter.take(client, limits)
        if shortfall is not None:
            raise RateLimited(shortfall)
