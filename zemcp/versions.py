"""MCP protocol versions served, and the version that introduced each version-dependent feature.

A session stores the version negotiated at initialize (MCP basic/lifecycle); code that
behaves differently by version compares it with one of the names below, so every such rule
can be found from here. Version strings are dates, so they compare in time order as strings.
"""

#: Protocol versions served, preferred first; an unknown requested version gets the first.
SUPPORTED = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST = SUPPORTED[0]

#: Tool ``annotations`` and the ``completions`` capability.
ANNOTATIONS_AND_COMPLETIONS = "2025-03-26"
#: ``title`` on tools, resources and prompts, ``outputSchema`` and ``structuredContent``.
TITLES_AND_STRUCTURED_OUTPUT = "2025-06-18"
#: Elicitation modes (form, url) and the wider requestedSchema subset (SEP-1034, SEP-1330);
#: invalid tool arguments reported as tool errors (SEP-1303).
ELICITATION_MODES = "2025-11-25"


def since(protocol_version: str, feature: str) -> bool:
    """True when ``protocol_version`` has ``feature`` (one of the constants of this module)."""
    return protocol_version >= feature
