"""zemcp's MCP Apps server with the declarations of tests/apps/sdk_weather.py, for the app host tests.

The same tools, names, texts and card as the SDK's baseline: ``get_weather`` has the weather
card (``ui://weather/card.html``), ``refresh_weather`` is for the app only (visibility ``app``)
and ``weather_summary`` for the model only (visibility ``model``). The card's HTML is the file
named by the ``WEATHER_CARD`` environment variable, read at each read. Served by gunicorn as
``tests.apps.zemcp_weather:create_app()``; pages of the origins in ``ZEMCP_ALLOWED_ORIGINS`` may call it.

:func:`build_server` is the server; tests/integration/test_http_apps_host.py serves it.
"""

from __future__ import annotations

import os

import zemcp
from tests.apps.sdk_weather import CARD_URI, MODEL_TOOL, REFRESH_TOOL, WEATHER_TOOL, refresh_text, weather_text

#: The environment variable naming the card's HTML file.
CARD_VARIABLE = "WEATHER_CARD"


def build_server(card_file: str) -> zemcp.Server:
    """The weather server, its card read from ``card_file`` at each read."""
    server = zemcp.Server("zemcp-weather")

    @server.tool(name=WEATHER_TOOL, description="The weather in a city, with a card.", ui_resource=CARD_URI)
    def get_weather(city: str, ctx: zemcp.Context) -> str:
        return weather_text(city, ctx.client_supports_apps)

    @server.tool(name=REFRESH_TOOL, description="Fetch the weather again.", ui_resource=CARD_URI, visibility=["app"])
    def refresh_weather(city: str) -> str:
        return refresh_text(city)

    @server.tool(
        name=MODEL_TOOL, description="The weather in one sentence.", ui_resource=CARD_URI, visibility=["model"]
    )
    def weather_summary(city: str) -> str:
        return weather_text(city, apps=False)

    server.app_resource(
        CARD_URI,
        file=card_file,
        title="Weather card",
        csp=zemcp.AppCsp(resource_domains=["https://cdn.example.com"]),
        permissions=["clipboardWrite"],
        prefers_border=True,
    )
    return server


def create_app() -> zemcp.McpApp:
    """The WSGI app of the server whose card is the file named by ``WEATHER_CARD`` (gunicorn:
    ``tests.apps.zemcp_weather:create_app()``).

    Raises:
        RuntimeError: ``WEATHER_CARD`` is not set.
    """
    card = os.environ.get(CARD_VARIABLE)
    if not card:
        raise RuntimeError(f"set {CARD_VARIABLE} to the path of the weather card's HTML")
    return zemcp.McpApp(build_server(card))
