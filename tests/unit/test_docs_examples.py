"""The runnable examples of the docs are files of the repository (examples/, docs/examples/), word for word.

Each file is served by a test that runs it (tests/integration/test_serve_command.py for
hello.py and rooms.py, tests/integration/test_http_clicktools.py for click_tools.py,
tests/integration/test_http_task_clients.py for the task clients,
tests/integration/test_http_flask_extension.py for flask_notes.py,
tests/inprocess/test_django_example.py for the Django site of docs/examples/django_site: its
tool, its URLconf and its audit app), so
what the docs show is what the tests run.
"""

import ast
import re

import pytest

from tests.support import REPO

EXAMPLES = [
    ("docs/cli.md", "examples/hello.py"),
    ("docs/cli.md", "examples/click_tools.py"),
    ("docs/elicitation.md", "examples/rooms.py"),
    ("docs/authoring.md", "examples/rooms.py"),
    ("docs/tasks.md", "examples/task_client_2026.py"),
    ("docs/tasks.md", "examples/task_client_2025.py"),
    ("docs/flask.md", "examples/flask_notes.py"),
    ("docs/django.md", "docs/examples/django_site/trips/mcp.py"),
    ("docs/django.md", "docs/examples/django_site/mysite/urls.py"),
    ("docs/django.md", "docs/examples/django_site/mcp_audit/models.py"),
    ("docs/django.md", "docs/examples/django_site/mcp_audit/mcp.py"),
    ("docs/django.md", "docs/examples/django_site/mcp_audit/admin.py"),
]


def _blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def _without_docstring(source: str) -> str:
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return "".join(source.splitlines(keepends=True)[body[0].end_lineno :]).lstrip("\n")
    return source


@pytest.mark.parametrize("doc, example", EXAMPLES)
def test_the_docs_show_the_example_file(doc, example):
    source = (REPO / example).read_text()
    wanted = {source, _without_docstring(source)}
    shown = []
    for block in _blocks((REPO / doc).read_text()):
        # A block may name its file in a first comment line (which the file may have too).
        shown += [block, block.split("\n", 1)[1]] if block.startswith(f"# {example}\n") else [block]
    assert wanted & set(shown), f"{doc} shows no block equal to {example}"
