"""The script of ``zemcp-test mcp``: one directive per input line (:func:`parse_directive`),
Go-style durations (:func:`parse_duration`), and the FIFO of queued elicitation answers
(:class:`AnswerQueue`) that ``elicit-*`` directives fill.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from zemcp.testclient.clienterrors import DirectiveError

#: The tool that runs a plain command line (ze's handcrafted tool of the same name).
EXECUTE_TOOL = "ze_execute"


@dataclass(frozen=True)
class QueueAnswer:
    """``elicit-accept``/``elicit-decline``/``elicit-cancel``: queue one elicitation answer.

    Attributes:
        result: the JSON-RPC ``result`` to send, e.g. ``{"action": "accept", "content": {...}}``.
    """

    result: dict[str, Any]


@dataclass(frozen=True)
class CallTool:
    """``@<tool> [json object]``, or a plain command line (``ze_execute {"command": line}``)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Wait:
    """``wait <duration>``: sleep for :attr:`seconds`."""

    seconds: float


Directive = QueueAnswer | CallTool | Wait

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Parse a Go-style duration such as ``500ms``, ``2s``, ``1m30s`` or ``0``.

    Args:
        text: a sequence of ``<number><unit>`` with unit ``ns``, ``us``, ``ms``, ``s``, ``m``
            or ``h``; a bare ``0`` is allowed.
    Returns:
        [seconds] the duration.
    Raises:
        ValueError: the text is not such a duration (the message shows the expected form).
    """
    text = text.strip()
    if text == "0":
        return 0.0
    total, pos = 0.0, 0
    for part in _DURATION_PART.finditer(text):
        if part.start() != pos:
            break
        total += float(part.group(1)) * _DURATION_UNITS[part.group(2)]
        pos = part.end()
    if not text or pos != len(text):
        raise ValueError(f"{text!r} is not a duration; write it like 500ms, 2s or 1m30s")
    return total


def _json_object(text: str, what: str, lineno: int) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise DirectiveError(lineno, f"{what} needs a JSON object, got invalid JSON {text!r} ({exc})") from None
    if not isinstance(value, dict):
        raise DirectiveError(lineno, f"{what} needs a JSON object, got {type(value).__name__} {text!r}")
    return value


def parse_directive(line: str, lineno: int = 0) -> Directive | None:
    """Parse one input line.

    Grammar (the line is trimmed first):
        blank, or starting with ``#``   -> None (ignored)
        ``elicit-accept <json object>`` -> QueueAnswer accept with that content
        ``elicit-decline``              -> QueueAnswer decline
        ``elicit-cancel``               -> QueueAnswer cancel
        ``@<tool> [<json object>]``     -> CallTool (``{}`` arguments when omitted)
        ``wait <duration>``             -> Wait (see :func:`parse_duration`)
        anything else                   -> CallTool ``ze_execute`` with ``{"command": line}``

    Args:
        line: the raw input line.
        lineno: its 1-based number, used in error messages (0: none).
    Returns:
        the directive, or None for a line to ignore.
    Raises:
        DirectiveError: a directive keyword with a missing or malformed argument.
    """
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    word, _, rest = line.partition(" ")
    rest = rest.strip()
    if word == "elicit-accept":
        if not rest:
            raise DirectiveError(lineno, 'elicit-accept needs a JSON object, e.g. elicit-accept {"command": "help"}')
        return QueueAnswer({"action": "accept", "content": _json_object(rest, "elicit-accept", lineno)})
    if word in ("elicit-decline", "elicit-cancel"):
        if rest:
            raise DirectiveError(lineno, f"{word} takes no argument, got {rest!r}")
        return QueueAnswer({"action": word.removeprefix("elicit-")})
    if word.startswith("@"):
        name = word[1:]
        if not name:
            raise DirectiveError(lineno, '@ needs a tool name, e.g. @ze_execute {"command": "help"}')
        return CallTool(name, _json_object(rest, f"@{name}", lineno) if rest else {})
    if word == "wait":
        try:
            return Wait(parse_duration(rest))
        except ValueError as exc:
            raise DirectiveError(lineno, f"wait: {exc}") from None
    return CallTool(EXECUTE_TOOL, {"command": line})


class AnswerQueue:
    """The one FIFO of queued elicitation answers for a whole run."""

    def __init__(self) -> None:
        self._answers: deque[dict[str, Any]] = deque()

    def push(self, result: dict[str, Any]) -> None:
        """Queue ``result`` (an elicitation ``result`` object) behind the others."""
        self._answers.append(result)

    def pop(self) -> dict[str, Any] | None:
        """Take the oldest queued answer; None when the queue is empty."""
        return self._answers.popleft() if self._answers else None

    def __len__(self) -> int:
        return len(self._answers)
