"""The JSON text of messages: orjson (zemcp[speed]) and the standard library give the same values
and the same bytes, and fail alike."""

import dataclasses
import datetime
import enum
import json
import math
import random
import struct
import uuid
from collections import OrderedDict

import pytest

from zemcp.protocol import jsonrpc, jsontext

needs_orjson = pytest.mark.skipif(
    jsontext.CODEC != "orjson",
    reason="orjson is not in use here (zemcp[speed] not installed, or ZEMCP_SPEED=off): "
    "the CI run with the extra compares the two codecs",
)


class Colour(enum.Enum):
    RED = "red"


class Size(enum.IntEnum):
    BIG = 3


class Shape(enum.Enum):
    SQUARE = frozenset({4})


@dataclasses.dataclass
class Point:
    x: int


def _outcome(function, value):
    """What ``function(value)`` returns, or the class of what it raises."""
    try:
        return function(value)
    except (TypeError, ValueError, RecursionError) as exc:
        return type(exc)


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def _random_floats(n: int) -> list[float]:
    rng = random.Random(7)
    floats = [1e16, 1e-5, 1e-7, 0.0001, 5e-324, 1.7976931348623157e308, -0.0, 0.1, 100.0, 1e22, 123456.789]
    while len(floats) < n:
        f = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        if math.isfinite(f):
            floats.append(f)
        floats.append(round(rng.uniform(-1e6, 1e6), rng.randint(0, 9)))
    return floats


def _random_strings(n: int) -> list[str]:
    """Short strings of code points where the codecs may differ: lone high and low surrogates (a
    low one before a high one too), pairs, NUL and other controls, noncharacters, the line
    separators, and characters of every UTF-8 length."""
    rng = random.Random(11)
    pieces = [
        lambda: chr(rng.randint(0xD800, 0xDBFF)),
        lambda: chr(rng.randint(0xDC00, 0xDFFF)),
        lambda: chr(rng.randint(0xDC00, 0xDFFF)) + chr(rng.randint(0xD800, 0xDBFF)),
        lambda: chr(rng.randint(0xD800, 0xDBFF)) + chr(rng.randint(0xDC00, 0xDFFF)),
        lambda: chr(rng.choice([0x00, 0x1F, 0x7F, 0x85, 0x2028, 0x2029])),
        lambda: chr(rng.choice([0xFDD0, 0xFDEF, 0xFFFE, 0xFFFF, 0x1FFFE, 0x10FFFF])),
        lambda: chr(rng.randint(0x20, 0x7E)),
        lambda: chr(rng.randint(0x80, 0x7FF)),
        lambda: chr(rng.randint(0xE000, 0xFFFD)),
        lambda: chr(rng.randint(0x10000, 0x10FFFF)),
    ]
    return ["".join(rng.choice(pieces)() for _ in range(rng.randint(0, 6))) for _ in range(n)]


ENCODED = [
    {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "hé ✓ 😀"}], "isError": False}},
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
    {"text": "null and 0.00001 and 1e-5 and 1e16 in a string"},
    {"lone": "\ud800 and \udfff"},
    {"strings": _random_strings(2000)},
    {"ints": [2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30]},
    {"floats": _random_floats(3000)},
    {"enum": Colour.RED, "int enum": Size.BIG, "uuid": uuid.UUID(int=12345)},
    (1, 2, 3),
    OrderedDict(a=1),
    {1: "non-string key", None: 2, False: 3, 2.5: 4},
    {"control": "\n\r\t\x00\x1f\u2028\u2029"},
    _nested(250),
    _nested(260),
]
REFUSED = [
    float("nan"),
    {"x": float("inf")},
    [float("-inf")],
    {"when": datetime.date(2026, 1, 2)},
    {"point": Point(1)},
    {"set": {1, 2}},
    {"bytes": b"x"},
    {"enum of a set": Shape.SQUARE},
]


@needs_orjson
@pytest.mark.parametrize("value", ENCODED + REFUSED, ids=lambda v: type(v).__name__)
def test_both_codecs_write_the_same_bytes_or_refuse_alike(value):
    assert _outcome(jsontext.dumps, value) == _outcome(jsontext._standard_dumps, value)


@pytest.mark.parametrize("value", ENCODED, ids=lambda v: type(v).__name__)
def test_what_is_written_reads_back(value):
    text = jsontext.dumps(value)
    assert b"\n" not in text  # one SSE data line
    expected = json.loads(json.dumps(value, default=jsontext._default))
    assert json.loads(text) == expected


@pytest.mark.parametrize("value", REFUSED, ids=lambda v: type(v).__name__)
def test_values_json_cannot_carry_are_refused(value):
    with pytest.raises((TypeError, ValueError)):
        jsontext.dumps(value)


def test_text_is_utf8_and_lone_surrogates_are_escaped():
    assert jsontext.dumps({"a": "é"}) == '{"a":"é"}'.encode()
    assert jsontext.dumps({"a": "\ud800é"}) == b'{"a":"\\ud800\\u00e9"}'


DECODED = [
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":"h\xc3\xa9"}}}',
    b'{"id": 123456789012345678901234567890}',
    b'{"id": -9223372036854775809}',
    b'{"n": 18446744073709551615}',
    b"[1e400, -1e400, 0.1e-400]",
    b'"\\ud800"',
    b'{"a":1,"a":2}',
    b"  {}  ",
    b"-0",
    b"[1.0, 1E2, 2.5e-7]",
    b"NaN",
    b"[Infinity]",
    b"{}x",
    b'"\xff"',
    b"\xef\xbb\xbf{}",
    b"",
    b"[" * 600 + b"]" * 600,
    b"[" * 1000 + b"]" * 1000,
    b"[" * 100 + b"]" * 99,
]


@needs_orjson
@pytest.mark.parametrize("text", DECODED, ids=lambda t: t[:20].decode("latin-1"))
def test_both_codecs_read_the_same_values_or_refuse_alike(text):
    mine, standard = _outcome(jsontext.loads, text), _outcome(jsontext._standard_loads, text)
    if isinstance(standard, float) and math.isnan(standard):
        assert math.isnan(mine)
    else:
        assert mine == standard
        assert type(mine) is type(standard)


@needs_orjson
def test_both_codecs_read_random_floats_alike():
    text = json.dumps(_random_floats(3000)).encode()
    assert jsontext.loads(text) == jsontext._standard_loads(text)


@needs_orjson
@pytest.mark.parametrize("spelling", ["escaped", "raw"])
def test_both_codecs_read_random_strings_alike(spelling):
    """Escaped, every string reads back; raw, surrogates are bytes that are not UTF-8, which both refuse."""
    strings = _random_strings(2000)
    if spelling == "escaped":
        text = json.dumps(strings).encode("ascii")
    else:
        text = json.dumps(strings, ensure_ascii=False).encode("utf-8", "surrogatepass")
    assert _outcome(jsontext.loads, text) == _outcome(jsontext._standard_loads, text)


def test_parse_errors_name_what_was_wrong():
    with pytest.raises(jsonrpc.ProtocolError, match="not UTF-8"):
        jsonrpc.parse(b'"\xff"')
    with pytest.raises(jsonrpc.ProtocolError, match="Expecting value"):
        jsonrpc.parse(b"[1,]")
    with pytest.raises(jsonrpc.ProtocolError, match="NaN is not valid JSON"):
        jsonrpc.parse(b'{"a": NaN}')
    assert jsonrpc.parse(b'{"jsonrpc":"2.0","id":12345678901234567890123,"method":"m"}').id == 12345678901234567890123
