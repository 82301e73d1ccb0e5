"""An MCP Apps server of the official Python SDK (``mcp.server.apps.Apps``), for the app host tests.

The baseline zemcp's MCP Apps support is compared with: ``get_weather`` has a UI (the weather
card, ``ui://weather/card.html``, whose HTML the test builds and passes as a file),
``refresh_weather`` is for the app only (visibility ``app``) and ``weather_summary`` for the
model only (visibility ``model``). Served over Streamable HTTP by
uvicorn, as the SDK serves, with Starlette's CORS middleware so that a page on another loopback
origin may call it (the SDK's own DNS-rebinding check already admits loopback origins):

    python -m tests.apps.sdk_weather --port PORT --html CARD.html --allow-origin http://localhost:PORT2

tests/support/sdkapps.py starts it (``sdk_apps_url``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import uvicorn
from mcp.server.apps import Apps, ResourceCsp, ResourcePermissions, client_supports_apps
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

#: The card's URI, and the names of the tool that shows it, of the app-only and of the
#: model-only tool.
CARD_URI = "ui://weather/card.html"
WEATHER_TOOL = "get_weather"
REFRESH_TOOL = "refresh_weather"
MODEL_TOOL = "weather_summary"


def weather_text(city: str, apps: bool) -> str:
    """What ``get_weather`` answers for ``city``: short when the client renders the card (the
    card shows it), a whole sentence for a text-only client."""
    return f"Sunny, 21 °C in {city}" if apps else f"The weather in {city} is sunny, 21 °C."


def refresh_text(city: str) -> str:
    """What the app-only ``refresh_weather`` answers for ``city``."""
    return f"Refreshed: cloudy, 18 °C in {city}"


def make_server(card_html: str) -> MCPServer:
    """The SDK server with the card (``card_html``) bound to ``get_weather``."""
    apps = Apps()

    @apps.tool(resource_uri=CARD_URI, name=WEATHER_TOOL, description="The weather in a city, with a card.")
    def get_weather(city: str, ctx: Context) -> str:
        return weather_text(city, client_supports_apps(ctx))

    @apps.tool(resource_uri=CARD_URI, visibility=["app"], name=REFRESH_TOOL, description="Fetch the weather again.")
    def refresh_weather(city: str) -> str:
        return refresh_text(city)

    @apps.tool(resource_uri=CARD_URI, visibility=["model"], name=MODEL_TOOL, description="The weather in one sentence.")
    def weather_summary(city: str) -> str:
        return weather_text(city, apps=False)

    apps.add_html_resource(
        CARD_URI,
        card_html,
        title="Weather card",
        csp=ResourceCsp(resource_domains=["https://cdn.example.com"]),
        permissions=ResourcePermissions(clipboard_write={}),
        prefers_border=True,
    )
    return MCPServer("sdk-weather", extensions=[apps])


def make_app(card_html: str, origins: list[str]) -> ASGIApp:
    """The server's Streamable HTTP app at ``/mcp``, open to the page ``origins`` by CORS."""
    app = make_server(card_html).streamable_http_app()
    return CORSMiddleware(
        app,
        allow_origins=origins,
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=["*"],
        expose_headers=["Mcp-Session-Id", "Mcp-Protocol-Version"],
    )


def main() -> None:
    """Serve on 127.0.0.1 until stopped (SIGTERM); arguments as in the module's docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--html", type=Path, required=True, help="the card's HTML file")
    parser.add_argument("--allow-origin", action="append", default=[], help="a page origin CORS admits")
    args = parser.parse_args()
    app = make_app(args.html.read_text(encoding="utf-8"), args.allow_origin)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
