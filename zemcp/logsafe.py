"""Client-supplied values in log lines: shortened and quoted, never the client's secrets.

Anything a client sends (names, URIs, header values, session-id prefixes) reaches the log only
through :func:`clip`, so a huge value cannot flood the log and a crafted one cannot forge log
lines. What a user answers (elicited content) and what a client writes in an error message
are never logged at all: outcomes are logged by their kind (:func:`outcome`). A service the
settings name by URL is shown without the URL's credentials (:func:`without_credentials`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

#: Characters of a client-supplied value a log line shows at most.
CLIP = 80


def clip(value: Any, limit: int = CLIP) -> str:
    """``repr(value)``, cut to ``limit`` characters with the original length noted when longer."""
    return shorten(repr(value), limit)


def shorten(text: str, limit: int = CLIP) -> str:
    """``text`` cut to ``limit`` characters with the original length noted when longer: for a
    value a JSON log line carries as a string of its own, which JSON escaping keeps in its field."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def outcome(exc: BaseException) -> str:
    """How a log line names an outcome of asking the client: its kind, not its message, which may
    hold the user's answer (a malformed one) or the client's own error text."""
    return type(exc).__name__


def without_credentials(url: str) -> str:
    """``url`` as ``scheme://host[:port]/path``, safe to log and to show: its user name and
    password are left out, and so are its query and fragment, which can carry them too
    (``redis://host/0?password=...``).

    Args:
        url: a URL of the settings, such as ``ZEMCP_REDIS_URL``
            (``redis://[user:password@]host:port/db``, ``unix:///path.sock``).
    Returns:
        the URL without credentials; a port that is no number is left out as well.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # not a port number: the URL fails where it is used, not here
        port = ""
    path = parts.path if parts.scheme != "unix" else parts.path or "/"
    return f"{parts.scheme}://{host}{port}{path}"
