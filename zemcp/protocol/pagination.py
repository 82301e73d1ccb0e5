"""Cursor pagination of list results (MCP server/utilities/pagination).

Every ``*/list`` method takes an optional ``params.cursor`` and answers one page plus a
``nextCursor`` when more items follow. The cursor is opaque to clients: URL-safe base64 of a
tagged offset, so that a string that is not such a cursor is refused with -32602 instead of
silently listing from somewhere. Cursors are not secret: one made by hand for another offset,
or taken from another list, just lists from that offset. Pure Python: no HTTP here.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from zemcp.protocol.jsonrpc import INVALID_PARAMS, ProtocolError

#: Items per page of every list result unless the caller passes another size.
PAGE_SIZE = 100

# The tag names the format; a later format gets a new tag and old cursors are refused.
_TAG = "zemcp-offset:"
_OFFSET = re.compile(r"^(0|[1-9][0-9]{0,17})$")


def encode_cursor(offset: int) -> str:
    """The cursor that resumes a listing at item ``offset`` (0-based)."""
    return base64.urlsafe_b64encode(f"{_TAG}{offset}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """The offset a cursor from :func:`encode_cursor` stands for.

    Raises:
        ProtocolError: ``INVALID_PARAMS`` when ``cursor`` is not a cursor this server made.
    """
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except ValueError:  # not base64, or not ASCII once decoded
        text = ""
    offset = text[len(_TAG) :] if text.startswith(_TAG) else ""
    # The decoder skips stray characters, so only the exact string we made is accepted.
    if not _OFFSET.match(offset) or encode_cursor(int(offset)) != cursor:
        raise ProtocolError(
            INVALID_PARAMS,
            f"Invalid params: invalid cursor {cursor[:64]!r}; pass back the nextCursor of the previous "
            f"page unchanged, or leave cursor out to start from the first page",
        )
    return int(offset)


def paginate(items: list[Any], cursor: str | None, page_size: int) -> tuple[list[Any], str | None]:
    """One page of ``items``.

    Args:
        items: the whole list, in a stable order.
        cursor: ``None`` for the first page, else a ``nextCursor`` this module returned.
        page_size: items per page, at least 1.
    Returns:
        the page and the cursor of the next page (``None`` on the last page). A cursor past
        the end (the list shrank between two requests) gives an empty last page.
    Raises:
        ProtocolError: ``INVALID_PARAMS`` for a cursor this server did not hand out.
        ValueError: ``page_size`` is below 1.
    """
    if page_size < 1:
        raise ValueError(f"page_size must be at least 1, got {page_size!r}")
    start = 0 if cursor is None else decode_cursor(cursor)
    end = start + page_size
    return items[start:end], (encode_cursor(end) if end < len(items) else None)


def list_result(params: dict[str, Any], key: str, items: list[Any], page_size: int) -> dict[str, Any]:
    """The result of a ``*/list`` request: ``{key: page, "nextCursor"?: str}``.

    Args:
        params: the request's params (``cursor`` is read; a JSON null counts as absent).
        key: the result's list member (``"tools"``, ``"resources"`` ...).
        items: every item, in a stable order.
        page_size: items per page, at least 1.
    Raises:
        ProtocolError: ``INVALID_PARAMS`` when ``cursor`` is not a string or not a cursor
            this server handed out.
    """
    cursor: Any = params.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise ProtocolError(
            INVALID_PARAMS, "Invalid params: params.cursor must be a string (a nextCursor of an earlier page)"
        )
    page, next_cursor = paginate(items, cursor, page_size)
    result: dict[str, Any] = {key: page}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result
