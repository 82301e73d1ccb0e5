"""MCP protocol versions served, their era, and the version that introduced each version-dependent feature.

MCP 2026-07-28 basic/versioning names two eras. The **handshake** (legacy) versions are
negotiated once by ``initialize`` and stored in the session; the **modern** (stateless)
versions travel in every request's ``_meta``. Code that behaves differently by version
compares it with one of the names below, so every such rule can be found from here.
Version strings are dates, so they compare in time order as strings.
"""

#: Versions reachable through ``initialize``, preferred first; an unknown requested version gets the first.
HANDSHAKE = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST = HANDSHAKE[0]
#: Versions served statelessly, from the per-request envelope (no ``initialize``, no session).
MODERN = ("2026-07-28",)
#: Every version this server serves, newest first (``-32022``'s ``data.supported``).
ALL = MODERN + HANDSHAKE

#: Tool ``annotations`` and the ``completions`` capability.
ANNOTATIONS_AND_COMPLETIONS = "2025-03-26"
#: ``title`` on tools, resources and prompts, ``outputSchema`` and ``structuredContent``.
TITLES_AND_STRUCTURED_OUTPUT = "2025-06-18"
#: Elicitation modes (form, url) and the wider requestedSchema subset (SEP-1034, SEP-1330);
#: invalid tool arguments reported as tool errors (SEP-1303).
ELICITATION_MODES = "2025-11-25"
#: ``icons`` on tools, resources, resource templates, prompts and the implementation info, and
#: the implementation's ``description`` and ``websiteUrl`` (SEP-973).
ICONS = "2025-11-25"
#: The stateless era (SEP-2575, SEP-2567): per-request envelope, ``resultType``, caching hints
#: (SEP-2549), multi-round-trip requests instead of server-to-client requests (SEP-2322),
#: ``elicitationId`` and error -32042 retired, resource-not-found as -32602.
STATELESS = "2026-07-28"


def since(protocol_version: str, feature: str) -> bool:
    """True when ``protocol_version`` has ``feature`` (one of the constants of this module)."""
    return protocol_version >= feature


def is_modern(protocol_version: str) -> bool:
    """True for a version served statelessly (see :data:`MODERN`)."""
    return protocol_version in MODERN
