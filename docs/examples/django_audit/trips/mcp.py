"""The app's tools, on the site's server."""

import zemcp
from zemcp.django import server

DATE = {"type": "object", "properties": {"date": {"type": "string", "title": "Date"}}, "required": ["date"]}


@server.tool
def book(city: str, ctx: zemcp.Context) -> str:
    """Book a trip to a city, asking the user for the date."""
    date = ctx.elicit(f"When do you want to go to {city}?", DATE, key="date")["date"]
    return f"booked {city} on {date}"
