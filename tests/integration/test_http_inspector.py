"""The official MCP Inspector's CLI lists the icons and ``_meta`` of a gunicorn-served server, in both eras.

The Inspector 2.x is installed with npm by the ``inspector_modules`` fixture (tests/support/node.py)
into the tests' Node cache; without npm the tests are skipped, saying so. The server is
tests/apps/decorated.py.
"""

from __future__ import annotations

import json

import pytest

from tests.apps.decorated import DATA_ICON, PNG_ICON, TOOL_META
from tests.support import REPO
from tests.support.nodeinstall import node_binary, run_bounded

#: [seconds] bound on one run of the Inspector CLI.
INSPECTOR_RUN_TIMEOUT = 60


def inspect(modules, url: str, era: str, method: str) -> dict:
    """The result of ``method`` as the Inspector CLI, in protocol era ``era``, prints it
    (``{"result": ...}`` in its JSON format)."""
    launcher = modules / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
    command = [str(node_binary(modules)), str(launcher), "--cli", url, "--transport", "http"]
    command += ["--protocol-era", era, "--method", method, "--format", "json", "--quiet"]
    code, out, err = run_bounded(command, INSPECTOR_RUN_TIMEOUT, cwd=REPO)
    assert code == 0, f"the Inspector CLI failed ({code}):\n{out}\n{err}"
    return json.loads(out)["result"]


@pytest.fixture
def decorated(start_server):
    return start_server("tests.apps.decorated:app")


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_inspector_cli_lists_icons_and_meta(inspector_modules, decorated, era):
    tools = {tool["name"]: tool for tool in inspect(inspector_modules, decorated.url, era, "tools/list")["tools"]}
    assert tools["weather"]["icons"] == [PNG_ICON.definition()], tools["weather"]
    assert tools["weather"]["_meta"] == TOOL_META, tools["weather"]
    assert "icons" not in tools["plain"], tools["plain"]
    resources = inspect(inspector_modules, decorated.url, era, "resources/list")["resources"]
    assert [(r["uri"], r["icons"], r["_meta"]) for r in resources] == [
        ("test://forecast", [DATA_ICON], {"com.example/owner": "met"})
    ]
    templates = inspect(inspector_modules, decorated.url, era, "resources/templates/list")["resourceTemplates"]
    assert [(t["uriTemplate"], t["icons"], t["_meta"]) for t in templates] == [
        ("test://city/{name}", [PNG_ICON.definition()], {"com.example/kind": "city"})
    ]
    prompts = inspect(inspector_modules, decorated.url, era, "prompts/list")["prompts"]
    assert [(p["name"], p["icons"], p["_meta"]) for p in prompts] == [
        ("summary", [DATA_ICON], {"com.example/tone": "brief"})
    ]
    # Each era as asked: sessions in the handshake era only.
    assert ("session" in decorated.log() and "initialized: client 'inspector-cli'" in decorated.log()) == (
        era == "legacy"
    ), decorated.log()
