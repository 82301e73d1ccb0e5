"""Rates of the rate limits: ``<count>/<period>``, optionally ``burst <n>``, and the per-tool list.

``120/minute`` is a token bucket that holds at most 120 tokens and gets 120 back every
minute (one every half second); ``10/second burst 50`` holds 50 and gets 10 a second. The
settings (``ZEMCP_RATE_LIMIT``, ``ZEMCP_RATE_LIMIT_TOOLS``) and ``@server.tool(rate_limit=)``
are parsed here, once, when they are given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Period names -> [seconds].
PERIODS = {"second": 1.0, "s": 1.0, "minute": 60.0, "m": 60.0, "hour": 3600.0, "h": 3600.0}
_FULL_NAMES = {1.0: "second", 60.0: "minute", 3600.0: "hour"}
#: The most tokens a bucket may hold or get per period (beyond it a limit limits nothing).
MAX_COUNT = 10**9
_RATE = re.compile(r"^(\d+)\s*/\s*([a-z]+)(?:\s+burst\s+(\d+))?$")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_FORM = (
    "<count>/<second|minute|hour> (also s, m, h), optionally followed by 'burst <n>', "
    "for example 120/minute or 10/second burst 50"
)


@dataclass(frozen=True)
class Rate:
    """A token bucket: how many tokens it holds at most and how fast they come back.

    Attributes:
        count: tokens that come back every period, evenly (one every ``period / count`` seconds).
        period: [seconds] 1, 60 or 3600.
        burst: tokens the bucket holds at most, which a client may spend at once; ``count``
            unless ``burst <n>`` says otherwise.
    """

    count: int
    period: float
    burst: int

    @property
    def per_second(self) -> float:
        """[tokens per second] how fast the bucket fills."""
        return self.count / self.period

    @property
    def text(self) -> str:
        """The rate as messages show it: ``120/minute``, ``10/second burst 50``."""
        base = f"{self.count}/{_FULL_NAMES[self.period]}"
        return base if self.burst == self.count else f"{base} burst {self.burst}"


def parse_rate(text: str, source: str) -> Rate:
    """``<count>/<period>`` (``120/minute``, ``1/s``), optionally ``burst <n>``, as a :class:`Rate`.

    Args:
        text: the rate (blanks around it and its parts are allowed; case is ignored).
        source: what set it, for the message: ``"rate_limit (ZEMCP_RATE_LIMIT)"``.
    Returns:
        the rate.
    Raises:
        ValueError: not of that form, or a count or burst of 0 or above :data:`MAX_COUNT`;
            the message names ``source`` and the form expected.
    """
    match = _RATE.match(text.strip().lower()) if isinstance(text, str) else None
    if match is None or match.group(2) not in PERIODS:
        raise ValueError(f"{source} must be a rate {_FORM}; got {text!r}")
    count = int(match.group(1))
    burst = int(match.group(3)) if match.group(3) is not None else count
    if not (1 <= count <= MAX_COUNT and 1 <= burst <= MAX_COUNT):
        raise ValueError(f"{source}: the count and the burst of a rate must be between 1 and {MAX_COUNT}; got {text!r}")
    return Rate(count, PERIODS[match.group(2)], burst)


def parse_tool_rates(text: str, source: str) -> dict[str, Rate]:
    """Comma-separated ``<tool>=<rate>`` pairs (``report=5/minute,search=1/s``) by tool name.

    Args:
        text: the pairs; empty for none.
        source: what set them, for the message: ``"rate_limit_tools (ZEMCP_RATE_LIMIT_TOOLS)"``.
    Returns:
        tool name -> its rate.
    Raises:
        ValueError: a pair without ``=``, a name that no tool can have, a name given twice,
            or a rate :func:`parse_rate` refuses; the message names ``source`` and the pair.
    """
    rates: dict[str, Rate] = {}
    for pair in (part.strip() for part in text.split(",")):
        if not pair:
            continue
        name, equals, rate = (part.strip() for part in pair.partition("="))
        if not equals or not _TOOL_NAME.match(name):
            raise ValueError(
                f"{source} takes comma-separated <tool>=<rate> pairs, for example report=5/minute,search=1/s; "
                f"got {pair!r}"
            )
        if name in rates:
            raise ValueError(f"{source} names tool {name!r} twice; give each tool one rate")
        rates[name] = parse_rate(rate, f"{source} for tool {name!r}")
    return rates
