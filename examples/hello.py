"""A small zemcp server to serve with ``zemcp run examples/hello.py`` (docs/cli.md).

``greet`` asks for the name it was not given, when the client can be asked.
"""

import zemcp

server = zemcp.Server("hello", "1.0")


@server.tool(title="Greet someone")
def greet(ctx: zemcp.Context, name: str = "") -> str:
    """Say hello; asks for the name when it is left out."""
    if not name and ctx.client_supports_elicit():
        name = ctx.elicit(
            "Whom should I greet?",
            {"type": "object", "properties": {"name": {"type": "string", "title": "Name"}}, "required": ["name"]},
            key="name",
        )["name"]
    return f"Hello, {name or 'world'}!"
