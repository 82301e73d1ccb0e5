"""The Django site's middleware, which marks every response Django itself served."""

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
