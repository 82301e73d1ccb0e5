"""``manage.py zemcp``: describe, serve over stdio, or try the site's MCP server.

- ``manage.py zemcp inspect [--json]``: every tool, resource, resource template and prompt the
  site registered, with schemas and who may use each (:mod:`zemcp.cli.inspect`).
- ``manage.py zemcp stdio [--user NAME]``: serve the site's server over MCP's stdio transport
  (basic/transports/stdio) for a desktop client that starts it, acting for that user: its
  permissions decide what the client sees, and handlers get it as ``ctx.user``.
- ``manage.py zemcp call TOOL [ARGUMENTS] [--user NAME]``: call one tool in this process and
  print its result (ARGUMENTS a JSON object), for a quick try; the call cannot elicit.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from zemcp.cli import inspect as inspection, stdio
from zemcp.cli.call import call_tool
from zemcp.core.server import Server
from zemcp.django import site

#: What ``manage.py zemcp`` does.
SUBCOMMANDS = ("inspect", "stdio", "call")
#: Each argument and option, and the subcommands that take it.
TAKES = {
    "TOOL": {"call"},
    "ARGUMENTS": {"call"},
    "--json": {"inspect"},
    "--user": {"stdio", "call"},
    "--log-level": {"stdio"},
}


class Command(BaseCommand):
    """``manage.py zemcp inspect | stdio | call``."""

    help = "Describe the site's MCP server, serve it over stdio, or call one of its tools."

    def add_arguments(self, parser: CommandParser) -> None:
        """``inspect | stdio | call`` and their options (one parser, so that Django's own
        options, ``--settings`` and the like, work after them too)."""
        parser.add_argument("subcommand", choices=SUBCOMMANDS, help="what to do")
        parser.add_argument("tool", nargs="?", help="(call) the tool's name")
        parser.add_argument("arguments", nargs="?", help="(call) its arguments, a JSON object: '{\"n\": 3}'")
        parser.add_argument("--json", action="store_true", help="(inspect) print JSON instead of text")
        parser.add_argument("--user", metavar="NAME", help="(stdio, call) the username whom every request acts for")
        parser.add_argument(
            "--log-level",
            choices=["debug", "info", "warning", "error", "critical"],
            help="(stdio) lowest level of the log records written to stderr (default: info)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the subcommand.

        Raises:
            CommandError: an option or argument the subcommand does not take, no such user,
                arguments that are not a JSON object, or a call that failed (the message says why).
        """
        subcommand = options["subcommand"]
        given = {
            "TOOL": options["tool"] is not None,
            "ARGUMENTS": options["arguments"] is not None,
            "--json": options["json"],
            "--user": options["user"] is not None,
            "--log-level": options["log_level"] is not None,
        }
        wrong = [name for name, present in given.items() if present and subcommand not in TAKES[name]]
        if wrong:
            raise CommandError(f"{subcommand} does not take {', '.join(wrong)} (manage.py zemcp --help)")
        server = site.server()
        if subcommand == "inspect":
            description = inspection.describe(server)
            self.stdout.write(
                json.dumps(description, indent=2) if options["json"] else inspection.render(description), ending=""
            )
        elif subcommand == "stdio":
            user = _user(options["user"])
            reader, writer = stdio.claim_stdio()
            stdio.log_to_stderr(options["log_level"] or "info", server.settings.log_format)
            stdio.run(server, reader, writer, user)
        else:
            if options["tool"] is None:
                raise CommandError("call needs the TOOL to call: manage.py zemcp call TOOL '{\"n\": 3}'")
            result = _call(server, options["tool"], options["arguments"] or "{}", _user(options["user"]))
            self.stdout.write(json.dumps(result, indent=2))
            if result.get("isError"):
                raise CommandError(f"the tool {options['tool']!r} answered a tool error (isError), printed above")


def _user(name: str | None) -> Any:
    """The site's user whose ``USERNAME_FIELD`` is ``name``, or None."""
    if name is None:
        return None
    model = get_user_model()
    try:
        return model._default_manager.get(**{str(model.USERNAME_FIELD): name})
    except model.DoesNotExist:
        raise CommandError(f"no {model._meta.verbose_name} has the username {name!r}") from None


def _call(server: Server, tool: str, arguments: str, user: Any) -> dict[str, Any]:
    """One ``tools/call`` in this process (:func:`zemcp.cli.call.call_tool`): its result.

    Raises:
        CommandError: ``arguments`` is not a JSON object, or the call was answered with an error.
    """
    try:
        parsed = json.loads(arguments)
    except ValueError as exc:
        raise CommandError(f"ARGUMENTS is not JSON ({exc}): give an object such as '{{\"n\": 3}}'") from None
    if not isinstance(parsed, dict):
        raise CommandError(f"ARGUMENTS is a JSON {type(parsed).__name__}: give an object such as '{{\"n\": 3}}'")
    try:
        answer = call_tool(server, tool, parsed, user, client="manage.py zemcp call")
    except RuntimeError as exc:
        raise CommandError(str(exc)) from None
    if "error" in answer:
        raise CommandError(answer["error"]["message"])
    result: dict[str, Any] = answer["result"]
    return result
