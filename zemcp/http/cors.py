"""CORS for browser-based MCP clients (the Fetch standard's CORS protocol).

A browser calls the endpoint from another origin only after a preflight ``OPTIONS`` that
names the method and the non-simple request headers it will send, and it lets the page read
a response only when the response names the page's origin. zemcp answers both for the
origins it allows (loopback origins and ``allowed_origins``, the same rule as the transport's
``Origin`` check); other origins keep getting 403 and no CORS headers.

Bearer tokens travel in ``Authorization``, not in cookies, so credentials mode is not
needed and ``Access-Control-Allow-Credentials`` is never sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wsgiref.types import StartResponse

    from _typeshed import OptExcInfo

#: Methods a page may use on the endpoint (GET and DELETE get their own answers there).
ALLOW_METHODS = "POST, GET, DELETE, OPTIONS"
#: Request headers a page may send: MCP's own, the 2026-07-28 standard headers, and
#: ``Authorization`` for the bearer token. ``Mcp-Param-*`` headers are allowed by prefix.
ALLOW_HEADERS = frozenset(
    {
        "accept",
        "authorization",
        "content-type",
        "last-event-id",
        "mcp-method",
        "mcp-name",
        "mcp-protocol-version",
        "mcp-session-id",
    }
)
PARAM_HEADER_PREFIX = "mcp-param-"
#: Response headers a page may read beyond the CORS-safelisted ones.
EXPOSE_HEADERS = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate, Retry-After"
#: [seconds] how long a browser may reuse a preflight answer.
MAX_AGE = 600


def preflight_headers(origin: str, requested_headers: str | None) -> list[tuple[str, str]]:
    """The headers of a 204 answer to a preflight from an allowed ``origin``.

    Args:
        origin: the request's ``Origin``, already allowed.
        requested_headers: its ``Access-Control-Request-Headers`` (comma-separated), if any.
    Returns:
        ``Access-Control-Allow-*`` headers naming the origin, the methods and those requested
        headers that are allowed (a header left out makes the browser refuse the request).
    """
    allowed = []
    for name in (requested_headers or "").split(","):
        name = name.strip().lower()
        if name in ALLOW_HEADERS or (name.startswith(PARAM_HEADER_PREFIX) and len(name) > len(PARAM_HEADER_PREFIX)):
            allowed.append(name)
    headers = [
        ("Access-Control-Allow-Origin", origin),
        ("Access-Control-Allow-Methods", ALLOW_METHODS),
        ("Access-Control-Max-Age", str(MAX_AGE)),
        ("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"),
    ]
    if allowed:
        headers.append(("Access-Control-Allow-Headers", ", ".join(dict.fromkeys(allowed))))
    return headers


def with_response_headers(start_response: StartResponse, origin: str) -> StartResponse:
    """``start_response`` that adds, to any response for an allowed ``origin``, the headers
    that let the page read it (``Access-Control-Allow-Origin``, ``-Expose-Headers``, ``Vary``).

    Works for responses started late (streams), since it wraps the WSGI callable itself.
    """
    extra = [
        ("Access-Control-Allow-Origin", origin),
        ("Access-Control-Expose-Headers", EXPOSE_HEADERS),
        ("Vary", "Origin"),
    ]

    def start(
        status: str, headers: list[tuple[str, str]], exc_info: OptExcInfo | None = None
    ) -> Callable[[bytes], object]:
        if not any(name.lower() == "access-control-allow-origin" for name, _ in headers):
            headers = [*headers, *extra]
        return start_response(status, headers, exc_info) if exc_info is not None else start_response(status, headers)

    return start
