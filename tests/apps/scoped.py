"""A server whose tools, prompt and resource need OAuth scopes (``tests.apps.scoped:app``).

The reference server's ``ze_execute`` needs no scope of its own; ``deploy`` needs
``deploy:write``; ``whoami`` reports ``ctx.auth``, and elicits when told to, so that a
test can check what a handler sees of the principal and that answers cannot cross principals.
"""

import zemcp

server = zemcp.Server("zemcp-scoped-tests", "1.0")


@server.tool(scopes=["deploy:write"])
def deploy(target: str) -> str:
    """Deploy to a target."""
    return f"deployed {target}"


@server.tool
def whoami(ctx: zemcp.Context, ask: bool = False) -> str:
    """Who the access token names; with ask, first ask the user for a word."""
    word = (
        ctx.elicit(
            "A word?", {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}, key="word"
        )["word"]
        if ask
        else ""
    )
    auth = ctx.auth
    who = "nobody" if auth is None else f"{auth.subject} via {auth.client_id} with {' '.join(sorted(auth.scopes))}"
    return f"{who} {word}".strip()


@server.prompt(scopes=["prompts:read"])
def secret_prompt() -> str:
    """A prompt that needs prompts:read."""
    return "the secret prompt"


@server.resource("test://secret", scopes=["files:read"])
def secret_file() -> str:
    """A resource that needs files:read."""
    return "the secret file"


app = zemcp.McpApp(server)
