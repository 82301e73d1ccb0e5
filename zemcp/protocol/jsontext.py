"""The JSON text of JSON-RPC messages: decoded and encoded with orjson when it is installed, else
with the standard library, with the same values and the same bytes either way.

The optional extra ``zemcp[speed]`` installs orjson; which codec runs is decided once, when
this module is imported (``ZEMCP_SPEED=off`` keeps the standard library even with orjson
installed). orjson is faster, and it differs from the standard library in a few corners; each
of them sends the message to the standard library instead, so that the outcome never depends
on the extra:

- decoding: text orjson refuses (invalid JSON, lone surrogate escapes, numbers beyond a
  double) is decoded by the standard library, which words the error or accepts what it
  accepts; a run of 19 or more digits (an integer orjson would turn into a float) and a text
  with 512 or more brackets (nesting near the standard library's recursion limit) are decoded
  by the standard library from the start;
- encoding: a value orjson cannot encode (integers beyond 64 bits, dict subclasses, non-string
  keys, nesting past 254 levels, lone surrogates, what ``default`` refuses) is encoded by the
  standard library; so is a message whose orjson text holds ``null`` (orjson writes NaN and
  the infinities as ``null``, which the standard library refuses) or a float below 1e-4 (which
  the two write differently: ``1e-05`` against ``0.00001``), or an exponent without its sign.

Both write compact UTF-8 (``{"a":1}``); a string with a lone surrogate, which UTF-8 cannot
carry, is written with ``\\u`` escapes. Enum members are written as their values and UUIDs as
their text; any other value JSON has no form for raises ``TypeError``.
"""

from __future__ import annotations

import enum
import importlib
import json
import os
import re
from typing import Any

#: ``ZEMCP_SPEED``: ``auto`` (the default: orjson when installed) or ``off``.
SPEED_VARIABLE = "ZEMCP_SPEED"

#: [brackets] a text with this many ``[`` and ``{`` is decoded by the standard library, whose
#: recursion limit (about 1,000 levels, less the caller's stack) is below orjson's (1,024).
_BRACKETS_TO_STANDARD = 512
# Digits in a row from which orjson may read an integer as a float (2**63 has 19 digits).
_LONG_INTEGER = re.compile(rb"\d{19}")
# orjson's text that the standard library writes otherwise: NaN and infinities as null, floats
# below 1e-4 in plain or one-digit-exponent form (the standard library writes 1e-05), and an
# exponent without its sign (older orjson releases write 1e16 for 1e+16).
_DIFFERENT_TEXT = re.compile(rb"null|0\.0000|\de-\d(?!\d)|\de\d")


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _default(value: Any) -> Any:
    """What both codecs write for an Enum member (its value) and a UUID (its text)."""
    if isinstance(value, enum.Enum):
        return value.value
    if type(value).__name__ == "UUID" and type(value).__module__ == "uuid":
        return str(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# Made once: json.loads and json.dumps with options build a new codec on every call.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_UTF8_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False, default=_default)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False, default=_default)


def _standard_loads(data: bytes | str) -> Any:
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    return _DECODER.decode(text)


def _standard_dumps(value: Any) -> bytes:
    text = _UTF8_ENCODER.encode(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate: only an escape carries it.
        return _ASCII_ENCODER.encode(value).encode("ascii")


def speed_allowed() -> bool:
    """Whether ``ZEMCP_SPEED`` lets zemcp use the compiled libraries it finds (``auto``, the
    default) or keeps the standard library and jsonschema (``off``); either word in any case.

    Raises:
        ValueError: any other value (the message names the variable and its values).
    """
    value = os.environ.get(SPEED_VARIABLE, "auto").strip().lower() or "auto"
    if value not in ("auto", "off"):
        raise ValueError(f"{SPEED_VARIABLE} must be auto or off, got {value!r}")
    return value == "auto"


def speed_module(name: str) -> Any:
    """The compiled module ``name`` of ``zemcp[speed]`` when it is installed and
    ``ZEMCP_SPEED`` allows it, else None.

    Raises:
        ValueError: ``ZEMCP_SPEED`` is neither auto nor off.
    """
    if not speed_allowed():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_orjson = speed_module("orjson")
#: The codec in use: ``"orjson"`` or ``"json"`` (the standard library).
CODEC = "orjson" if _orjson is not None else "json"


def loads(data: bytes | str) -> Any:
    """The value of one JSON text.

    Args:
        data: UTF-8 bytes or a string.
    Returns:
        the value (dicts, lists, strings, ints, floats, booleans, None).
    Raises:
        UnicodeDecodeError: ``data`` is bytes that are not UTF-8.
        ValueError: not JSON (``json.JSONDecodeError``, whose message says where), or
            ``NaN``/``Infinity`` (not JSON).
        RecursionError: nested too deeply.
    """
    if _orjson is not None and not _needs_standard_decoder(data):
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass
    return _standard_loads(data)


def _needs_standard_decoder(data: bytes | str) -> bool:
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return raw.count(b"[") + raw.count(b"{") >= _BRACKETS_TO_STANDARD or _LONG_INTEGER.search(raw) is not None


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON on one line (safe inside an SSE ``data:`` line).

    Raises:
        TypeError: a value JSON has no form for (a datetime, a set, bytes ...).
        ValueError: NaN, an infinity, or a reference cycle.
    """
    if _orjson is not None:
        try:
            text: bytes = _orjson.dumps(value, default=_default, option=_ORJSON_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            return _standard_dumps(value)
        if _DIFFERENT_TEXT.search(text) is None:
            return text
    return _standard_dumps(value)


_ORJSON_OPTIONS = (
    # What the standard library writes differently, or refuses, goes to ``default`` and on
    # to the standard library: subclasses of str, int, dict and list, dataclasses, datetimes.
    _orjson.OPT_PASSTHROUGH_SUBCLASS | _orjson.OPT_PASSTHROUGH_DATACLASS | _orjson.OPT_PASSTHROUGH_DATETIME
    if _orjson is not None
    else 0
)
