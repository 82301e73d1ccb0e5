"""The Django site's own routes: one ordinary view."""

from django.http import HttpRequest, HttpResponse
from django.urls import path


def index(request: HttpRequest) -> HttpResponse:
    """The site's own page."""
    return HttpResponse("the django site", content_type="text/plain")


urlpatterns = [path("", index)]
