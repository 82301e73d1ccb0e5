"""The request of a WSGI environ: werkzeug's ``Request``, its URL parts worked out when first read.

werkzeug's ``Request`` decodes the server address, the root path, the path and the query
string of every request as it is made. A POST to the MCP endpoint reads none of them (the
transport judges the raw ``PATH_INFO`` once per distinct value), so :class:`WsgiRequest`
leaves them until something reads one, and then takes all of them from a werkzeug
``Request`` of the same environ: every value is werkzeug's own.
"""

from __future__ import annotations

from typing import Any

from werkzeug.datastructures import EnvironHeaders
from werkzeug.wrappers import Request

#: The attributes werkzeug's ``Request`` sets as it is made that :class:`WsgiRequest` makes late.
URL_PARTS = ("scheme", "server", "root_path", "path", "query_string")


class WsgiRequest(Request):
    """werkzeug's ``Request`` of ``environ`` (PEP 3333), made without decoding its URL parts.

    ``method``, ``headers``, ``remote_addr`` and ``environ`` are set at once, as werkzeug sets
    them; the parts of :data:`URL_PARTS` are werkzeug's, computed at the first read of any of
    them. Everything else (``accept_mimetypes``, ``stream``, ``mimetype`` ...) is werkzeug's
    unchanged.

    Args:
        environ: the WSGI environ; ``environ["werkzeug.request"]`` is set to the request, as
            werkzeug does.
        routed: a framework routed the request to the MCP endpoint (a Django view): its path
            is not checked again, and its host was checked by the framework (``ALLOWED_HOSTS``).
        user: the user the framework's authentication established, or None.
        site_request: the framework's own request object, or None.
        metadata: the framework routed it to the Protected Resource Metadata (RFC 9728), not
            to the endpoint.
        unauthorized: ``(WWW-Authenticate challenges, message)``: the framework's
            authentication needs a user and found none.
    """

    def __init__(
        self,
        environ: dict[str, Any],
        *,
        routed: bool = False,
        user: Any = None,
        site_request: Any = None,
        metadata: bool = False,
        unauthorized: tuple[str, str] | None = None,
    ) -> None:
        # werkzeug's __init__ is replaced on purpose.
        self.environ = environ
        self.routed = routed
        self.user = user
        self.site_request = site_request
        self.metadata = metadata
        self.unauthorized = unauthorized
        self.shallow = False
        self.method = environ.get("REQUEST_METHOD", "GET").upper()
        self.headers = EnvironHeaders(environ)
        self.remote_addr = environ.get("REMOTE_ADDR")
        environ["werkzeug.request"] = self

    def __getattr__(self, name: str) -> Any:
        # Only attributes missing from the instance get here: the URL parts before their first read.
        if name in URL_PARTS:
            full = Request(self.environ, populate_request=False)
            for part in URL_PARTS:
                setattr(self, part, getattr(full, part))
            return getattr(full, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def endpoint_path(environ: dict[str, Any]) -> str:
    """The request's path below the application's root, as werkzeug reads it, without a
    trailing ``/`` (``""`` for the root)."""
    path: str = Request(environ, populate_request=False).path
    return path.rstrip("/")
