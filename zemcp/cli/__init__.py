"""The command line and what it serves: ``zemcp run`` (HTTP or stdio), the stdio transport,
the ``zemcp-test`` client, Click CLIs as tools and the reference server's commands.

Before the package was split into layers, ``zemcp.cli`` was the ``zemcp-test`` module, now
:mod:`zemcp.cli.mcptest`. Until zemcp 0.3 its public names (``main``, ``mcp``,
``DEFAULT_URL``) are still answered here, each with a ``DeprecationWarning`` that names the
new module at its first use (as :mod:`zemcp.moved` does for the other moved paths). Nothing
is imported until one is asked for: ``zemcp.cli.mcptest`` needs the client extra, which
serving does not.
"""

from __future__ import annotations

import warnings
from typing import Any

from zemcp.version import moved_message

#: The public names of the old ``zemcp.cli`` module, all defined in :mod:`zemcp.cli.mcptest`.
_MCPTEST_NAMES = frozenset({"DEFAULT_URL", "main", "mcp"})


def __getattr__(name: str) -> Any:
    """A name of the old ``zemcp.cli`` module, from :mod:`zemcp.cli.mcptest` (PEP 562).

    Args:
        name: an attribute the package does not have (a submodule not imported yet is one).
    Returns:
        ``zemcp.cli.mcptest``'s object of that name, after a ``DeprecationWarning`` (the
        first time only: the name is then an attribute of the package).
    Raises:
        AttributeError: ``name`` was not a public name of the old module.
    """
    if name not in _MCPTEST_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # One level up is the code that asked for the name.
    warnings.warn(moved_message(f"{__name__}.{name}", f"{__name__}.mcptest"), DeprecationWarning, stacklevel=2)
    from zemcp.cli import mcptest

    # Kept here once found: ``from zemcp.cli import main`` looks the name up twice (the import
    # system's check of a package's attributes, then the statement's), and warns once.
    value = globals()[name] = getattr(mcptest, name)
    return value
