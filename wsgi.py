"""The reference zemcp server: the ``ze_execute`` tool over the built-in commands.

gunicorn loads ``wsgi:app`` (see gunicorn.conf.py). A tools/call travels ``McpApp``
(zemcp/http/transport.py, which picks the era) -> ``ModernEra`` (zemcp/eras/modern/era.py, 2026-07-28) or
``HandshakeEra`` (zemcp/eras/handshake/era.py, sessions) -> ``Server.prepare`` and ``Server.execute``
(zemcp/core/server.py) -> ``Tool.run`` (zemcp/core/tools.py) -> ``execute`` (zemcp/cli/commands.py). Its
elicitation goes through ``ctx.elicit`` (zemcp/core/context.py) to the request's exchange: in a
session a ``Call`` (zemcp/eras/handshake/call.py) pushes it on the request's stream and waits in
the table of waiting calls (zemcp/state/correlation.py); in 2026-07-28 a ``Round``
(zemcp/eras/modern/mrtr.py) ends the round with an ``InputRequiredResult`` and the handler is
replayed on the retry. docs/architecture.md follows such a call through every layer.
"""

import zemcp
from zemcp.cli.commands import CommandRegistry, add_builtin_commands, add_execute_tool


def create_app(settings: zemcp.Settings | None = None) -> zemcp.McpApp:
    """Build the reference server's WSGI app; settings from ``ZEMCP_*`` when omitted."""
    server = zemcp.Server("zemcp-reference", zemcp.__version__, settings=settings)
    commands = CommandRegistry()
    add_builtin_commands(commands)
    add_execute_tool(server, commands)
    return zemcp.McpApp(server)


app = create_app()
