"""The Django site's middleware: one marks every response Django itself served; one stands for
the site's authentication (as ``RemoteUserMiddleware`` would, without a database)."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

#: Response header added to every response Django serves.
SITE_HEADER = "X-Served-By"


def mark(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """Mark the response as Django's: the mounted MCP app's responses never pass through here."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        response[SITE_HEADER] = "django"
        return response

    return middleware


class SiteUser:
    """A user the site authenticated: a name and the permissions ``has_perm`` answers for."""

    is_authenticated = True

    def __init__(self, username: str, permissions: set[str]):
        self.username = username
        self.permissions = permissions

    def has_perm(self, permission: str) -> bool:
        """Whether the user holds ``permission`` (``"app.codename"``)."""
        return permission in self.permissions


def header_user(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """Authenticate the user the ``X-Site-User`` header names, with the permissions of
    ``X-Site-Permissions`` (comma-separated): the site's own authentication, for the tests."""

    def middleware(request: HttpRequest) -> HttpResponse:
        name = request.META.get("HTTP_X_SITE_USER")
        if name:
            permissions = {p for p in request.META.get("HTTP_X_SITE_PERMISSIONS", "").split(",") if p}
            request.user = SiteUser(name, permissions)
        return get_response(request)

    return middleware
