"""The app's tools, on the site's server."""

import zemcp
from trips.models import Trip
from zemcp.django import server

DATE = {"type": "object", "properties": {"date": {"type": "string", "title": "Date"}}, "required": ["date"]}


@server.tool(permission="trips.add_trip")
def book(city: str, ctx: zemcp.Context) -> str:
    """Book a trip to a city, asking the user for the date: for users who may add trips."""
    date = ctx.elicit(f"When do you want to go to {city}?", DATE, key="date")["date"]
    # Asked first, then written: no transaction waits for the user (ctx.user is the site's user).
    trip = Trip.objects.create(traveller=ctx.user, city=city, date=date)
    return f"trip {trip.pk}: {ctx.user.get_username()} goes to {city} on {date}"
