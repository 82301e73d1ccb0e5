"""A real MCP Apps host in headless Chromium against a server's app (MCP Apps 2026-01-26).

The host page of tests/support/apphost.py (ext-apps' AppBridge and the TypeScript MCP client,
bundled) connects to the server over HTTP from another origin, calls ``get_weather`` (a tool
with a UI), loads its ``ui://`` card through the sandbox proxy into a sandboxed iframe and
delivers the tool's input and result; the card shows them in its own DOM, and its button calls
the app-only ``refresh_weather`` through the host. The server is a parameter (``apps_server``):
the official Python SDK's ``Apps`` helper, the baseline, and zemcp with the same declarations
(tests/apps/zemcp_weather.py under gunicorn); the same tests pass for both, in both eras, and
:func:`test_the_same_declaration_gives_the_same_meta_on_both_servers` compares their answers.
A screenshot of the host with the card shown is written to the test's tmp dir, and, when
``ZEMCP_TEST_APPS_SCREENSHOT`` is set, zemcp's handshake-era one to docs/images/apps-host.png.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.apps.sdk_weather import CARD_URI, MODEL_TOOL, REFRESH_TOOL, WEATHER_TOOL, refresh_text, weather_text
from tests.support import REPO
from tests.support.apphost import (
    APP_MIME_TYPE,
    EXTENSION_ID,
    SHOW_TIMEOUT,
    click_refresh,
    fetch_app_meta,
    host_state,
    show_app,
)
from tests.support.browser import devtools_browser

CITY = "Paris"
#: The environment variable that asks for the documentation's screenshot, and where it goes.
SCREENSHOT_VARIABLE = "ZEMCP_TEST_APPS_SCREENSHOT"
DOCS_SCREENSHOT = REPO / "docs" / "images" / "apps-host.png"
SERVERS = {"sdk": "sdk_apps_url", "zemcp": "zemcp_apps_url"}


@pytest.fixture(params=list(SERVERS))
def apps_server(request: pytest.FixtureRequest) -> str:
    """The MCP endpoint of a server with the weather app: ``sdk``, the official Python SDK's,
    or ``zemcp``, zemcp's with the same declarations."""
    return request.getfixturevalue(SERVERS[request.param])


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
def test_host_shows_the_app_and_relays_its_app_only_call(apps_server, app_host, chromium, era, tmp_path, request):
    with devtools_browser(chromium, tmp_path, width=800, height=520) as page:
        shown = show_app(page, app_host, apps_server, WEATHER_TOOL, {"city": CITY}, era)
        state = shown.host_state
        expected_version = "2026-07-28" if era == "2026-07-28" else "2025-11-25"
        assert (state["era"], state["protocolVersion"]) == (
            "modern" if era == "2026-07-28" else "legacy",
            expected_version,
        ), state
        # The View's own DOM shows what the host delivered; the server answered the short text
        # because the host declared that it renders apps.
        assert shown.tool_input == '{"city":"Paris"}'
        assert shown.tool_result == weather_text(CITY, apps=True)
        assert state["resource"]["uri"] == CARD_URI and state["resource"]["mimeType"] == APP_MIME_TYPE
        assert shown.sandbox_url.startswith(app_host.sandbox_origin) and app_host.sandbox_origin != app_host.origin
        # The View runs in an opaque origin: its iframe is sandboxed without allow-same-origin.
        assert shown.view_origin == "null", shown.view_origin
        assert state["appInfo"]["name"] == "zemcp-test-app"

        assert click_refresh(page, shown) == refresh_text(CITY)
        relayed = host_state(page)["relayed"]
        assert [(call["name"], call["arguments"]) for call in relayed] == [(REFRESH_TOOL, {"city": CITY})]
        assert relayed[0]["result"]["content"][0]["text"] == refresh_text(CITY)
        screenshot = tmp_path / f"apps-host-{era}.png"
        page.screenshot(screenshot)
    assert screenshot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    if os.environ.get(SCREENSHOT_VARIABLE) and "zemcp" in apps_server_name(request) and era == "legacy":
        DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(screenshot, DOCS_SCREENSHOT)


