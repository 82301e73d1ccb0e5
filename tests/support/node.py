"""Fixtures of the tests that run official TypeScript MCP clients on Node 22.

Fixtures (each installs once per run, into the cache folder of tests/support/nodeinstall.py,
and skips, saying why, without npm):
    ts_sdk1_modules: node_modules with Node 22, ``@modelcontextprotocol/sdk`` 1.x and undici,
        for :func:`tests.support.tsclient1.run_legacy_calls` and ``run_late_answer``.
    node_modules: node_modules with Node 22 and the TypeScript MCP client 2.x
        (:data:`TS_CLIENT` at major :data:`TS_CLIENT_MAJOR`), for tests/node/modern_client.cjs.
    inspector_modules: node_modules with Node 22 and the official MCP Inspector
        (:data:`INSPECTOR` at major :data:`INSPECTOR_MAJOR`), whose CLI lists what a server offers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.nodeinstall import NODE_PACKAGE, NODE_VERSION, cache_folder, npm_install
from tests.support.tsclient1 import install_sdk1

#: The npm package of the official TypeScript MCP client of the 2026-07-28 era.
TS_CLIENT = "@modelcontextprotocol/client"
#: Its major version that ``node_modules`` holds.
TS_CLIENT_MAJOR = "2"
#: The npm package of the official MCP Inspector (web UI, CLI and TUI).
INSPECTOR = "@modelcontextprotocol/inspector"
#: Its major version that ``inspector_modules`` holds.
INSPECTOR_MAJOR = "2"


@pytest.fixture(scope="session")
def ts_sdk1_modules() -> Path:
    """node_modules with Node 22, ``@modelcontextprotocol/sdk`` 1.x and undici (installed once, cached)."""
    return install_sdk1()


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """A node_modules folder with Node 22 and the TypeScript MCP client 2.x, installed once and cached."""
    return npm_install(cache_folder(), {NODE_PACKAGE: NODE_VERSION, TS_CLIENT: TS_CLIENT_MAJOR})


@pytest.fixture(scope="session")
def inspector_modules() -> Path:
    """A node_modules folder with Node 22 and the MCP Inspector 2.x, installed once and cached
    (in a folder of its own: it brings many packages the clients' tests do not need)."""
    return npm_install(cache_folder() / "inspector", {NODE_PACKAGE: NODE_VERSION, INSPECTOR: INSPECTOR_MAJOR})
