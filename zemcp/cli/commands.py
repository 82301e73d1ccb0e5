"""Text commands and the ``ze_execute`` tool that runs them.

Commands are registered by name (one or more words, such as ``server status``) and a line
is dispatched to the command whose name is the longest case-insensitive word prefix of it;
the rest of the line is the command's argument string. ``ze_execute`` runs one line and
returns its output. Called without ``command``, it asks the user for one by elicitation
when the client supports it (the behaviour of ze's MCP server, which this reproduces), through
the tool decorator's ``elicit_missing``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zemcp.core.context import Context
from zemcp.core.tools import ToolError
from zemcp.state.session import fingerprint

if TYPE_CHECKING:
    from zemcp.auth.principal import Principal
    from zemcp.core.server import Server
    from zemcp.protocol.capabilities import ClientView
    from zemcp.state.session import Session

_WORD = re.compile(r"\S+")


class CommandError(Exception):
    """A command line that cannot run: unknown command or bad arguments."""


@dataclass(frozen=True)
class CommandContext:
    """What a command handler gets.

    Attributes:
        server: the running server (its sessions, correlation table and settings).
        session: the session of the caller; None for a 2026-07-28 request (no sessions).
        commands: the registry, for commands that describe the others.
        client: what the caller declared for this request (version, client info, capabilities).
        principal: who the request's access token names; None with authorization off.
    """

    server: Server
    session: Session | None
    commands: CommandRegistry
    client: ClientView
    principal: Principal | None = None


@dataclass(frozen=True)
class Command:
    """A registered command: ``handler(ctx, args) -> str`` with a one-line ``help``."""

    name: str
    handler: Callable[[CommandContext, str], str]
    help: str


class CommandRegistry:
    """Commands by name, dispatched by longest word prefix."""

    def __init__(self) -> None:
        self._commands: dict[tuple[str, ...], Command] = {}
        # Made at the first use after a registration: commands do not change once registered.
        self._sorted: list[Command] | None = None
        self._help: str | None = None

    def command(
        self, name: str, help: str
    ) -> Callable[[Callable[[CommandContext, str], str]], Callable[[CommandContext, str], str]]:
        """Decorator registering ``handler(ctx, args) -> str`` under ``name``.

        Raises:
            ValueError: ``name`` is empty or already registered.
        """

        def register(handler: Callable[[CommandContext, str], str]) -> Callable[[CommandContext, str], str]:
            words = tuple(w.lower() for w in name.split())
            if not words:
                raise ValueError("a command name needs at least one word")
            if words in self._commands:
                raise ValueError(f"a command named {' '.join(words)!r} is already registered")
            self._commands[words] = Command(" ".join(words), handler, help)
            self._sorted = self._help = None
            return handler

        return register

    def commands(self) -> list[Command]:
        """Every command, sorted by name (do not modify the list)."""
        if self._sorted is None:
            self._sorted = sorted(self._commands.values(), key=lambda c: c.name)
        return self._sorted

    def help_text(self) -> str:
        """One line per command, sorted by name: its name, padded to the longest, and its help."""
        if self._help is None:
            commands = self.commands()
            width = max((len(c.name) for c in commands), default=0)
            self._help = "\n".join(f"{c.name:<{width}}  {c.help}" for c in commands)
        return self._help

    def match(self, line: str) -> tuple[Command, str]:
        """Find the command for ``line``.

        Returns:
            the command and the rest of the line after its name (stripped).
        Raises:
            CommandError: no command name is a word prefix of the line.
        """
        whole = self._commands.get(tuple(line.lower().split()))
        if whole is not None:
            # The whole line names a command (no arguments): the common case, found at once.
            return whole, ""
        words = list(_WORD.finditer(line))
        for n in range(len(words), 0, -1):
            command = self._commands.get(tuple(m.group().lower() for m in words[:n]))
            if command is not None:
                return command, line[words[n - 1].end() :].strip()
        raise CommandError(f"unknown command {line.strip()!r}; run 'help' to list the commands")

    def dispatch(self, line: str, ctx: CommandContext) -> str:
        """Run ``line`` and return its output.

        Raises:
            CommandError: unknown command, or the command refused its arguments.
        """
        command, args = self.match(line)
        return command.handler(ctx, args)


ELICIT_MESSAGE = "Which command would you like to run?"


def add_execute_tool(server: Server, commands: CommandRegistry, name: str = "ze_execute") -> None:
    """Register the tool ``name`` on ``server``: run one line of ``commands``.

    A call without a command (absent or blank) asks the user for one by the server's
    ``elicit_missing`` mechanism (the form is built from ``command``'s input schema, key
    ``command`` in the 2026-07-28 era). Outcomes (all ``isError`` results, as text):
    ``Error: missing required argument: command`` without a command and without the
    elicitation capability; ``Error: elicit: <why>`` when the elicitation fails;
    ``Error: elicit returned empty command``; ``Error: <why>`` for an unknown command.
    """

    @server.tool(
        name,
        title="Run a command",
        description=(
            "Run one text command and return its output (run 'help' to list them). Leave out "
            "'command' and, if the client supports elicitation, the server asks the user for one."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "The command line, e.g. 'server status' or 'session show'",
                },
            },
            "additionalProperties": False,
        },
        elicit_missing=["command"],
        elicit_message=ELICIT_MESSAGE,
    )
    def execute(ctx: Context, command: str) -> str:
        try:
            return commands.dispatch(command, CommandContext(server, ctx.session, commands, ctx.client, ctx.auth))
        except CommandError as exc:
            raise ToolError(f"Error: {exc}") from None


def add_builtin_commands(commands: CommandRegistry) -> None:
    """Register ``help``, ``session show``, ``session list`` and ``server status``."""

    @commands.command("help", "list the commands")
    def help_(ctx: CommandContext, args: str) -> str:
        return ctx.commands.help_text()

    @commands.command("session show", "this session: client, protocol version, elicitation, age, pending")
    def session_show(ctx: CommandContext, args: str) -> str:
        c = ctx.client
        lines = [
            f"client: {_client(c)}",
            f"protocol version: {c.protocol_version}",
            f"elicitation: {'yes' if c.client_supports_elicit() else 'no'}",
        ]
        s = ctx.session
        if s is None:
            return "\n".join([*lines, "session: none (MCP 2026-07-28 is stateless: each request stands alone)"])
        return "\n".join(
            [
                *lines,
                f"age: {time.time() - s.created:.0f} s",
                f"pending elicitations: {ctx.server.pending.count(s.id)}",
            ]
        )

    @commands.command("session list", "your sessions (ids as fingerprints)")
    def session_list(ctx: CommandContext, args: str) -> str:
        now = time.time()
        sessions = ctx.server.sessions.sessions()
        # Another caller's sessions are not this caller's business: with authorization on, the
        # principal's own; without it, no caller can be told from another, so only the caller's.
        if ctx.principal is not None:
            mine = [s for s in sessions if s.principal == ctx.principal.key]
        else:
            mine = [s for s in sessions if ctx.session is not None and s.id == ctx.session.id]
        pid = ctx.server.status()["pid"]
        lines = [f"{len(mine)} session(s) in process {pid} are yours ({len(sessions)} in all):"]
        for s in mine:
            mark = "*" if ctx.session is not None and s.id == ctx.session.id else " "
            lines.append(
                f"{mark} {fingerprint(s.id)}  {_client(s)}  protocol {s.protocol_version}  "
                f"age {now - s.created:.0f} s  pending {ctx.server.pending.count(s.id)}"
            )
        return "\n".join(lines)

    @commands.command("server status", "version, pid, uptime, sessions, pending elicitations, thread budget")
    def server_status(ctx: CommandContext, args: str) -> str:
        st = ctx.server.status()
        settings = ctx.server.settings
        return "\n".join(
            [
                f"zemcp {st['version']} ({ctx.server.name} {ctx.server.version})",
                f"pid: {st['pid']}",
                f"uptime: {st['uptime']:.0f} s",
                f"sessions: {st['sessions']} (cap {settings.max_sessions})",
                f"pending elicitations: {st['pending']} (cap {st['pending_budget']})",
                f"listen streams: {st['listen_streams']} (cap {st['listen_budget']})",
                f"standalone streams: {st['standalone_streams']} (cap {st['standalone_budget']})",
                f"resumed streams: {st['resuming_streams']}",
                f"replay buffers of finished streams: {st['replay_bytes']} bytes (cap {settings.max_replay_bytes})",
                f"running calls and streams: "
                f"{st['running'] + st['listen_streams'] + st['standalone_streams'] + st['resuming_streams']} "
                f"(call budget {st['call_budget']})",
                f"thread budget: {st['threads']} threads = {st['pending_budget']} for pending elicitations"
                f" + {st['listen_budget']} for listen streams + {st['standalone_budget']} for standalone streams"
                f" + {st['threads'] - st['pending_budget'] - st['listen_budget'] - st['standalone_budget']} reserved",
            ]
        )


def _client(client: ClientView) -> str:
    info = client.client_info
    return f"{info.get('name', '?')} {info.get('version', '?')}"