def apps_server_name(request: pytest.FixtureRequest) -> str:
    """Which server ``apps_server`` is for the test of ``request`` (a key of :data:`SERVERS`)."""
    return request.node.callspec.params["apps_server"]


def test_host_refuses_the_view_a_tool_not_meant_for_apps(apps_server, app_host, chromium, tmp_path):
    """The View's call of a tool whose visibility lacks ``app`` never reaches the server: the
    host refuses it (the spec's "tools/call behavior"), and the View shows the refusal."""
    with devtools_browser(chromium, tmp_path) as page:
        shown = show_app(page, app_host, apps_server, WEATHER_TOOL, {"city": CITY}, "legacy")
        page.evaluate(f"document.body.dataset.refreshTool = {MODEL_TOOL!r}", shown.view)
        page.evaluate("document.getElementById('refresh').click()", shown.view)
        error = page.wait_for(
            "document.getElementById('refresh-error').textContent", SHOW_TIMEOUT, shown.view, "the View's refusal"
        )
        assert f"tool {MODEL_TOOL} is not callable by the app" in error
        assert host_state(page)["refused"] == [MODEL_TOOL]
        assert host_state(page)["relayed"] == []


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
def test_app_meta_on_the_wire(apps_server, era, request):
    """What each server answers a client that renders apps: the SDK's shapes, which zemcp matches.

    The extension is advertised in ``server/discover``; the SDK's ``initialize`` result
    (2025-11-25) carries no ``extensions`` at all, zemcp's advertises it in both eras.
    """
    meta = fetch_app_meta(apps_server, era)
    if era == "2026-07-28" or "zemcp" in apps_server_name(request):
        assert meta["capabilities"]["extensions"][EXTENSION_ID] == {}
    tools = {tool["name"]: tool for tool in meta["tools"]}
    assert tools[WEATHER_TOOL]["_meta"] == {"ui": {"resourceUri": CARD_URI}}
    assert tools[REFRESH_TOOL]["_meta"] == {"ui": {"resourceUri": CARD_URI, "visibility": ["app"]}}
    assert tools[MODEL_TOOL]["_meta"] == {"ui": {"resourceUri": CARD_URI, "visibility": ["model"]}}
    (listed,) = [resource for resource in meta["resources"] if resource["uri"] == CARD_URI]
    ui = {
        "csp": {"resourceDomains": ["https://cdn.example.com"]},
        "permissions": {"clipboardWrite": {}},
        "prefersBorder": True,
    }
    assert listed["mimeType"] == APP_MIME_TYPE and listed["_meta"] == {"ui": ui}
    (content,) = meta["reads"][CARD_URI]["contents"]
    assert content["mimeType"] == APP_MIME_TYPE and content["_meta"] == {"ui": ui}
    assert content["text"].lstrip().lower().startswith("<!doctype html>")


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
def test_the_same_declaration_gives_the_same_meta_on_both_servers(sdk_apps_url, zemcp_apps_url, era):
    """The SDK's ``Apps`` helper and zemcp, given the same declarations, answer the same
    ``_meta`` in ``tools/list``, ``resources/list`` and ``resources/read``, and the same
    resource entry and content item otherwise (name aside: each names it its own way)."""
    sdk, ours = fetch_app_meta(sdk_apps_url, era), fetch_app_meta(zemcp_apps_url, era)

    def tool_meta(meta: dict) -> dict:
        return {tool["name"]: tool.get("_meta") for tool in meta["tools"]}

    def card(meta: dict) -> dict:
        (listed,) = [resource for resource in meta["resources"] if resource["uri"] == CARD_URI]
        return {key: listed.get(key) for key in ("uri", "mimeType", "title", "_meta")}

    assert tool_meta(ours) == tool_meta(sdk)
    assert card(ours) == card(sdk)
    ((ours_read,), (sdk_read,)) = ours["reads"][CARD_URI]["contents"], sdk["reads"][CARD_URI]["contents"]
    assert {k: v for k, v in ours_read.items() if k != "text"} == {k: v for k, v in sdk_read.items() if k != "text"}
    assert ours_read["text"] == sdk_read["text"]
