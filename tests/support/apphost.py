"""A real MCP Apps host in headless Chromium, to prove a server's apps with (MCP Apps 2026-01-26).

The host is a page built on the official packages, bundled for the browser with esbuild:
tests/browser/host.mjs uses ``@modelcontextprotocol/ext-apps``' host side (``AppBridge``,
``PostMessageTransport``) and the TypeScript MCP client 2.x (``@modelcontextprotocol/client``,
its Streamable HTTP transport; the client ext-apps 2.0 is built on). It is served on
``http://localhost:<port>``; the sandbox proxy (tests/browser/sandbox.html) on
``http://127.0.0.1:<another port>``, another origin, as the specification requires of a web
host ("Sandbox proxy"). The page connects to the MCP server named in its query string (which
must admit the page's origin by CORS), lists the tools, calls a tool that has a UI, reads its
``ui://`` resource, has the sandbox proxy load it into an inner iframe (``sandbox="allow-scripts"``,
a CSP from the resource's ``_meta.ui.csp``), delivers the tool's input and result to the View
through the bridge, and relays the View's ``tools/call`` requests to the server for tools whose
visibility includes ``app``, refusing the others.

The View under test is the server's own HTML; :func:`app_html` builds the one the tests serve:
tests/browser/app.mjs with ext-apps' ``App``, bundled inline into tests/browser/app.html. It
shows the tool input (``#tool-input``) and result (``#tool-result``) it receives, and its
button (``#refresh``) calls the app-only tool named in ``body[data-refresh-tool]`` with the
same arguments and shows that result (``#refresh-result``, or ``#refresh-error``).

Fixtures:
    apphost_modules: node_modules with the pinned npm packages (:data:`PINS`), installed once
        into ``<cache folder>/apphost`` (tests/support/nodeinstall.py); skipped, saying why,
        without npm or off x86-64 Linux (esbuild's binary).
    app_host: the bundled assets and the two page servers, for the whole run
        (:class:`AppHost`).

:func:`show_app` drives the host in a :class:`~tests.support.browser.DevTools` page and returns
what the host and the View show (:class:`AppShown`); :func:`click_refresh` presses the View's
button. :func:`fetch_app_meta` records a server's ``tools/list``, ``resources/list`` and
``resources/read`` answers as they are on the wire, for comparing two servers' ``_meta``.
"""

from __future__ import annotations

import json
import platform
import sys
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.browser import DevTools, FileServer
from tests.support.clients import LATEST_VERSION, MODERN_VERSION, HandshakeClient, ModernClient
from tests.support.net import HOST
from tests.support.nodeinstall import cache_folder, npm_install, run_bounded

ASSETS = REPO / "tests" / "browser"
#: The npm packages of the host and the View (name -> the leading part of the version).
PINS = {
    "@modelcontextprotocol/ext-apps": "2.0",
    "@modelcontextprotocol/client": "2",
    "@modelcontextprotocol/core": "2",
    "zod": "4",
    "esbuild": "0.28",
}
#: The MCP Apps extension's identifier and the MIME type of its HTML resources.
EXTENSION_ID = "io.modelcontextprotocol/ui"
APP_MIME_TYPE = "text/html;profile=mcp-app"
#: The client capabilities of a client that renders apps (both eras).
APPS_CAPABILITIES = {"extensions": {EXTENSION_ID: {"mimeTypes": [APP_MIME_TYPE]}}}
#: [seconds] bound of one esbuild run.
BUILD_TIMEOUT = 60
#: [seconds] how long the host may take from loading to the View showing the tool's result,
#: and the View from a click to showing the app-only tool's result.
SHOW_TIMEOUT = 30.0


