"""The MCP test client behind ``zemcp-test mcp``: a scripted session against a running server.

It reproduces the behaviour of ze's ``ze-test mcp``: wait until the server's port accepts TCP
connections, ``initialize`` (declaring the elicitation capability only when asked), send
``notifications/initialized``, run one directive per input line, and end the session with
DELETE. The directive grammar is in :func:`parse_directive`; the output rules are in
:meth:`McpTestClient.call_tool`.

Responses are read as ``application/json`` or as ``text/event-stream`` with
:class:`SseParser`, an implementation of the WHATWG event-stream parsing rules. While a
request's stream is open, the server's ``elicitation/create`` requests are answered from one
FIFO of queued answers (:class:`AnswerQueue`) with a separate POST; an empty queue answers
``cancel`` so that a wrong scenario ends instead of waiting for an answer that never comes.
"""

from __future__ import annotations

import codecs
import json
import re
import socket
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO
from urllib.parse import urlsplit

import requests

from zemcp.version import __version__

CLIENT_NAME = "zemcp-test"
DEFAULT_PROTOCOL_VERSION = "2025-06-18"
#: The tool that runs a plain command line (ze's handcrafted tool of the same name).
EXECUTE_TOOL = "ze_execute"
#: [seconds] pause between two TCP connect attempts while waiting for the server.
READY_POLL_INTERVAL = 0.05
#: HTTP statuses that mean the session was ended by DELETE.
DELETE_OK = (200, 202, 204)


# -- errors ----------------------------------------------------------------------------


class ClientError(Exception):
    """Base of every failure that ends a run; ``str(exc)`` is the text after ``error: ``."""


class DirectiveError(ClientError):
    """An input line that is not a valid directive.

    Attributes:
        lineno: 1-based number of the offending input line (0 when parsed outside a script).
    """

    def __init__(self, lineno: int, message: str):
        super().__init__(f"line {lineno}: {message}" if lineno else message)
        self.lineno = lineno


class TransportError(ClientError):
    """HTTP-level failure: connection refused, timeout, unexpected status or content type,
    a body that is not JSON-RPC, or a stream that ended without the response."""


class RpcError(ClientError):
    """The server answered a request with a JSON-RPC error.

    Attributes:
        code: the JSON-RPC error code.
        message: the error's message.
    """

    def __init__(self, code: Any, message: Any):
        super().__init__(f"RPC error {code}: {message}")
        self.code = code
        self.message = message


class CommandError(ClientError):
    """A tool call returned a result with ``isError: true``.

    Attributes:
        text: the text of the result's text content items, joined with newlines.
    """

    def __init__(self, text: str):
        super().__init__(f"command error: {text}")
        self.text = text


# -- server-sent events ----------------------------------------------------------------


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


# -- directives ------------------------------------------------------------------------


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


# -- the client ------------------------------------------------------------------------


