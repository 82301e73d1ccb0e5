"""Found by ``zemcp.django``'s discovery, as the admin finds ``admin.py``: the app's tools, and
its MCP App: ``catalogue_card`` shows the titles in :data:`CARD`, the app's template
``catalogue/card.html`` rendered with ``render_to_string`` at each read."""

import asyncio

from django.template.loader import render_to_string

from zemcp.django import server

#: The ``ui://`` URI of the catalogue's card.
CARD = "ui://catalogue/card.html"
TITLES = ("Dune", "Emma", "Ulysses")


@server.tool
def catalogue_search(query: str) -> list[str]:
    """Search the catalogue: the titles that contain the query."""
    return [title for title in TITLES if query.lower() in title.lower()]


@server.tool
async def catalogue_size() -> int:
    """How many titles the catalogue holds, from an async def tool that awaits."""
    await asyncio.sleep(0.05)
    return 3


@server.tool(ui_resource=CARD)
def catalogue_card() -> str:
    """The catalogue's titles, as a card where the client renders MCP Apps."""
    return ", ".join(TITLES)


server.app_resource(CARD, render=lambda: render_to_string("catalogue/card.html", {"titles": TITLES}))
