"""The Django site's own routes: one ordinary view, and the reference server as a view of the site.

``/`` is the site's page; ``/site/mcp`` is the MCP endpoint as ``zemcp.django.view`` serves it,
through the site's middleware (the README's Django pattern mounts another server at ``/mcp``
beside the site instead: tests/apps/django_site/wsgi.py).
"""

from django.http import HttpRequest, HttpResponse
from django.urls import path

import zemcp.django
from wsgi import create_app


def index(request: HttpRequest) -> HttpResponse:
    """The site's own page."""
    return HttpResponse("the django site", content_type="text/plain")


urlpatterns = [path("", index), path("site/mcp", zemcp.django.view(create_app().server))]
