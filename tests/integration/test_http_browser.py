"""A real browser talking MCP to zemcp across origins, through a CORS preflight.

Headless Chromium (Debian's ``chromium`` package) loads a page from ``http://localhost:<port>``
(a small server in a thread of the test) whose script, with ``fetch``, sends ``initialize``,
``notifications/initialized`` and a ``tools/call`` to zemcp on ``http://127.0.0.1:<port>/mcp``:
another host and port, so another origin. ``Content-Type: application/json`` and the MCP
headers are not CORS-safelisted, so the browser must preflight with ``OPTIONS /mcp`` and may
read ``Mcp-Session-Id`` only if the server exposes it. The script writes what it saw into
``<pre id="out">`` as JSON; ``--dump-dom`` prints the DOM once the page is done.

``--virtual-time-budget`` makes the dump wait: virtual time does not advance while network
fetches are pending, so the budget runs out only after the script's last fetch settled.

The refusal of an origin the server does not allow is checked over plain ``requests``: a
browser on loopback cannot easily be made to send a non-loopback ``Origin``.
"""

from __future__ import annotations

import html
import json
import re
import time

import requests

from tests.support.browser import PAGE_PATH, run_chromium
from tests.support.clients import ACCEPT, CLIENT_VERSION
from tests.support.gunicorn import GunicornServer
from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT

#: [seconds] how long an access-log line may lag behind the response it records.
LOG_DEADLINE = 5.0
TIMEOUT = (CONNECT_TIMEOUT, READ_TIMEOUT)

#: Every header a browser client of zemcp may send that needs a preflight.
PREFLIGHT_HEADERS = (
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "authorization",
    "last-event-id",
    "mcp-method",
    "mcp-name",
    "mcp-param-region",
)

#: The page; :func:`browser_page` turns ``__MCP_URL__``, ``__VERSION__`` and ``__ACCEPT__`` into
#: JavaScript string literals. Every step's HTTP status is recorded so that a failure shows
#: how far the script got.
PAGE = """<!doctype html>
<html>
<head><meta charset="utf-8"><title>zemcp browser client</title></head>
<body>
<pre id="out">pending</pre>
<script>
const MCP_URL = __MCP_URL__;
const VERSION = __VERSION__;
const ACCEPT = __ACCEPT__;
const outcome = {steps: []};

async function post(message, extraHeaders) {
  const response = await fetch(MCP_URL, {
    method: "POST",
    headers: Object.assign({"Content-Type": "application/json", "Accept": ACCEPT,
                            "MCP-Protocol-Version": VERSION}, extraHeaders),
    body: JSON.stringify(message),
  });
  const text = await response.text();
  outcome.steps.push({method: message.method, status: response.status,
                      contentType: response.headers.get("Content-Type"), body: text});
  return {response, text};
}

async function run() {
  const init = await post({jsonrpc: "2.0", id: 1, method: "initialize",
                           params: {protocolVersion: VERSION, capabilities: {},
                                    clientInfo: {name: "browser", version: "1"}}}, {});
  // null unless the server lists the header in Access-Control-Expose-Headers.
  outcome.sessionId = init.response.headers.get("Mcp-Session-Id");
  if (!outcome.sessionId) throw new Error("initialize answered without a readable Mcp-Session-Id");
  const session = {"Mcp-Session-Id": outcome.sessionId};
  await post({jsonrpc: "2.0", method: "notifications/initialized"}, session);
  const call = await post({jsonrpc: "2.0", id: 2, method: "tools/call",
                           params: {name: "ze_execute", arguments: {command: "help"}}}, session);
  outcome.call = JSON.parse(call.text);
}

run().catch((error) => { outcome.error = String(error); })
     .finally(() => { document.getElementById("out").textContent = JSON.stringify(outcome); });
</script>
</body>
</html>
"""

#: One request line of gunicorn's default access log format: ``"POST /mcp HTTP/1.1" 200``.
ACCESS_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[0-9.]+" (?P<status>\d{3}) ')


def browser_page(mcp_url: str) -> str:
    """The page's HTML for the MCP endpoint ``mcp_url``."""
    return (
        PAGE.replace("__MCP_URL__", json.dumps(mcp_url))
        .replace("__VERSION__", json.dumps(CLIENT_VERSION))
        .replace("__ACCEPT__", json.dumps(ACCEPT))
    )


