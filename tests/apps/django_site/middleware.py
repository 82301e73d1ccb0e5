"""The Django site's middleware and authentication: one middleware marks every response Django
itself served; one stands for the site's authentication (as ``RemoteUserMiddleware`` would,
without a database); ``bearer_user`` and ``HeaderToken`` read tokens the site issued, as a plain
callable and as a Django REST framework authentication class."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

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


#: The bearer tokens the site issued, and whom each names (a site's token table, for the tests).
TOKENS = {
    "alice-token": ("alice", {"site.view_payroll"}),
    "bob-token": ("bob", set()),
}


def bearer_user(request: HttpRequest) -> SiteUser | None:
    """The user of the request's ``Authorization: Bearer`` token, or None: the site's own
    reading of its tokens, as a plain callable."""
    scheme, _, token = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer" or token not in TOKENS:
        return None
    name, permissions = TOKENS[token]
    return SiteUser(name, permissions)


class HeaderToken(BaseAuthentication):
    """A Django REST framework authentication class: ``X-Site-Token: <token>`` names a user of
    TOKENS; a token it does not know is refused (``AuthenticationFailed``)."""

    def authenticate(self, request: Request) -> tuple[SiteUser, str] | None:
        token = request.META.get("HTTP_X_SITE_TOKEN")
        if token is None:
            return None
        if token not in TOKENS:
            raise AuthenticationFailed("unknown site token")
        name, permissions = TOKENS[token]
        return SiteUser(name, permissions), token

    def authenticate_header(self, request: Request) -> str:
        return "SiteToken"
