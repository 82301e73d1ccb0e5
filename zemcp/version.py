"""The version of zemcp (``serverInfo.version`` of the reference server, ``zemcp --version``),
and the release that removes the import paths of the flat package."""

__version__ = "0.1.0"

#: The release that removes the old import paths (:mod:`zemcp.moved`, ``zemcp.cli``'s old names).
OLD_PATHS_REMOVED_IN = "0.3"


def moved_message(old: str, new: str) -> str:
    """The ``DeprecationWarning`` text for an import path that moved.

    Args:
        old: the old dotted path, of a module (``"zemcp.session"``) or of a name in one
            (``"zemcp.session.Call"``).
        new: the module to import it from now.
    Returns:
        The message, naming ``new`` and the release that removes the old path.
    """
    return f"{old} moved to {new}; import it from there (the old path goes in zemcp {OLD_PATHS_REMOVED_IN})"