def page_outcome(dom: str, errors: str) -> dict:
    """The JSON the page's script wrote into ``<pre id="out">``."""
    match = re.search(r'<pre id="out">(.*?)</pre>', dom, re.S)
    assert match is not None, f'no <pre id="out"> in the dumped DOM:\n{dom}\n{errors}'
    text = html.unescape(match.group(1))
    assert text != "pending", f"the page's script did not finish before the dump:\n{errors}"
    return json.loads(text)


def mcp_requests(server: GunicornServer, posts: int) -> list[tuple[str, int]]:
    """(method, status) of each ``/mcp`` request in ``server``'s access log, in log order,
    once at least ``posts`` POSTs are there (each line is written after its response)."""
    end = time.monotonic() + LOG_DEADLINE
    while True:
        lines = [m for m in ACCESS_LINE.finditer(server.log()) if m["path"] == "/mcp"]
        seen = [(m["method"], int(m["status"])) for m in lines]
        if sum(method == "POST" for method, _ in seen) >= posts or time.monotonic() > end:
            return seen
        time.sleep(0.05)


def console_lines(errors: str) -> str:
    """The page's console messages in chromium's stderr (where a CORS refusal is explained)."""
    return "\n".join(line for line in errors.splitlines() if "CONSOLE" in line or "CORS" in line)


def test_browser_speaks_mcp_across_origins(start_server, page_server, chromium, tmp_path):
    """A page on http://localhost:<port> initializes, reads Mcp-Session-Id, notifies and calls a tool."""
    server = start_server()
    page = page_server(browser_page(server.url))
    dom, errors = run_chromium(chromium, page.origin + PAGE_PATH, tmp_path)
    outcome = page_outcome(dom, errors)
    seen = mcp_requests(server, posts=3)
    report = f"page: {json.dumps(outcome, indent=1)}\n/mcp requests: {seen}\nconsole:\n{console_lines(errors)}"

    assert "error" not in outcome, report
    assert [(s["method"], s["status"]) for s in outcome["steps"]] == [
        ("initialize", 200),
        ("notifications/initialized", 202),
        ("tools/call", 200),
    ], report
    assert outcome["sessionId"], report
    result = outcome["call"]["result"]
    assert result["isError"] is False, report
    assert "server status" in result["content"][0]["text"], report

    # The browser preflighted before its first POST, and the server answered it with 2xx.
    assert seen and seen[0][0] == "OPTIONS", report
    assert 200 <= seen[0][1] < 300, report
    assert [status for method, status in seen if method == "POST"] == [200, 202, 200], report
    assert all(200 <= status < 300 for method, status in seen if method == "OPTIONS"), report


def test_preflight_allows_loopback_and_refuses_other_origins(start_server):
    """OPTIONS /mcp: 403 without CORS headers for a foreign origin; 204 with every MCP header
    allowed for a loopback one, whose POSTs then carry the CORS response headers."""
    server = start_server()

    refused = requests.options(
        server.url, timeout=TIMEOUT, headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    )
    assert refused.status_code == 403, (refused.status_code, refused.headers, refused.text)
    assert "Access-Control-Allow-Origin" not in refused.headers, refused.headers

    origin = "http://localhost:5173"
    preflight = requests.options(
        server.url,
        timeout=TIMEOUT,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": ", ".join(PREFLIGHT_HEADERS),
        },
    )
    assert preflight.status_code == 204, (preflight.status_code, preflight.headers, preflight.text)
    assert preflight.headers.get("Access-Control-Allow-Origin") == origin, preflight.headers
    methods = {m.strip().upper() for m in preflight.headers.get("Access-Control-Allow-Methods", "").split(",")}
    assert {"POST", "GET", "DELETE"} <= methods, preflight.headers
    allowed = {h.strip().lower() for h in preflight.headers.get("Access-Control-Allow-Headers", "").split(",")}
    # "*" covers any header but Authorization (Fetch standard), which must be named.
    missing = [h for h in PREFLIGHT_HEADERS if h not in allowed and ("*" not in allowed or h == "authorization")]
    assert not missing, (missing, preflight.headers)

    response = server.client().initialize(headers={"Origin": origin}, initialized=False)
    assert response.status_code == 200, (response.status_code, response.text)
    assert response.headers.get("Access-Control-Allow-Origin") == origin, response.headers
    exposed = {h.strip().lower() for h in response.headers.get("Access-Control-Expose-Headers", "").split(",")}
    assert {"mcp-session-id", "www-authenticate"} <= exposed, response.headers
