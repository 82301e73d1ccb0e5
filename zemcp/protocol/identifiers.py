"""The strings of a client's message that name something: which they are, and what they may hold.

JSON can spell a string that is not Unicode text: a ``\\ud800`` escape without its partner
(a lone surrogate), which Python keeps as it is and UTF-8 cannot encode. Such text may be
echoed back (``jsontext`` escapes it again), but it cannot become the bytes of an HTTP header
value, a Redis key or any other UTF-8. The strings a server looks things up by, keeps state
under and mirrors into headers (SEP-2243 ``Mcp-Name``) are therefore checked where a message
is read (:func:`zemcp.protocol.jsonrpc.parse`): the names, URIs and task ids of :data:`FIELDS`
and the id of a client's response. Besides lone surrogates they may hold no control
character (U+0000 to U+001F, U+007F to U+009F) and no noncharacter (U+FDD0 to U+FDEF and the
last two code points of every plane): no tool name (SEP-986), URI (RFC 3986, RFC 3987) or id
a server issues holds one, so refusing them turns away no real request, and a lookup keyed
by such a string has nothing to find. Every other string (a client's name, a request's id,
tool arguments, elicited answers) is carried as it is.

Spec: RFC 8259 section 8.2 (strings that are not Unicode text), Unicode 15.1 section 23.7
(noncharacters), MCP 2026-07-28 basic/transports/streamable-http (SEP-2243, Standard headers).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

#: The ``params`` fields that name something, by method, each a path into ``params``; ``"*"``
#: ends the path of a list of names. ``Mcp-Name`` mirrors some of them (headers.NAME_FIELDS).
FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "tools/call": (("name",),),
    "prompts/get": (("name",),),
    "resources/read": (("uri",),),
    "resources/subscribe": (("uri",),),
    "resources/unsubscribe": (("uri",),),
    "completion/complete": (("ref", "name"), ("ref", "uri")),
    "subscriptions/listen": (
        ("notifications", "resourceSubscriptions", "*"),
        ("notifications", "taskIds", "*"),
    ),
    # The tasks of 2025-11-25 and of the io.modelcontextprotocol/tasks extension (SEP-2663).
    "tasks/get": (("taskId",),),
    "tasks/result": (("taskId",),),
    "tasks/cancel": (("taskId",),),
    "tasks/update": (("taskId",),),
}

_NONCHARACTERS = "\ufdd0-\ufdef" + "".join(
    re.escape(chr(plane << 16 | low)) for plane in range(17) for low in (0xFFFE, 0xFFFF)
)
_REFUSED = re.compile(f"[\x00-\x1f\x7f-\x9f\ud800-\udfff{_NONCHARACTERS}]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(text: str) -> int | None:
    """The index of the first code point of ``text`` that UTF-8 cannot encode (U+D800 to
    U+DFFF: after JSON decoding, always a lone surrogate), or None when it is Unicode text."""
    if text.isascii():
        return None
    match = _SURROGATE.search(text)
    return None if match is None else match.start()


def refused_character(text: str) -> tuple[int, str] | None:
    """The first character a name, URI or id may not hold, with its index, or None.

    Args:
        text: the string as JSON decoded it (a pair of surrogate escapes is one character).
    Returns:
        ``(index, kind)``, the kind ``"a lone surrogate"``, ``"a control character"`` or ``"a
        noncharacter"``; None when ``text`` holds none.
    """
    if text.isascii() and text.isprintable():
        return None
    match = _REFUSED.search(text)
    if match is None:
        return None
    code = ord(match.group())
    if 0xD800 <= code <= 0xDFFF:
        kind = "a lone surrogate"
    elif code <= 0x1F or 0x7F <= code <= 0x9F:
        kind = "a control character"
    else:
        kind = "a noncharacter"
    return match.start(), kind


def problem(label: str, text: str) -> str | None:
    """What is wrong with ``text`` as a name, URI or id, in a sentence that names ``label``
    and says what to send instead; None when nothing is.

    Args:
        label: where the string was, e.g. ``"params.name"`` or ``'"id"'``.
        text: the string.
    """
    found = refused_character(text)
    if found is None:
        return None
    index, kind = found
    fix = (
        "escape a character beyond U+FFFF as a pair of surrogates (\\ud83d\\ude00), never half of one"
        if kind == "a lone surrogate"
        else "leave it out"
    )
    return (
        f"{label} holds {kind} ({text[index]!r} at index {index}), which no name, URI or id may hold (they "
        f"serve as header values and keys of the server's state: Unicode text without control characters "
        f"or noncharacters); {fix}"
    )


def params_problem(method: str, params: dict[str, Any]) -> str | None:
    """The first problem (:func:`problem`) of the naming fields of a request's ``params``.

    Args:
        method: the JSON-RPC method; only those of :data:`FIELDS` have naming fields.
        params: the request's params (an object).
    Returns:
        the sentence, naming the field as ``params.<path>`` (``[i]`` for an item of a list),
        or None. A field that is absent or not a string is left to the method's own checks.
    """
    for path in FIELDS.get(method, ()):
        for label, text in _strings(params, path):
            found = problem(label, text)
            if found is not None:
                return found
    return None


def _strings(params: dict[str, Any], path: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    listed = path[-1] == "*"
    keys = path[:-1] if listed else path
    value: Any = params
    for key in keys:
        if not isinstance(value, dict):
            return
        value = value.get(key)
    label = "params." + ".".join(keys)
    if listed and isinstance(value, list):
        yield from ((f"{label}[{i}]", item) for i, item in enumerate(value) if isinstance(item, str))
    elif not listed and isinstance(value, str):
        yield label, value
