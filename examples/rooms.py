"""Hotel rooms: the example of docs/elicitation.md, "Asking for missing arguments".

``zemcp run examples/rooms.py`` serves it; ``book`` asks for the arguments a call left out.
"""

from typing import Annotated, Literal

import zemcp

server = zemcp.Server("rooms", "1.0.0")


@server.tool(title="Book a room", elicit_missing=True)
def book(
    city: str,
    nights: Annotated[int, {"title": "Nights", "minimum": 1, "maximum": 14}],
    size: Annotated[Literal["s", "l"], {"enumNames": ["Small", "Large"]}],
    breakfast: bool = False,
) -> str:
    """Book a hotel room."""
    return f"{nights} night(s) in {city}, size {size}"


app = zemcp.McpApp(server)