class McpTestClient:
    """One scripted MCP session over Streamable HTTP.

    Every HTTP request goes to ``url`` only (no redirects followed, no proxy taken from the
    environment) and must complete within ``timeout`` seconds, its response body included.

    Args:
        url: the MCP endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
        timeout: [seconds] bound on the readiness wait and on each HTTP request.
        elicit: declare ``capabilities.elicitation`` at initialize.
        token: sent as ``Authorization: Bearer <token>`` when given.
        protocol_version: the version requested at initialize.
        verbose: report each response's status and content type on ``stderr``.
        stdout: where tool output goes.
        stderr: where notifications, notes and verbose lines go.
        session: the HTTP session to use (tests pass one with a fake adapter).
    Raises:
        ValueError: ``url`` is not an http(s) URL or ``timeout`` is not positive.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10.0,
        elicit: bool = False,
        token: str | None = None,
        protocol_version: str = DEFAULT_PROTOCOL_VERSION,
        verbose: bool = False,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        session: requests.Session | None = None,
    ):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the MCP URL must be http(s)://host[:port]/path, got {url!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.url = url
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.timeout = timeout
        self.elicit = elicit
        self.protocol_version = protocol_version
        self.verbose = verbose
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr
        self.answers = AnswerQueue()
        self.session_id: str | None = None
        self.negotiated_version: str | None = None
        self._next_id = 1
        self._http = session if session is not None else requests.Session()
        # Traffic goes to the given URL only: never through a proxy named in the environment.
        self._http.trust_env = False
        self._http.headers.update(
            {
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "User-Agent": f"{CLIENT_NAME}/{__version__}",
            }
        )
        if token:
            self._http.headers["Authorization"] = f"Bearer {token}"

    # -- the run -------------------------------------------------------------------

    def run(self, lines: Iterable[str]) -> None:
        """The whole session: wait for the port, initialize, run ``lines``, DELETE.

        The session is deleted also when a directive fails (best effort).

        Args:
            lines: the input, one directive per line (read lazily, so a pipe works).
        Raises:
            ClientError: the first failure; the lines after it are not run.
        """
        self.wait_ready()
        try:
            self.initialize()
            self.run_directives(lines)
        finally:
            self.close()

    def wait_ready(self) -> None:
        """Poll a TCP connect to the server until it accepts; no HTTP request is sent.

        Raises:
            TransportError: the port did not accept a connection within ``timeout`` seconds.
        """
        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                socket.create_connection((self.host, self.port), timeout=max(0.05, min(1.0, remaining))).close()
                return
            except OSError as exc:
                if time.monotonic() >= deadline:
                    raise TransportError(
                        f"{self.host}:{self.port} did not accept a connection within {self.timeout:g} s "
                        f"(--timeout); is the server running? last error: {exc}"
                    ) from None
            time.sleep(READY_POLL_INTERVAL)

    def initialize(self) -> dict[str, Any]:
        """Send ``initialize`` then ``notifications/initialized``; keep the session id.

        Returns:
            the initialize result.
        Raises:
            ClientError: the server refused or answered something unusable.
        """
        result = self.request(
            "initialize",
            {
                "protocolVersion": self.protocol_version,
                "capabilities": {"elicitation": {}} if self.elicit else {},
                "clientInfo": {"name": CLIENT_NAME, "version": __version__},
            },
        )
        version = result.get("protocolVersion")
        if not isinstance(version, str):
            raise TransportError(f"the initialize result has no protocolVersion string: {json.dumps(result)}")
        self.negotiated_version = version
        self._http.headers["MCP-Protocol-Version"] = version
        self.notify("notifications/initialized")
        return result

    def run_directives(self, lines: Iterable[str]) -> None:
        """Run each line's directive in order (see :func:`parse_directive`).

        Raises:
            ClientError: the first failing line; the rest is not read.
        """
        for lineno, line in enumerate(lines, 1):
            directive = parse_directive(line, lineno)
            if isinstance(directive, QueueAnswer):
                self.answers.push(directive.result)
            elif isinstance(directive, Wait):
                time.sleep(directive.seconds)
            elif isinstance(directive, CallTool):
                self.call_tool(directive.name, directive.arguments)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call a tool and print its output.

        Output: the ``text`` of each text content item of a successful result on ``stdout``,
        one per line.

        Args:
            name: the tool name.
            arguments: its arguments.
        Returns:
            the ``CallToolResult``.
        Raises:
            CommandError: the result has ``isError: true``.
            RpcError, TransportError: as for :meth:`request`.
        """
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        content = result.get("content")
        if not isinstance(content, list):
            raise TransportError(f"the tools/call result has no content list: {json.dumps(result)}")
        texts = [
            item["text"]
            for item in content
            if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str)
        ]
        skipped = len(content) - len(texts)
        if result.get("isError") is True:
            raise CommandError("\n".join(texts) if texts else "(the error result has no text)")
        for text in texts:
            self.stdout.write(text + "\n")
        self.stdout.flush()
        if skipped:
            self._note(f"content: {skipped} non-text item(s) of the {name} result not shown")
        return result

    def close(self) -> None:
        """End the session with DELETE (best effort: problems are reported on ``stderr`` only)."""
        if self.session_id is None:
            return
        session_id, self.session_id = self.session_id, None
        try:
            response = self._http.delete(
                self.url, headers={"Mcp-Session-Id": session_id}, timeout=self.timeout, allow_redirects=False
            )
            response.close()
        except requests.RequestException as exc:
            self._note(f"warning: DELETE of the session failed: {exc}")
            return
        if response.status_code == 405:
            self._verbose("http: DELETE -> 405: the server does not let clients end sessions")
        elif response.status_code not in DELETE_OK:
            self._note(f"warning: DELETE of the session got HTTP {response.status_code}")
        else:
            self._verbose(f"http: DELETE -> {response.status_code}")

    # -- JSON-RPC over HTTP --------------------------------------------------------

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one JSON-RPC request and return its result.

        Server requests and notifications arriving on the response stream first are handled
        on the way (:meth:`_on_server_message`).

        Args:
            method: the JSON-RPC method.
            params: its params.
        Returns:
            the response's ``result`` object.
        Raises:
            RpcError: the response is a JSON-RPC error.
            TransportError: connection failure, timeout, unexpected status or content type,
                invalid JSON, or a stream that ended without the response.
        """
        request_id = self._next_id
        self._next_id += 1
        label = f"{method} (id {request_id})"
        deadline = time.monotonic() + self.timeout
        response = self._post({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, label)
        try:
            final = self._final_response(response, request_id, label, deadline)
        finally:
            response.close()
        if "error" in final:
            error = final["error"] if isinstance(final["error"], dict) else {}
            raise RpcError(error.get("code"), error.get("message"))
        result = final.get("result")
        if not isinstance(result, dict):
            raise TransportError(f"{label}: the result is not a JSON object: {json.dumps(result)}")
        if method == "initialize":
            self.session_id = response.headers.get("Mcp-Session-Id")
            if self.session_id is not None:
                self._http.headers["Mcp-Session-Id"] = self.session_id
        return result

    def _final_response(
        self, response: requests.Response, request_id: int, label: str, deadline: float
    ) -> dict[str, Any]:
        """The JSON-RPC response to ``request_id`` from a JSON body or an event stream."""
        content_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        upgraded = " (the response was upgraded to a stream)" if content_type == "text/event-stream" else ""
        self._verbose(f"http: {label} -> {response.status_code} {content_type or '(no content type)'}{upgraded}")
        if response.status_code != 200:
            body = self._body(response, label, deadline)
            raise TransportError(f"{label} got HTTP {response.status_code}: {_describe(body)}")
        if content_type == "text/event-stream":
            return self._read_stream(response, request_id, label, deadline)
        if content_type != "application/json":
            raise TransportError(
                f"{label} got Content-Type {content_type or '(none)'!r}; expected application/json or text/event-stream"
            )
        body = self._body(response, label, deadline)
        final = _decode(body, label)
        if not self._is_response_to(final, request_id):
            raise TransportError(f"{label}: the JSON body is not the response to id {request_id}: {_describe(body)}")
        return final

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification; the server must answer 202.

        Raises:
            TransportError: any other status, or a connection failure.
        """
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._expect_accepted(message, method)

    def _respond(
        self, request_id: Any, label: str, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None
    ) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            message["error"] = error
        else:
            message["result"] = result
        self._expect_accepted(message, f"the answer to {label}")

    def _expect_accepted(self, message: dict[str, Any], label: str) -> None:
        deadline = time.monotonic() + self.timeout
        response = self._post(message, label)
        try:
            self._verbose(f"http: {label} -> {response.status_code}")
            if response.status_code != 202:
                raise TransportError(
                    f"{label} got HTTP {response.status_code}, expected 202: "
                    f"{_describe(self._body(response, label, deadline))}"
                )
        finally:
            response.close()

    def _post(self, message: dict[str, Any], label: str) -> requests.Response:
        try:
            return self._http.post(
                self.url, data=json.dumps(message).encode(), stream=True, timeout=self.timeout, allow_redirects=False
            )
        except requests.Timeout:
            raise TransportError(f"{label}: no answer from {self.url} within {self.timeout:g} s (--timeout)") from None
        except requests.RequestException as exc:
            raise TransportError(f"{label}: POST {self.url} failed: {exc}") from None

    def _chunks(self, response: requests.Response, label: str, deadline: float) -> Iterator[bytes]:
        """The body as it arrives; the whole read must end by ``deadline`` (monotonic seconds).

        Before each read the socket timeout is set to the time left, so a server that stops
        sending cannot hold the client past the deadline.
        """
        connection = getattr(response.raw, "connection", None)
        sock = getattr(connection, "sock", None)
        chunks = response.iter_content(chunk_size=None)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TransportError(f"{label}: the response did not complete within {self.timeout:g} s (--timeout)")
            if sock is not None:
                sock.settimeout(remaining)
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            except requests.RequestException as exc:
                # The socket timeout was the time left, so it may fire a hair before the deadline.
                if time.monotonic() >= deadline - 0.01:
                    raise TransportError(
                        f"{label}: the response did not complete within {self.timeout:g} s (--timeout)"
                    ) from None
                raise TransportError(f"{label}: reading the response failed: {exc}") from None
            yield chunk

    def _body(self, response: requests.Response, label: str, deadline: float) -> bytes:
        return b"".join(self._chunks(response, label, deadline))

    def _read_stream(self, response: requests.Response, request_id: int, label: str, deadline: float) -> dict[str, Any]:
        parser = SseParser()
        for chunk in self._chunks(response, label, deadline):
            for event in parser.feed(chunk):
                if event.type != "message":
                    self._verbose(f"sse: ignored an event of type {event.type!r}")
                    continue
                if not event.data.strip():
                    continue  # an event with an empty data field only carries an id
                message = _decode(event.data.encode(), f"{label}: an SSE event")
                if self._is_response_to(message, request_id):
                    return message
                self._on_server_message(message, label)
        raise TransportError(f"{label}: the event stream ended without the response to id {request_id}")

    @staticmethod
    def _is_response_to(message: dict[str, Any], request_id: int) -> bool:
        mid = message.get("id")
        return (
            "method" not in message
            and ("result" in message or "error" in message)
            and isinstance(mid, int)
            and not isinstance(mid, bool)
            and mid == request_id
        )

    # -- messages from the server --------------------------------------------------

    def _on_server_message(self, message: dict[str, Any], label: str) -> None:
        method = message.get("method")
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if not isinstance(method, str):
            self._note(f"note: ignored a message on the stream of {label} that is not for it: {json.dumps(message)}")
        elif "id" in message:
            self._on_server_request(method, message["id"], params, label)
        else:
            self._on_notification(method, params)

    def _on_server_request(self, method: str, request_id: Any, params: dict[str, Any], label: str) -> None:
        request_label = f"{method} (id {json.dumps(request_id)})"
        if method == "elicitation/create":
            if not self.elicit:
                raise TransportError(
                    f"protocol violation: the server sent {request_label} on the stream of {label} "
                    "although this client did not declare the elicitation capability (run with --elicit to declare it)"
                )
            answer = self.answers.pop()
            question = params.get("message", "")
            if answer is None:
                answer = {"action": "cancel"}
                self._note(f"elicit: no answer queued for {request_label} {question!r}; answered cancel (auto-cancel)")
            else:
                self._verbose(f"elicit: {request_label} {question!r} -> {json.dumps(answer)}")
            self._respond(request_id, request_label, result=answer)
        elif method == "ping":
            self._respond(request_id, request_label, result={})
        else:
            self._note(f"note: the server sent {request_label}, which this client does not handle; answered -32601")
            self._respond(
                request_id,
                request_label,
                error={"code": -32601, "message": f"Method not found: {CLIENT_NAME} does not handle {method}"},
            )

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/progress":
            total = params.get("total")
            text = params.get("message")
            self._note(
                f"progress: {params.get('progress')}{'/' + str(total) if total is not None else ''}"
                f"{' ' + text if isinstance(text, str) and text else ''}"
            )
        elif method == "notifications/message":
            data = params.get("data")
            logger = params.get("logger")
            self._note(
                f"log [{params.get('level')}]{' ' + logger if isinstance(logger, str) else ''}: "
                f"{data if isinstance(data, str) else json.dumps(data)}"
            )
        elif method == "notifications/cancelled":
            reason = params.get("reason")
            self._note(
                f"cancelled: the server cancelled its request {json.dumps(params.get('requestId'))}"
                f"{': ' + reason if isinstance(reason, str) and reason else ''}"
            )
        else:
            self._note(f"notification: {method} {json.dumps(params)}")

    # -- output --------------------------------------------------------------------

    def _note(self, line: str) -> None:
        self.stderr.write(line + "\n")
        self.stderr.flush()

    def _verbose(self, line: str) -> None:
        if self.verbose:
            self._note(line)


def _decode(body: bytes, label: str) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise TransportError(f"{label}: the body is not valid JSON ({exc}): {_describe(body)}") from None
    if not isinstance(message, dict):
        raise TransportError(f"{label}: expected one JSON-RPC message object, got {_describe(body)}")
    return message


def _describe(body: bytes) -> str:
    """A short, one-line rendering of a response body for an error message."""
    try:
        message = json.loads(body)
    except ValueError:
        message = None
    if isinstance(message, dict) and isinstance(message.get("error"), dict):
        error = message["error"]
        return f"RPC error {error.get('code')}: {error.get('message')}"
    text = body.decode("utf-8", "replace").strip().replace("\n", " ")
    if not text:
        return "(empty body)"
    return text if len(text) <= 300 else text[:300] + "..."
