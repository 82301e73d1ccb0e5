"""The exceptions around a handler's call: what asking the client can end in
(:class:`ClientRequestError` and its kinds, :class:`CannotWait`, :class:`CallFinished`),
what a tool raises to send the user to URL-mode elicitations first
(:class:`URLElicitationRequired`), and what of a handler's exceptions the server turns into
an error answer (:data:`HANDLER_ERRORS`).

The outcomes of elicitation itself are the ``ElicitError`` hierarchy of
:mod:`zemcp.protocol.elicitation`.
"""

from __future__ import annotations

import secrets
from typing import Any

from zemcp.protocol.elicitation import ElicitAborted, ElicitError

#: What a handler may raise that the server turns into an error answer. SystemExit is in:
#: argparse, click and sys.exit raise it, and it must not end the worker for every session.
HANDLER_ERRORS = (Exception, SystemExit, KeyboardInterrupt)


class CallFinished(ElicitAborted):
    """The request's handler already returned; its context cannot talk to the client any more."""

    def __init__(self) -> None:
        super().__init__("the request already finished: ctx cannot be used after the handler returned")


class ClientRequestError(Exception):
    """A server-to-client request other than elicitation (sampling, roots) did not succeed."""


class CapabilityMissing(ClientRequestError):
    """The client did not declare the capability the request needs; nothing was sent."""

    def __init__(self, capability: str, method: str) -> None:
        super().__init__(
            f"the client did not declare the {capability} capability (at initialize, or in this "
            f"request's clientCapabilities), so {method} cannot be sent"
        )
        self.capability = capability
        #: The ``ClientCapabilities`` the request would have needed (``error.data.requiredCapabilities``).
        self.required: dict[str, Any] = {capability: {}}


class ClientErrorResponse(ClientRequestError):
    """The client answered with a JSON-RPC error (``code``, ``message``)."""

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        self.code = error.get("code")
        self.message = error.get("message", "")
        super().__init__(f"the client refused {method}: error {self.code}: {self.message}")


class ClientTimeout(ClientRequestError):
    """The client did not answer in time; the server sent ``notifications/cancelled``."""

    def __init__(self, method: str, seconds: float) -> None:
        super().__init__(f"no response to {method} within {seconds:g} s")


class CannotWait(ElicitError, ClientRequestError):
    """The WSGI server runs one request at a time per process (``wsgi.multithread`` is false),
    so the client's answer could never arrive while the handler waits; nothing was sent.

    Both an ``ElicitError`` and a ``ClientRequestError``, so a handler's handling of either
    kind of question catches it.
    """

    def __init__(self) -> None:
        super().__init__(
            "this WSGI server serves one request at a time (wsgi.multithread is false), so the client's answer "
            "could never reach this waiting call; serve the app with gunicorn's gthread worker (gunicorn -c "
            "gunicorn.conf.py), or use a 2026-07-28 client, whose questions need no waiting"
        )


class URLElicitationRequired(Exception):
    """Raise from a tool to answer the call with error -32042 (MCP 2025-11-25 URL elicitation).

    The client should complete the listed URL-mode elicitations, then retry the call.

    Args:
        elicitations: a list of ``(message, url)`` pairs or of ready ``{"mode": "url",
            "message", "url", "elicitationId"}`` dicts; ids are generated where missing.
    """

    def __init__(self, elicitations: list[Any]) -> None:
        if not isinstance(elicitations, list) or not elicitations:
            raise TypeError("URLElicitationRequired needs a non-empty list of (message, url) pairs or URL-mode dicts")
        self.elicitations = [_url_elicitation(item) for item in elicitations]
        super().__init__("this request needs the user to complete a URL-mode elicitation first")


def _url_elicitation(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        if item.get("mode") != "url" or not all(
            isinstance(item.get(k), str) for k in ("message", "url", "elicitationId")
        ):
            raise TypeError(
                f"a URL-mode elicitation dict needs mode 'url' and string message, url and elicitationId, got {item!r}"
            )
        return item
    if isinstance(item, tuple) and len(item) == 2 and all(isinstance(part, str) for part in item):
        return {"mode": "url", "message": item[0], "url": item[1], "elicitationId": new_elicitation_id()}
    raise TypeError(f"expected a (message, url) pair of strings or a URL-mode dict, got {item!r}")


def new_elicitation_id() -> str:
    """A fresh ``elicitationId`` for URL mode (128 random bits)."""
    return secrets.token_urlsafe(16)
