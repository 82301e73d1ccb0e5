"""The live figures of a server that its telemetry's gauges report (:func:`figures`).

The operations of the messages a client sends are opened by :mod:`zemcp.pipeline.telemetry`.
"""

from __future__ import annotations

from typing import Any

from zemcp.state.unavailable import StateUnavailable


def figures(server: Any) -> dict[str, Any] | None:
    """The live figures of ``server`` (a :class:`zemcp.core.server.Server`) that
    :data:`zemcp.observe.instruments.GAUGES` names; None once the server is gone (None)."""
    if server is None:
        return None
    try:
        sessions = len(server.sessions)
    except StateUnavailable:
        # Shared sessions out of reach (Redis down): a scrape still reports everything else.
        sessions = 0
    return {
        "zemcp.calls.running": server.admission.running,
        "zemcp.calls.budget": server.settings.call_budget,
        "zemcp.elicitations.pending": server.pending.count(),
        "zemcp.streams.open": {
            "standalone": server.admission.standalone,
            "listen": server.subscriptions.count(),
            "resuming": server.admission.resuming,
        },
        "zemcp.sessions.live": sessions,
    }
