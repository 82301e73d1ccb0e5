"""The in-process helper of docs/authoring.md ("Trying a server in-process") works as the page says.

The page's examples use it; a reader copies it. Driven here as the page drives it: a session
whose tool elicits, and a 2026-07-28 call of the same tool; zemcp logs no warning for either.
"""

import logging
import types

import zemcp
from tests.support import REPO

QUESTION = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _helper() -> types.ModuleType:
    text = (REPO / "docs/authoring.md").read_text()
    start = text.index("```python\n# mcp_inprocess.py") + len("```python\n")
    module = types.ModuleType("mcp_inprocess")
    exec(compile(text[start : text.index("```", start)], "docs/authoring.md", "exec"), module.__dict__)
    return module


def test_the_helper_elicits_in_a_session_and_in_2026_07_28_without_warnings(caplog):
    helper = _helper()
    server = zemcp.Server("docs-helper")

    @server.tool
    def greet(ctx: zemcp.Context) -> str:
        """Ask for a name and greet it."""
        return "hello " + ctx.elicit("Your name?", QUESTION)["name"]

    app = zemcp.McpApp(server)
    with caplog.at_level(logging.WARNING, logger="zemcp"):
        stateless = helper.StatelessClient(app, {"elicitation": {}})
        first = stateless.call("greet")[-1]["result"]
        assert first["resultType"] == "input_required", first
        session = helper.InProcessSession(app, {"elicitation": {}})
        messages = session.call("greet")
        question = next(messages)
        assert question["method"] == "elicitation/create", question
        assert session.respond(question["id"], {"action": "accept", "content": {"name": "Ada"}}).status_code == 202
        assert list(messages)[-1]["result"]["content"][0]["text"] == "hello Ada"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
