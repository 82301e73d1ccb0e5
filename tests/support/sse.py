"""Reading ``text/event-stream`` bodies, whatever wire they came over."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import requests


class SseStream:
    """Incremental reader of one ``text/event-stream`` response body.

    ``next_item()`` returns the next event or comment as soon as its bytes arrived. The wire
    that opened the stream gives the chunks of the body and what closes it; each read is
    bounded by the wire's own timeout (over HTTP, the read timeout of the request).

    Args:
        chunks: the body's bytes, in pieces of any size as they arrive.
        close: closes the response and its connection (the client goes away).
        patience: [seconds] with a value, :meth:`next_message` fails when only comments came
            for that long; None waits as long as the wire does.

    Attributes:
        events: every event read so far, as ``{"event": name, "data": parsed JSON, "id": event id}``
            (an event with empty data, such as a priming event, is not listed).
        comments: every comment line read so far (without the leading ``:``).
        ended: True once the server ended the body.
        last_event_id: the latest ``id`` field read ("" before any).
        ids: every ``id`` field read, in order (priming events included).
        retry: the latest ``retry`` field [milliseconds], or None.
    """

    def __init__(self, chunks: Iterator[bytes], close: Callable[[], None], patience: float | None = None):
        self._chunks = chunks
        self._close = close
        self._patience = patience
        self._buffer = b""
        self.events: list[dict] = []
        self.comments: list[str] = []
        self.ended = False
        self.last_event_id = ""
        self.ids: list[str] = []
        self.retry: int | None = None

    @classmethod
    def from_requests(cls, response: requests.Response, http: requests.Session) -> SseStream:
        """The reader of ``response``, opened with ``stream=True`` on ``http``; closing it
        closes both (so the connection really goes)."""

        def close() -> None:
            response.close()
            http.close()

        return cls(response.iter_content(chunk_size=None), close)

    def _line(self) -> bytes | None:
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line, self._buffer = self._buffer[:newline], self._buffer[newline + 1 :]
                return line.rstrip(b"\r")
            try:
                chunk = next(self._chunks)
            except StopIteration:
                self.ended = True
                if self._buffer:
                    line, self._buffer = self._buffer, b""
                    return line
                return None
            self._buffer += chunk

    def next_item(self) -> tuple[str, Any] | None:
        """The next ``("event", {"event", "data", "id"})`` or ``("comment", text)``; None at the end."""
        name, data = None, []
        while True:
            line = self._line()
            if line is None:
                return None
            text = line.decode("utf-8")
            if text == "":
                if data and "\n".join(data):
                    event = {"event": name or "message", "data": json.loads("\n".join(data)), "id": self.last_event_id}
                    self.events.append(event)
                    return "event", event
                name, data = None, []
                continue
            if text.startswith(":"):
                comment = text[1:].strip()
                self.comments.append(comment)
                if not data and name is None:
                    return "comment", comment
                continue
            field, _, value = text.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                self.last_event_id = value
                self.ids.append(value)
            elif field == "retry" and value.isdigit():
                self.retry = int(value)

    def read_priming(self) -> str:
        """Read the stream's first block, a priming event (an id first, then ``retry`` and empty data); returns its id."""
        block = []
        while True:
            line = self._line()
            assert line is not None, f"the stream ended before its priming event: {block}"
            text = line.decode("utf-8")
            if text == "":
                break
            block.append(text)
        fields = dict(line.partition(":")[::2] for line in block)
        assert set(fields) == {"id", "retry", "data"} and fields["data"].strip() == "", block
        assert block[0].startswith("id:"), f"a priming event starts with its id: {block}"
        self.last_event_id = fields["id"].strip()
        self.ids.append(self.last_event_id)
        self.retry = int(fields["retry"])
        return self.last_event_id

    def next_message(self) -> dict | None:
        """The JSON-RPC message of the next event (comments skipped); None at the end."""
        deadline = None if self._patience is None else time.monotonic() + self._patience
        while (item := self.next_item()) is not None:
            assert deadline is None or time.monotonic() < deadline, (
                f"no message within {self._patience:g} s, only comments"
            )
            if item[0] == "event":
                return item[1]["data"]
        return None

    def rest(self) -> list[dict]:
        """Every remaining message until the server ends the stream."""
        messages = []
        while (message := self.next_message()) is not None:
            messages.append(message)
        return messages

    def wait_comments(self, n: int) -> list[str]:
        """Read until ``n`` comments arrived after this call; fails on an event or the end."""
        seen = []
        while len(seen) < n:
            item = self.next_item()
            assert item is not None, f"the stream ended while waiting for keep-alive comments: {self.events}"
            assert item[0] == "comment", f"expected only keep-alive comments while waiting, got {item}"
            seen.append(item[1])
        return seen

    def close(self) -> None:
        """Close the response and its own connection (the client goes away)."""
        self._close()


def sse_messages(text: str) -> list[dict]:
    """The JSON-RPC messages of a whole ``text/event-stream`` body (comments skipped)."""
    messages, data = [], []
    for line in [*text.splitlines(), ""]:
        if line == "":
            if data:
                messages.append(json.loads("\n".join(data)))
            data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    return messages
