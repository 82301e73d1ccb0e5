"""The site's own pages: who is signed in, and a page that holds its request's transaction open."""

import time

from django.http import HttpRequest, HttpResponse

from tests.apps.django_project.notes.models import Note

#: [seconds] the longest a ``/held`` request may hold its transaction.
MOST_HELD = 30.0


def index(request: HttpRequest) -> HttpResponse:
    """The signed-in user's name (``LoginRequiredMiddleware`` sends anyone else to the login page)."""
    return HttpResponse(f"signed in as {request.user.get_username()}", content_type="text/plain")


def held(request: HttpRequest) -> HttpResponse:
    """A plain view, which ``ATOMIC_REQUESTS`` runs in a transaction: it queries, then holds the
    transaction open for ``?seconds=`` (at most :data:`MOST_HELD`), as a view waiting on
    something would. PostgreSQL shows its connection ``idle in transaction`` meanwhile."""
    count = Note.objects.count()
    time.sleep(min(float(request.GET.get("seconds", "2")), MOST_HELD))
    return HttpResponse(f"{count} notes", content_type="text/plain")
