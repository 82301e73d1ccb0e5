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

import io
import json
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from zemcp.cli import inspect as inspection, stdio
from zemcp.core.server import Server
from zemcp.django import site
from zemcp.protocol.versions import LATEST


class Command(BaseCommand):
    """``manage.py zemcp inspect | stdio | call``."""

    help = "Describe the site's MCP server, serve it over stdio, or call one of its tools."

    def add_arguments(self, parser: CommandParser) -> None:
        """The three subcommands and their options."""
        commands = parser.add_subparsers(dest="subcommand", required=True, metavar="{inspect,stdio,call}")
        described = commands.add_parser("inspect", help="list what the site's server offers, and who may use it")
        described.add_argument("--json", action="store_true", help="print JSON instead of text")
        served = commands.add_parser("stdio", help="serve the site's server on stdin and stdout for one client")
        served.add_argument("--user", metavar="NAME", help="the username whom every request acts for")
        served.add_argument(
            "--log-level",
            default="info",
            choices=["debug", "info", "warning", "error", "critical"],
            help="lowest level of the log records written to stderr (default: info)",
        )
        called = commands.add_parser("call", help="call one tool and print its result")
        called.add_argument("tool", help="the tool's name")
        called.add_argument("arguments", nargs="?", default="{}", help="its arguments, a JSON object: '{\"n\": 3}'")
        called.add_argument("--user", metavar="NAME", help="the username whom the call acts for")

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the subcommand.

        Raises:
            CommandError: no such user, arguments that are not a JSON object, or a call that
                failed (the message says why).
        """
        server = site.server()
        if options["subcommand"] == "inspect":
            description = inspection.describe(server)
            self.stdout.write(
                json.dumps(description, indent=2) if options["json"] else inspection.render(description), ending=""
            )
        elif options["subcommand"] == "stdio":
            user = _user(options["user"])
            reader, writer = stdio.claim_stdio()
            stdio.log_to_stderr(options["log_level"], server.settings.log_format)
            stdio.run(server, reader, writer, user)
        else:
            result = _call(server, options["tool"], options["arguments"], _user(options["user"]))
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
    """One ``tools/call`` over an in-memory stdio connection: its result.

    Raises:
        CommandError: ``arguments`` is not a JSON object, or the call was answered with an error.
    """
    try:
        parsed = json.loads(arguments)
    except ValueError as exc:
        raise CommandError(f"ARGUMENTS is not JSON ({exc}): give an object such as '{{\"n\": 3}}'") from None
    if not isinstance(parsed, dict):
        raise CommandError(f"ARGUMENTS is a JSON {type(parsed).__name__}: give an object such as '{{\"n\": 3}}'")
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LATEST,
                "capabilities": {},
                "clientInfo": {"name": "manage.py zemcp call", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": parsed}},
    ]
    out = io.BytesIO()
    lines = b"".join(json.dumps(message).encode() + b"\n" for message in messages)
    stdio.StdioTransport(server, io.BufferedReader(io.BytesIO(lines)), out, user).serve()
    answer = next((a for a in map(json.loads, out.getvalue().splitlines()) if a.get("id") == 2), None)
    if answer is None:
        raise CommandError(f"the call of {tool!r} was not answered (the server's log on stderr says why)")
    if "error" in answer:
        raise CommandError(answer["error"]["message"])
    result: dict[str, Any] = answer["result"]
    return result
