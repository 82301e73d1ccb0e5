"""The reference server's text commands and the ``ze_execute`` tool that runs them.

A stable path of the public API (``from zemcp.commands import CommandRegistry``); the code is
:mod:`zemcp.cli.commands`.
"""

from zemcp.cli.commands import (
    ELICIT_MESSAGE,
    Command,
    CommandContext,
    CommandError,
    CommandRegistry,
    add_builtin_commands,
    add_execute_tool,
)

__all__ = [
    "ELICIT_MESSAGE",
    "Command",
    "CommandContext",
    "CommandError",
    "CommandRegistry",
    "add_builtin_commands",
    "add_execute_tool",
]
