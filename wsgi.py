"""The reference zemcp server: the ``ze_execute`` tool over the built-in commands.

gunicorn loads ``wsgi:app`` (see gunicorn.conf.py). A tools/call travels
``McpApp`` (zemcp/transport.py) -> ``Server.handle`` (zemcp/server.py) -> ``Tool.run``
(zemcp/tools.py) -> ``execute`` (zemcp/commands.py), and an elicitation goes out through
``ctx.elicit`` (zemcp/elicitation.py) on the request's ``ReplySink`` (zemcp/sinks.py).
"""

import zemcp
from zemcp.commands import CommandRegistry, add_builtin_commands, add_execute_tool


def create_app(settings: zemcp.Settings | None = None) -> zemcp.McpApp:
    """Build the reference server's WSGI app; settings from ``ZEMCP_*`` when omitted."""
    server = zemcp.Server("zemcp-reference", zemcp.__version__, settings=settings)
    commands = CommandRegistry()
    add_builtin_commands(commands)
    add_execute_tool(server, commands)
    return zemcp.McpApp(server)


app = create_app()
