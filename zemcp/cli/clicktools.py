"""Existing Click command-line interfaces as MCP tools, or as text commands.

:func:`add_click_tools` registers every command of a Click group as a tool whose input schema
is built from the command's options and arguments (:mod:`zemcp.cli.clickschema`);
:func:`add_click_commands` registers them as text commands of a
:class:`zemcp.cli.commands.CommandRegistry`, run behind one ``*_execute`` tool. Either way a
call runs the command in-process with Click's own parsing (:mod:`zemcp.cli.clickrun`, which
captures its output), through the root group, so group callbacks (which often set up
``ctx.obj``) run as on the command line.
"""

from __future__ import annotations

import inspect
import logging
import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import click

from zemcp.cli.clickrun import invoke
from zemcp.cli.clickschema import Binding, bindings_schema, command_bindings, command_line
from zemcp.cli.commands import CommandContext, CommandError, CommandRegistry
from zemcp.core.tools import ToolError

if TYPE_CHECKING:
    from zemcp.core.server import Server

log = logging.getLogger("zemcp.clicktools")

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.-]")


def _commands(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """``(path of names, command)`` for every visible leaf command under ``command``."""
    if not isinstance(command, click.Group):
        yield path, command
        return
    ctx = click.Context(command, info_name=command.name)
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        yield from _commands(sub, (*path, name))


def _description(command: click.Command, path: tuple[str, ...]) -> str:
    """The command's help text as the tool's description, without Click's layout marks."""
    text = command.help or command.short_help or ""
    # "\f" ends the help Click shows; a "\b" line marks a paragraph Click must not rewrap.
    text = inspect.cleandoc(text.split("\f", 1)[0])
    text = "\n".join(line for line in text.splitlines() if line.strip() != "\b").strip()
    return text or f"Run the command '{' '.join(path) or command.name}'."


def add_click_tools(
    server: Server,
    group: click.Command,
    *,
    prefix: str | None = None,
    elicit_missing: bool | Sequence[str] = False,
    prog_name: str | None = None,
    **tool_options: Any,
) -> list[str]:
    """Register every command of a Click group as a tool of ``server``.

    A command's tool is named after its path of command names joined with ``_``
    (``db_migrate`` for ``cli db migrate``; characters a tool name cannot have become ``_``),
    after ``prefix`` and ``_`` when given. ``group`` may also be a single command: its tool
    is named ``prefix``, else after the command. Its input schema is
    :func:`command_schema`; its description is the command's help. A call builds the command
    line from the arguments and runs it through ``group`` (see :func:`invoke`): the result
    is the output as text, or an ``isError`` result ``Error: <failure>`` followed by the
    output when the command line is refused (usage error, bad parameter), aborts or exits
    with a non-zero code. The group's own parameters keep their defaults.

    Args:
        server: the server to register the tools on.
        group: the Click group (nested groups are walked; hidden commands are skipped) or command.
        prefix: joined before every tool name with ``_``.
        elicit_missing: passed to ``server.tool`` when it accepts it: True (for the commands
            with a required parameter a form can ask for: string, number, integer, boolean,
            Choice), or the names of the parameters to ask for (narrowed to each command's
            own parameters). A call that lacks them asks the user for them by elicitation.
            Without that support in ``server.tool`` a warning is logged and such calls are
            refused as any call without a required argument is.
        prog_name: the program name in usage and help texts; the group's name when omitted.
        tool_options: more options of ``server.tool`` for every tool (``annotations``,
            ``scopes``, ``ttl_ms``, ``cache_scope``).
    Returns:
        the names of the registered tools, in the group's order.
    Raises:
        ValueError: a tool name is taken or invalid (longer than 128 characters), or a
            command has two parameters of one name.
    """
    supports_elicit = "elicit_missing" in inspect.signature(server.tool).parameters
    if elicit_missing and not supports_elicit:
        log.warning(
            "server.tool has no elicit_missing: calls of Click commands without a required "
            "parameter are refused instead of asking the user for it"
        )
    names = []
    for path, command in _commands(group):
        parts = [prefix] if prefix else []
        parts += list(path) if path or prefix else [command.name or "cli"]
        name = _NOT_IN_NAME.sub("_", "_".join(parts))
        bindings = command_bindings(command)
        options = dict(tool_options)
        if elicit_missing and supports_elicit:
            if isinstance(elicit_missing, bool):
                # server.tool refuses True for a tool without a required argument a form can
                # ask for (such as a command whose only argument is nargs=-1).
                if any(b.required and _askable(b.schema) for b in bindings):
                    options["elicit_missing"] = True
            else:
                own = [n for n in elicit_missing if any(b.name == n for b in bindings)]
                if own:
                    options["elicit_missing"] = own
        server.tool(name, description=_description(command, path), input_schema=bindings_schema(bindings), **options)(
            _tool_handler(group, path, bindings, prog_name)
        )
        names.append(name)
    return names


def _askable(schema: dict[str, Any]) -> bool:
    """Whether a form can ask for the property: a primitive, and a string enum only of non-empty strings."""
    if schema.get("type") not in ("string", "number", "integer", "boolean"):
        return False
    return all(isinstance(v, str) and v for v in schema.get("enum", ["x"]))


def _tool_handler(
    root: click.Command, path: tuple[str, ...], bindings: list[Binding], prog_name: str | None
) -> Callable[..., str]:
    def run(**arguments: Any) -> str:
        result = invoke(root, [*path, *command_line(bindings, arguments)], prog_name=prog_name)
        if result.failure is not None:
            raise ToolError(f"Error: {result.error_text()}")
        return result.output

    return run


def add_click_commands(
    registry: CommandRegistry, group: click.Command, *, prefix: str | None = None, prog_name: str | None = None
) -> list[str]:
    """Register every command of a Click group as a text command of ``registry``.

    A command is registered under its path of command names (``db migrate``), after
    ``prefix`` when given; its help line is Click's short help. The rest of the line is split
    as a shell would (:func:`shlex.split`) and parsed by Click, so ``db migrate --dry-run
    'my table'`` and ``db migrate --help`` work as in a terminal. A refused command line,
    an abort or a non-zero exit raises :class:`zemcp.cli.commands.CommandError` with the
    failure and the output, which the ``*_execute`` tool returns as ``Error: ...``.

    Args:
        registry: the registry behind an ``add_execute_tool`` tool.
        group: the Click group (nested groups are walked; hidden commands are skipped) or command.
        prefix: one or more words before every command name.
        prog_name: the program name in usage and help texts; the group's name when omitted.
    Returns:
        the registered command names, in the group's order.
    Raises:
        ValueError: a command name is already registered.
    """
    names = []
    for path, command in _commands(group):
        words = ([prefix] if prefix else []) + (list(path) if path or prefix else [command.name or "cli"])
        name = " ".join(words)
        registry.command(name, command.get_short_help_str(limit=100))(_text_handler(group, path, prog_name))
        names.append(name)
    return names


def _text_handler(
    root: click.Command, path: tuple[str, ...], prog_name: str | None
) -> Callable[[CommandContext, str], str]:
    def run(ctx: CommandContext, args: str) -> str:
        try:
            tokens = shlex.split(args)
        except ValueError as exc:
            raise CommandError(f"cannot split the arguments {args!r}: {exc}") from None
        result = invoke(root, [*path, *tokens], prog_name=prog_name)
        if result.failure is not None:
            raise CommandError(result.error_text())
        return result.output

    return run
