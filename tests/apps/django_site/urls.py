"""The Django site's own routes: two ordinary views, and the site's MCP server as views of the site.

``/`` is the site's public page, ``/account`` one that ``LoginRequiredMiddleware`` sends
anonymous visitors away from (to the login page); ``/site/mcp`` is the MCP endpoint as
``zemcp.django.view(login_required=False)`` serves the site's server, through the site's
middleware, for users the site's middleware established and anonymous clients;
``/site/mcp-login`` is ``view()`` as it stands under ``LoginRequiredMiddleware`` (users only);
``/site/mcp-token`` serves it to MCP clients with a bearer token the site issued, read by a
Django REST framework authentication class and by a plain callable (middleware.py). (The
README's Django pattern mounts another server at ``/mcp`` beside the site instead:
tests/apps/django_site/wsgi.py.)
"""

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.urls import path

import zemcp.django
from tests.apps.django_site.middleware import HeaderToken, bearer_user


@login_not_required
def index(request: HttpRequest) -> HttpResponse:
    """The site's own public page."""
    return HttpResponse("the django site", content_type="text/plain")


def account(request: HttpRequest) -> HttpResponse:
    """A page for logged-in users only (``LoginRequiredMiddleware`` redirects the others)."""
    return HttpResponse(f"the account of {request.user}", content_type="text/plain")


urlpatterns = [
    path("", index),
    path("account", account),
    # Anonymous MCP clients too, on purpose: LoginRequiredMiddleware would have them refused.
    path("site/mcp", zemcp.django.view(login_required=False)),
    path("site/mcp-login", zemcp.django.view()),
    path("site/mcp-token", zemcp.django.view(authentication=[HeaderToken, bearer_user])),
]
