"""The stateless era (MCP 2026-07-28): the ``params._meta`` envelope on every request,
multi-round-trip requests (SEP-2322) replayed from a sealed ``requestState``."""
