"""The rate-limit layer: which messages take tokens of the rate limits, from which buckets, and the refusal.

Every JSON-RPC request of a client with a key (:attr:`RequestContext.client
<zemcp.eras.requestcontext.RequestContext.client>`: HTTP's) takes a token from its client's
bucket (``ZEMCP_RATE_LIMIT``), in both eras, except ``ping``; a ``tools/call`` of a tool with a
limit of its own (``@server.tool(rate_limit=...)``, else ``ZEMCP_RATE_LIMIT_TOOLS``) takes one
from that tool's bucket too, or from neither. Never limited: responses (the answers to the
server's questions, which a waiting call needs), notifications (a cancellation must reach
its call), the session GETs and DELETEs, which are no messages, and stdio, whose one client
started the server for itself and shares it with no one. The buckets are the server's
:class:`zemcp.state.ratelimits.RateLimiter` (per process, or in Redis). The layer is the
outermost (:mod:`zemcp.pipeline`): a refused message never becomes a telemetry operation, only
a refusal.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING

from zemcp import logsafe
from zemcp.core.server import Server
from zemcp.protocol import jsonrpc
from zemcp.state.ratelimits import CLIENT_SCOPE, Limit, RateLimited

if TYPE_CHECKING:
    from zemcp.eras.requestcontext import Outcome, RequestContext, Serve

log = logging.getLogger("zemcp.rates")

#: Methods no bucket limits: a ping tells whether the server is there, and must.
UNLIMITED_METHODS = frozenset({"ping"})
#: The servers whose unknown ``ZEMCP_RATE_LIMIT_TOOLS`` names were warned of (each era's pipeline has this layer).
_WARNED: weakref.WeakSet[Server] = weakref.WeakSet()


class RateLimits:
    """The rate limits of one server, around the serving of each message.

    Args:
        server: its settings (``rate_limit``, ``rate_limit_tools``), its tools (their own
            ``rate_limit``; tools registered later count too) and its buckets
            (``server.state.limiter``).
        next: serves the message once its tokens are taken.
    """

    def __init__(self, server: Server, next: Serve):
        self._next = next
        settings = server.settings
        rate = settings.client_rate
        self._client = None if rate is None else Limit(CLIENT_SCOPE, rate, "ZEMCP_RATE_LIMIT")
        self._by_setting = {
            name: Limit(f"tool {name}", rate, "ZEMCP_RATE_LIMIT_TOOLS") for name, rate in settings.tool_rates.items()
        }
        self._tools = server.tools
        self._limiter = server.state.limiter
        unknown = sorted(name for name in self._by_setting if self._tools.get(name) is None)
        if unknown and server not in _WARNED:
            _WARNED.add(server)
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

    def __call__(self, message: jsonrpc.Message, context: RequestContext) -> Outcome:
        """Take ``message``'s tokens for its client (a client without a key, stdio's, takes
        none), then serve it: the one place where a request is refused for its rate.

        Raises:
            RateLimited: a bucket of its limits is empty; no token was taken, nothing was served.
            StateUnavailable: the buckets' Redis cannot be reached.
        """
        client = context.client
        limits = self.limits(message) if client is not None else None
        if limits and client is not None:
            shortfall = self._limiter.take(client, limits)
            if shortfall is not None:
                raise RateLimited(shortfall)
        return self._next(message, context)
