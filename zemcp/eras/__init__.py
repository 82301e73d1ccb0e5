"""The two protocol eras served on one endpoint, independent of each other: the handshake era
(:mod:`zemcp.eras.handshake`, 2024-11-05 to 2025-11-25: initialize and sessions) and the
stateless era (:mod:`zemcp.eras.modern`, 2026-07-28: the per-request envelope and
multi-round-trip requests)."""
