"""The Django site's own routes: one ordinary view, and the reference server as a view of the site.

``/`` is the site's page; ``/site/mcp`` is the MCP endpoint as ``zemcp.django.view`` serves it,
through the site's middleware (the README's Django pattern mounts another server at ``/mcp``
beside the site instead: tests/apps/django_site/wsgi.py). Beside the reference server's
``ze_execute``, ``whoami`` tells the handler's ``ctx.user`` and ``ctx.request``, and ``payroll``
is for users with the ``site.view_payroll`` permission.
"""

from django.http import HttpRequest, HttpResponse
from django.urls import path

import zemcp
import zemcp.django
from wsgi import create_app


def index(request: HttpRequest) -> HttpResponse:
    """The site's own page."""
    return HttpResponse("the django site", content_type="text/plain")


server = create_app().server


@server.tool
def whoami(ctx: zemcp.Context) -> str:
    """The site's user and the path of the site's request, as the handler sees them."""
    user = ctx.user.username if ctx.user is not None else "anonymous"
    return f"{user} at {ctx.request.path if ctx.request is not None else 'no request'}"


@server.tool(permission="site.view_payroll")
def payroll() -> str:
    """For users with the site.view_payroll permission."""
    return "the payroll"


urlpatterns = [path("", index), path("site/mcp", zemcp.django.view(server))]
