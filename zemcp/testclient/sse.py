"""The event-stream parser of the test client: :class:`SseParser`, an implementation of the
WHATWG parsing rules of ``text/event-stream`` bodies, and the :class:`SseEvent` it dispatches."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SseEvent:
    """One dispatched server-sent event.

    Attributes:
        type: the ``event:`` field, ``"message"`` when the event had none.
        data: the ``data:`` lines joined with ``"\\n"``.
        last_event_id: the most recent ``id:`` seen on the stream so far ("" when none).
    """

    type: str
    data: str
    last_event_id: str


_LINE_END = re.compile(r"\r\n|\r|\n")


class SseParser:
    """Incremental parser of a ``text/event-stream`` body (WHATWG HTML, "Server-sent events",
    section "Parsing an event stream" and "Interpreting an event stream").

    Feed it the body in chunks of any size, split anywhere (also inside a UTF-8 sequence or
    between the CR and LF of a line end); it returns each event once its terminating blank
    line has arrived. Rules applied: lines end at CRLF, LF or CR; a leading BOM is skipped;
    lines starting with ``:`` are comments; ``field:value`` with one space after the colon
    removed, a line without a colon is a field with an empty value; ``data`` lines are joined
    with ``"\\n"``; ``event`` sets the type (default ``message``); ``id`` sets the last event
    id unless it contains NUL; ``retry`` sets :attr:`retry` when it is all ASCII digits;
    other fields are ignored; a blank line dispatches, and an event without any ``data``
    line is not dispatched. An unterminated event at the end of the stream is discarded, so
    there is nothing to flush.

    Attributes:
        retry: [milliseconds] the last valid ``retry:`` value, or None.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text = ""
        self._at_start = True
        self._skip_lf = False
        self._data: list[str] = []
        self._has_data = False
        self._type = ""
        self._last_event_id = ""
        self.retry: int | None = None

    def feed(self, chunk: bytes | str) -> list[SseEvent]:
        """Parse the next piece of the body.

        Args:
            chunk: raw bytes (decoded as UTF-8, invalid sequences replaced by U+FFFD) or
                already decoded text.
        Returns:
            the events completed by this chunk, in stream order (often empty).
        """
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        if self._skip_lf and text:
            # The previous chunk ended with CR; an LF right after it belongs to that line end.
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        if self._at_start and text:
            self._at_start = False
            if text[0] == "\ufeff":
                text = text[1:]
        self._text += text
        events: list[SseEvent] = []
        start = 0
        for end in _LINE_END.finditer(self._text):
            event = self._line(self._text[start : end.start()])
            if event is not None:
                events.append(event)
            start = end.end()
            if end.group() == "\r" and start == len(self._text):
                self._skip_lf = True
        self._text = self._text[start:]
        return events

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line[0] == ":":
            return None
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._type = value
        elif name == "id":
            if "\0" not in value:
                self._last_event_id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self.retry = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        event = None
        if self._has_data:
            event = SseEvent(self._type or "message", "\n".join(self._data), self._last_event_id)
        self._data, self._has_data, self._type = [], False, ""
        return event
