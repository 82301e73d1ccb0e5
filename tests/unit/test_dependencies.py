"""Serving needs only the runtime dependencies: the client's requests is an extra."""

import configparser
import subprocess
import sys

from tests.support import REPO


def test_serving_imports_no_client_library():
    """The server, the transports, authorization and the gunicorn configuration never import requests."""
    code = (
        "import sys, wsgi, zemcp.cli.serve, zemcp.cli.stdio, zemcp.auth, zemcp.http.worker, zemcp.http.gunicorn_conf; "
        "sys.exit('requests' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=60).returncode == 0


def test_requests_is_an_extra_not_a_requirement():
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    assert "requests" not in setup["options"]["install_requires"]
    assert "requests" in setup["options.extras_require"]["client"]


def test_zemcp_test_without_the_client_extra_says_how_to_install_it():
    """The hint names the install from a checkout (zemcp is installed from its repository)."""
    code = "import sys; sys.modules['requests'] = None; import zemcp.testclient.mcptest"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "pip install '.[client]' in the zemcp checkout" in done.stderr, done.stderr


#: What a worker of the reference server never imports until a deployment uses it: PyJWT and
#: cryptography (authorization, sealed requestState), asyncio (async handlers), Click (Click
#: tools and the command line), requests (the test client), the handler pool of other WSGI
#: servers.
NOT_IMPORTED_BY_PLAIN_CALLS = (
    "jwt",
    "cryptography",
    "asyncio",
    "click",
    "requests",
    "concurrent.futures",
    "urllib.request",
)

_PLAIN_CALLS = """
import json, socket, sys
import zemcp.http.gunicorn_conf, wsgi
from werkzeug.test import Client
# What gunicorn's gthread worker puts in the environ: the handler runs on the request's thread.
mine, theirs = socket.socketpair()
gthread = {"wsgi.multithread": True, "gunicorn.socket": mine}
client = Client(wsgi.app)
accept = {"Accept": "application/json, text/event-stream"}
init = client.post("/mcp", headers=accept, environ_overrides=gthread, json={"jsonrpc": "2.0", "id": 0, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
call = {"name": "ze_execute", "arguments": {"command": "help"}}
handshake = client.post("/mcp", headers={**accept, "Mcp-Session-Id": init.headers["Mcp-Session-Id"]},
    environ_overrides=gthread, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
modern = client.post("/mcp", headers={**accept, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
    "Mcp-Name": "ze_execute"}, environ_overrides=gthread, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {**call, "_meta": meta}})
for response in (handshake, modern):
    assert response.status_code == 200 and response.json["result"]["isError"] is False, response.data
print(json.dumps(sorted(set(sys.modules))))
"""


def _modules_after_plain_calls(**env: str) -> set[str]:
    import json
    import os

    done = subprocess.run(
        [sys.executable, "-c", _PLAIN_CALLS],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "ZEMCP_OTEL": "off", **env},
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_plain_calls_import_only_what_they_use():
    """A worker of the reference server that serves plain calls in both eras (and its gunicorn
    configuration) imports none of the libraries only some deployments use."""
    modules = _modules_after_plain_calls()
    assert [name for name in NOT_IMPORTED_BY_PLAIN_CALLS if name in modules] == []


def test_zemcp_speed_off_keeps_the_standard_library():
    """ZEMCP_SPEED=off: neither orjson nor jsonschema-rs is imported, installed or not."""
    modules = _modules_after_plain_calls(ZEMCP_SPEED="off")
    assert "orjson" not in modules
    assert "jsonschema_rs" not in modules


def test_the_speed_extra_names_its_libraries():
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    speed = setup["options.extras_require"]["speed"]
    assert "orjson" in speed and "jsonschema-rs" in speed
    requires = setup["options"]["install_requires"]
    assert "orjson" not in requires and "jsonschema-rs" not in requires and "format-nongpl" not in requires