@pytest.fixture(scope="session")
def apphost_modules() -> Path:
    """node_modules with ext-apps, the TypeScript client 2.x and esbuild (installed once, cached)."""
    if not (sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")):
        pytest.skip(f"the host is bundled with esbuild's x86-64 Linux binary, not {sys.platform} {platform.machine()}")
    return npm_install(cache_folder() / "apphost", PINS)


def bundle(modules: Path, entry: Path, out: Path) -> str:
    """Bundle the ES module ``entry`` and what it imports from ``modules`` into one browser
    script (an IIFE, minified) at ``out``; returns its text."""
    esbuild = modules / "@esbuild" / "linux-x64" / "bin" / "esbuild"
    command = [
        str(esbuild),
        str(entry),
        "--bundle",
        "--format=iife",
        "--platform=browser",
        "--target=es2022",
        "--minify",
        "--log-level=warning",
        f"--outfile={out}",
    ]
    # esbuild resolves bare imports through NODE_PATH as Node does.
    code, stdout, stderr = run_bounded(command, BUILD_TIMEOUT, env={"NODE_PATH": str(modules), "PATH": ""})
    assert code == 0, f"esbuild could not bundle {entry.name} ({code}):\n{stdout}\n{stderr}"
    return out.read_text(encoding="utf-8")


def app_html(script: str, refresh_tool: str) -> str:
    """The View's HTML: tests/browser/app.html with the bundled ``script`` inline and the
    app-only tool ``refresh_tool`` for its button."""
    # The bundle is inlined in a <script> element, which its own text must not end.
    assert "</script" not in script.lower(), "the View's bundle contains </script"
    page = (ASSETS / "app.html").read_text(encoding="utf-8")
    return page.replace("__REFRESH_TOOL__", refresh_tool).replace("__APP_SCRIPT__", script)


@dataclass
class AppHost:
    """The host page and the sandbox proxy, served, and the View's bundle.

    Attributes:
        origin: the host page's origin (``http://localhost:<port>``): the one an MCP server
            must admit by CORS.
        sandbox_origin: the sandbox proxy's (``http://127.0.0.1:<port>``).
        app_script: the View's script, bundled (for :func:`app_html`).
    """

    origin: str
    sandbox_origin: str
    app_script: str

    def app_html(self, refresh_tool: str) -> str:
        """The View's HTML for a server whose app-only tool is ``refresh_tool``."""
        return app_html(self.app_script, refresh_tool)

    def url(self, server: str, tool: str, arguments: dict, era: str = "legacy") -> str:
        """The host page's URL for calling ``tool`` with ``arguments`` on the MCP endpoint
        ``server``; ``era`` is "legacy" (initialize and a session) or a version to pin
        ("2026-07-28")."""
        sandbox = f"{self.sandbox_origin}/sandbox.html?" + urllib.parse.urlencode({"host": self.origin})
        query = {"server": server, "sandbox": sandbox, "tool": tool, "args": json.dumps(arguments), "era": era}
        return f"{self.origin}/host.html?" + urllib.parse.urlencode(query)


@pytest.fixture(scope="session")
def app_host(apphost_modules: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppHost]:
    """The bundled host and View and their two servers, for the whole run (stopped after)."""
    out = tmp_path_factory.mktemp("apphost")
    host_js = bundle(apphost_modules, ASSETS / "host.mjs", out / "host.js").encode("utf-8")
    app_script = bundle(apphost_modules, ASSETS / "app.mjs", out / "app.js")
    html = "text/html; charset=utf-8"
    host = FileServer(
        {
            "/host.html": ((ASSETS / "host.html").read_bytes(), html),
            "/host.js": (host_js, "text/javascript; charset=utf-8"),
        },
        "localhost",
    )
    sandbox = FileServer({"/sandbox.html": ((ASSETS / "sandbox.html").read_bytes(), html)}, HOST)
    try:
        yield AppHost(host.origin, sandbox.origin, app_script)
    finally:
        host.stop()
        sandbox.stop()


@dataclass
class AppShown:
    """What the host and the View showed once the View had the tool's result.

    Attributes:
        host_state: the host's record (tests/browser/host.mjs): ``era``, ``protocolVersion``,
            ``sessionId``, ``tools`` (``name`` and ``_meta`` of each), ``result`` (the
            CallToolResult), ``resource`` (``uri``, ``mimeType``, ``_meta`` of the content read),
            ``appInfo`` (the View's ``App`` name and version), ``relayed`` (the View's calls the
            host sent to the server: ``name``, ``arguments``, ``result``), ``refused`` (names of
            tools the View was refused).
        view: the execution context in the View's frame, for :meth:`DevTools.evaluate`.
        view_origin: ``self.origin`` in the View's frame: ``"null"`` for the opaque origin of
            an iframe sandboxed without ``allow-same-origin``.
        sandbox_url: the URL of the sandbox proxy's frame.
        tool_input: ``#tool-input`` of the View's DOM.
        tool_result: ``#tool-result`` of the View's DOM.
    """

    host_state: dict
    view: int
    view_origin: str
    sandbox_url: str
    tool_input: str
    tool_result: str


def _text(devtools: DevTools, selector: str, context: int) -> str:
    return devtools.evaluate(f"document.querySelector({json.dumps(selector)}).textContent", context)


def host_state(devtools: DevTools) -> dict:
    """The host page's record (#host-state), as JSON."""
    return json.loads(devtools.evaluate("document.getElementById('host-state').textContent") or "{}")


def show_app(devtools: DevTools, host: AppHost, server: str, tool: str, arguments: dict, era: str) -> AppShown:
    """Load the host page for ``tool`` on ``server`` and wait until the View shows its result.

    Args:
        devtools: a page of :func:`~tests.support.browser.devtools_browser`.
        host: the :class:`AppHost`.
        server: the MCP endpoint's URL.
        tool: a tool with a UI; ``arguments`` its arguments.
        era: as for :meth:`AppHost.url`.
    Returns:
        the :class:`AppShown`; the values of ``tool_input`` and ``tool_result`` are read from
        the View's own DOM.
    Raises:
        pytest.fail: the host failed (with its error) or the View showed no result within
            :data:`SHOW_TIMEOUT` seconds.
    """
    devtools.navigate(host.url(server, tool, arguments, era))
    phase = devtools.wait_for(
        # document.body is null until the new page has parsed it.
        "document.body && ['delivered', 'failed'].includes(document.body.dataset.phase) && document.body.dataset.phase",
        SHOW_TIMEOUT,
        what="the host delivering the tool's result to the View",
    )
    state = host_state(devtools)
    assert phase == "delivered", f"the host failed: {state.get('error')}{devtools.diagnosis()}"
    sandbox = devtools.find_frame(
        lambda frame, frames: frame["url"].startswith(host.sandbox_origin + "/sandbox.html"),
        SHOW_TIMEOUT,
        "sandbox proxy",
    )
    view = devtools.find_frame(lambda frame, frames: frame["parentId"] == sandbox["id"], SHOW_TIMEOUT, "View")
    context = devtools.frame_context(view["id"])
    devtools.wait_for(
        "document.getElementById('refresh') && !document.getElementById('refresh').disabled",
        SHOW_TIMEOUT,
        context,
        "the View showing the tool's result",
    )
    return AppShown(
        host_state=state,
        view=context,
        view_origin=devtools.evaluate("String(self.origin)", context),
        sandbox_url=sandbox["url"],
        tool_input=_text(devtools, "#tool-input", context),
        tool_result=_text(devtools, "#tool-result", context),
    )


def click_refresh(devtools: DevTools, shown: AppShown) -> str:
    """Press the View's button (a click in its frame) and return what it then shows
    (``#refresh-result``); fails with ``#refresh-error`` when that shows instead."""
    devtools.evaluate("document.getElementById('refresh').click()", shown.view)
    shown_text = devtools.wait_for(
        "document.getElementById('refresh-result').textContent || "
        "(document.getElementById('refresh-error').textContent && "
        "'error: ' + document.getElementById('refresh-error').textContent)",
        SHOW_TIMEOUT,
        shown.view,
        "the View showing the app-only tool's result",
    )
    assert not shown_text.startswith("error: "), f"the View's call failed: {shown_text}{devtools.diagnosis()}"
    return shown_text


def fetch_app_meta(url: str, era: str = "legacy") -> dict:
    """What a server answers a client that renders apps, as on the wire: for comparing the
    ``_meta`` of two servers' tools and UI resources.

    Args:
        url: the MCP endpoint.
        era: "legacy" (``initialize`` at :data:`~tests.support.clients.LATEST_VERSION`, then a
            session) or "2026-07-28" (``server/discover``; every request with the envelope).
    Returns:
        ``{"capabilities": the server's, "tools": tools/list's tools, "resources":
        resources/list's resources, "reads": {uri: resources/read's result}}`` for every
        ``_meta.ui.resourceUri`` a tool names.
    """
    if era == MODERN_VERSION:
        client = ModernClient(url, capabilities=APPS_CAPABILITIES)
        capabilities = client.initialize()["capabilities"]

        def rpc(method: str, params: dict | None = None) -> dict:
            return client.rpc(method, params)
    else:
        session = HandshakeClient(url, "zemcp-app-meta", "1.0")
        response = session.initialize(protocol_version=LATEST_VERSION, capabilities=APPS_CAPABILITIES)
        assert response.status_code == 200, response.text
        capabilities = session.init_result["capabilities"]
        rpc = session.result

    tools = rpc("tools/list")["tools"]
    resources = rpc("resources/list")["resources"]
    uris = sorted(
        {tool["_meta"]["ui"]["resourceUri"] for tool in tools if "resourceUri" in tool.get("_meta", {}).get("ui", {})}
    )
    reads = {uri: rpc("resources/read", {"uri": uri}) for uri in uris}
    return {"capabilities": capabilities, "tools": tools, "resources": resources, "reads": reads}
