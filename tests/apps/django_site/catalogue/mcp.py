"""Found by ``zemcp.django``'s discovery, as the admin finds ``admin.py``: the app's tools."""

import asyncio

from zemcp.django import server


@server.tool
def catalogue_search(query: str) -> list[str]:
    """Search the catalogue: the titles that contain the query."""
    return [title for title in ("Dune", "Emma", "Ulysses") if query.lower() in title.lower()]


@server.tool
async def catalogue_size() -> int:
    """How many titles the catalogue holds, from an async def tool that awaits."""
    await asyncio.sleep(0.05)
    return 3
