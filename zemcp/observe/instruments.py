"""The names, units, buckets and attributes of zemcp's metrics, shared by every exporter.

Two histograms come from the OpenTelemetry semantic conventions for MCP: the duration of
each request or notification the server serves (``mcp.server.operation.duration``) and of
each session (``mcp.server.session.duration``), with the convention's bucket boundaries.
The rest are zemcp's own: the thread budget in use and the refusals, the outcomes of what
handlers ask the client, the sessions held. Prometheus names follow OpenTelemetry's
Prometheus mapping: dots become underscores, seconds get ``_seconds``, counters ``_total``.
"""

from __future__ import annotations

from typing import Final

#: [seconds] the convention's ExplicitBucketBoundaries of both duration histograms.
BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

OPERATION_DURATION: Final = "mcp.server.operation.duration"
#: The attributes of an operation's duration, in the order sinks receive their values.
OPERATION_KEYS: Final = (
    "mcp.method.name",
    "gen_ai.tool.name",
    "gen_ai.prompt.name",
    "error.type",
    "mcp.protocol.version",
    "network.transport",
)
SESSION_DURATION: Final = "mcp.server.session.duration"
SESSION_KEYS: Final = ("error.type", "mcp.protocol.version", "network.transport")

#: Requests refused before a handler ran, by reason: ``busy`` (503, the call budget),
#: ``share`` (429, the client's fair share), ``rate`` (429, a rate limit), ``sessions``
#: (429, the session cap), ``listen`` (429, the listen-stream cap), ``unavailable`` (503,
#: Redis or the authorization server), ``auth`` (401, 403), ``protocol`` (any other 4xx).
REFUSALS: Final = "zemcp.refusals"
REFUSAL_KEYS: Final = ("zemcp.refusal.reason", "http.response.status_code")

#: What became of the requests handlers sent the client (elicitation/create,
#: sampling/createMessage, roots/list), by outcome: ``accept``, ``decline``, ``cancel``
#: (the user's three answers to an elicitation), ``result`` (sampling and roots answered),
#: ``error`` (a JSON-RPC error answer), ``timeout``, ``disconnect`` (the client went away),
#: ``cancelled`` (the call was cancelled meanwhile), ``input_required`` (2026-07-28: the
#: round ended to ask), ``refused`` (a pending cap was reached), ``withdrawn`` (an ``async
#: def`` handler stopped awaiting it) or ``ended`` (the session or the server ended).
OUTCOMES: Final = "zemcp.client_requests"
OUTCOME_KEYS: Final = ("mcp.method.name", "zemcp.outcome")

#: Live figures, read when exported (a scrape sums them over the live workers): name -> (description, unit).
GAUGES: Final = {
    "zemcp.calls.running": ("Running calls (handlers), summed over the live workers", "{call}"),
    "zemcp.calls.budget": ("The threads running calls and streams may hold at once (the call budget)", "{thread}"),
    "zemcp.elicitations.pending": ("Server-to-client requests waiting for their answer", "{request}"),
    "zemcp.streams.open": ("Open streams that hold a thread, by zemcp.stream.kind", "{stream}"),
    "zemcp.sessions.live": ("Live handshake-era sessions", "{session}"),
}
#: The kinds of :data:`GAUGES` ``zemcp.streams.open``: a session's standalone GET stream, a
#: ``subscriptions/listen`` stream, a request's stream waiting for its client to resume it.
STREAM_KINDS: Final = ("standalone", "listen", "resuming")


def prometheus_name(name: str, unit: str = "") -> str:
    """The Prometheus name of metric ``name`` (``mcp.server.operation.duration``, ``s`` ->
    ``mcp_server_operation_duration_seconds``)."""
    base = name.replace(".", "_")
    return base + "_seconds" if unit == "s" else base


def prometheus_label(key: str) -> str:
    """The Prometheus label of attribute ``key`` (dots become underscores)."""
    return key.replace(".", "_")
