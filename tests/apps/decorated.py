"""A server whose definitions carry icons and ``_meta``, and whose handlers return results with
``_meta``: the in-process tests of both eras (tests/inprocess/test_icons_meta.py) and the
official Inspector CLI under gunicorn (tests/integration/test_http_inspector.py).

Its implementation info has a title, a description, a website URL and an icon. Tools:
``weather(city)`` (icons and ``_meta``), ``plain()`` (neither), ``with_result_meta(city)`` (a
result with ``_meta``), ``with_reserved_result_meta()`` (a result whose ``_meta`` key is
reserved: an ``isError`` result). The resource ``test://forecast`` and the template
``test://city/{name}``, and the prompt ``summary(topic)``, carry icons and ``_meta`` too.
"""

from __future__ import annotations

import zemcp
from zemcp import Settings

PNG_ICON = zemcp.Icon("https://example.com/tool.png", mime_type="image/png", sizes=("48x48",), theme="light")
DATA_ICON = {"src": "data:image/svg+xml;base64,PHN2Zy8+", "mimeType": "image/svg+xml", "sizes": ["any"]}
SERVER_ICON = {"src": "https://example.com/server.png", "theme": "dark"}
TOOL_META = {"com.example/category": "search", "com.example/ranking": 3}


def build_server() -> zemcp.Server:
    server = zemcp.Server(
        "decorated",
        "2.0",
        title="Decorated server",
        description="A server whose definitions carry icons and _meta.",
        website_url="https://example.com/decorated",
        icons=[SERVER_ICON],
        settings=Settings(threads=4),
    )

    @server.tool(title="Weather", icons=[PNG_ICON], meta=TOOL_META)
    def weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    @server.tool
    def plain() -> str:
        return "plain"

    @server.tool
    def with_result_meta(city: str) -> dict:
        """A whole CallToolResult with its own _meta."""
        return {"content": [{"type": "text", "text": city}], "_meta": {"com.example/trace": "t-1"}}

    @server.tool
    def with_reserved_result_meta() -> dict:
        return {"content": [{"type": "text", "text": "x"}], "_meta": {"io.modelcontextprotocol/serverInfo": {}}}

    @server.resource("test://forecast", icons=[DATA_ICON], meta={"com.example/owner": "met"})
    def forecast():
        return {"text": "rain", "_meta": {"com.example/source": "radar"}}

    @server.resource("test://city/{name}", icons=[PNG_ICON], meta={"com.example/kind": "city"})
    def city(name):
        return name

    @server.prompt(icons=[DATA_ICON], meta={"com.example/tone": "brief"})
    def summary(topic: str):
        """Summarise a topic."""
        return {"messages": [f"Summarise {topic}"], "_meta": {"com.example/version": 3}}

    return server


app = zemcp.McpApp(build_server())
