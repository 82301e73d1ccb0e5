"""A server with something to look up in every method that names a thing, for the in-process
tests that send params of the wrong type (tests/inprocess/test_param_types.py) and strings that
are not text (tests/inprocess/test_invalid_unicode.py).

The task test server (tests/apps/tasks_app.py: ``echo(text)`` and the task tools), plus:

- the prompt ``greet(who)``, whose completion of ``who`` offers the value typed so far;
- the resource ``file:///a.txt`` and the template ``file:///t/{name}``;
- ``regional(region)``, whose argument is mirrored into ``Mcp-Param-Region``;
- ``ask_twice()``, which asks two names in two rounds (keys ``first`` and ``second``) and
  returns both.
"""

from __future__ import annotations

from typing import Annotated, Any

import zemcp
from tests.apps.tasks_app import make_server

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def make_app(**settings: Any) -> zemcp.McpApp:
    """The app, with ``settings`` (those of ``zemcp.Settings``, a backend's ``redis_url`` for one)
    over 8 threads, 0.05 s keep-alives and a 5 s elicitation timeout."""
    server = make_server(**{"threads": 8, "keepalive_interval": 0.05, "elicitation_timeout": 5, **settings})

    @server.prompt
    def greet(who: str) -> str:
        """Greet."""
        return f"hi {who}"

    @server.resource("file:///a.txt")
    def a() -> str:
        return "a"

    @server.resource("file:///t/{name}")
    def t(name: str) -> str:
        return name

    @server.completion(prompt="greet")
    def who(argument: str, value: str, context: dict) -> list[str]:
        return [value]

    @server.tool
    def regional(region: Annotated[str, zemcp.McpHeader("Region")]) -> str:
        """Echo the region mirrored into Mcp-Param-Region."""
        return region

    @server.tool
    def ask_twice(ctx: zemcp.Context) -> str:
        """Ask two names in two rounds; return both."""
        first = ctx.elicit("First?", NAME, key="first")["name"]
        return first + ctx.elicit("Second?", NAME, key="second")["name"]

    return zemcp.McpApp(server)
