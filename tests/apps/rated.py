"""A server for the rate-limit tests (``tests.apps.rated:app``).

``hello`` and ``search`` answer at once (``search`` is limited by the tests through
``ZEMCP_RATE_LIMIT_TOOLS``); ``report`` has a limit of its own, ``rate_limit="2/minute"``;
``ask`` asks the user for a word (key ``word``) and echoes it.
"""

from typing import Any

import zemcp

WORD = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}


def make_server(**settings: Any) -> zemcp.Server:
    """The server, with ``settings`` (``ZEMCP_*`` from the environment when none are given)."""
    server = zemcp.Server("zemcp-rate-tests", "1.0", settings=zemcp.Settings(**settings) if settings else None)

    @server.tool
    def hello() -> str:
        """Say hello."""
        return "hello"

    @server.tool
    def search() -> str:
        """Pretend to search."""
        return "found"

    @server.tool(rate_limit="2/minute")
    def report() -> str:
        """Pretend to build a costly report."""
        return "reported"

    @server.tool
    def ask(ctx: zemcp.Context) -> str:
        """Ask the user for a word and echo it."""
        return "word: " + ctx.elicit("A word?", WORD, key="word")["word"]

    return server


app = zemcp.McpApp(make_server())
