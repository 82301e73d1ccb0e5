"""Cursor pagination of list results (zemcp.protocol.pagination)."""

import base64

import pytest

from zemcp.protocol.jsonrpc import INVALID_PARAMS, ProtocolError
from zemcp.protocol.pagination import decode_cursor, encode_cursor, list_result, paginate


def walk(items, page_size):
    """Every page of ``items``, following nextCursor from the first page."""
    pages, cursor = [], None
    while True:
        page, cursor = paginate(items, cursor, page_size)
        pages.append(page)
        if cursor is None:
            return pages


@pytest.mark.parametrize(
    "n, page_size, pages", [(0, 3, 1), (1, 3, 1), (3, 3, 1), (4, 3, 2), (7, 3, 3), (7, 1, 7), (7, 100, 1)]
)
def test_walking_the_cursors_yields_every_item_once_in_order(n, page_size, pages):
    """Following nextCursor visits each item exactly once; a full last page has no empty page after it."""
    items = list(range(n))
    walked = walk(items, page_size)
    assert len(walked) == pages
    assert [x for page in walked for x in page] == items
    assert all(len(page) == page_size for page in walked[:-1])


def test_cursor_round_trip_and_opacity():
    """A cursor decodes to its offset and is URL-safe text that does not show the offset plainly."""
    for offset in (0, 1, 99, 12345):
        cursor = encode_cursor(offset)
        assert decode_cursor(cursor) == offset
        assert cursor.isascii() and not set(cursor) & set("+/= ")
        assert cursor != str(offset)


def _raw(text):
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "abc",
        "10",
        "é",
        _raw("some-other-server:5"),
        _raw("zemcp-offset:-1"),
        _raw("zemcp-offset:01"),
        _raw("zemcp-offset:"),
        _raw("zemcp-offset:1.5"),
        encode_cursor(5) + "=",
        encode_cursor(5) + "!",
        encode_cursor(5).swapcase(),
    ],
)
def test_foreign_or_tampered_cursors_are_invalid_params(cursor):
    """Only a cursor exactly as handed out is accepted; anything else is -32602 saying what to do."""
    with pytest.raises(ProtocolError) as info:
        paginate([1, 2, 3], cursor, 2)
    assert info.value.code == INVALID_PARAMS
    assert "invalid cursor" in info.value.message and "nextCursor" in info.value.message


def test_cursor_past_the_end_gives_an_empty_last_page():
    """A list that shrank between two pages ends the walk instead of failing."""
    assert paginate([1, 2], encode_cursor(10), 5) == ([], None)


def test_page_size_below_one_is_refused():
    with pytest.raises(ValueError, match="page_size"):
        paginate([1], None, 0)


def test_list_result_shape():
    """The page sits under the given key; nextCursor only when more items follow."""
    first = list_result({}, "tools", [1, 2, 3], 2)
    assert first == {"tools": [1, 2], "nextCursor": encode_cursor(2)}
    assert list_result({"cursor": first["nextCursor"]}, "tools", [1, 2, 3], 2) == {"tools": [3]}
    assert list_result({"cursor": None}, "prompts", [1], 2) == {"prompts": [1]}


@pytest.mark.parametrize("cursor", [5, ["x"], {"o": 1}, True])
def test_list_result_refuses_a_cursor_that_is_not_a_string(cursor):
    with pytest.raises(ProtocolError) as info:
        list_result({"cursor": cursor}, "tools", [1], 1)
    assert info.value.code == INVALID_PARAMS and "params.cursor must be a string" in info.value.message
