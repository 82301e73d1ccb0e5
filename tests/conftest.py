"""Shared fixtures: a real gunicorn running the reference server, and a small MCP HTTP client.

The integration tests (tests/integration) start ``gunicorn -c gunicorn.conf.py wsgi:app``
from the repository root with the interpreter running pytest, on a free loopback port, and
talk to it with ``requests`` only over 127.0.0.1.

Fixtures:
    start_server: factory ``start_server(**env)`` -> :class:`GunicornServer`; keyword names
        are settings without the prefix (``elicitation_timeout=1`` sets
        ``ZEMCP_ELICITATION_TIMEOUT=1``). Every server it started is stopped at teardown.
    server: one server with short keep-alives for the whole run, for tests whose settings
        are the defaults (plus a 0.5 s keep-alive interval).
    client: an initialized :class:`McpClient` (with the elicitation capability) on ``server``.
    start_traced_server: like ``start_server``, but gunicorn's access log gets one
        :data:`TRACE_FORMAT` line per request (worker pid, client port, MCP headers, session
        ids), read back with :func:`trace_records`.
    traced_server: one such traced server with the default settings for the whole run.
    redis_server: one real ``redis-server`` (:class:`tests.support.redisserver.RedisServer`) for
        the whole run, its keys flushed before each test; skips, saying why, where it is
        missing. ``start_redis()`` starts one of the test's own (for tests that stop it).
    ts_sdk1_modules: the install of the official TypeScript SDK 1.x client, once per run
        (:func:`tests.support.tsclient1.install_sdk1`), for :func:`tests.support.tsclient1.run_legacy_calls`;
        skips, saying why, without npm.

Helpers: :class:`ModernClient` speaks the stateless MCP 2026-07-28 era (the per-request
``_meta`` envelope and headers, multi-round-trip elicitation) over raw HTTP.

Markers: every test is marked with what it needs (``gunicorn``, ``redis``, ``node``,
``browser``, ``proxy``) from its fixtures and folder, by :func:`pytest_collection_modifyitems`;
``slow`` is written on the test (docs/contributing.md).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import requests.adapters

from tests.support.processes import stop_group
from tests.support.redisserver import RedisServer, require_redis
from tests.support.tsclient1 import install_sdk1

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
LATEST_VERSION = "2025-11-25"
#: The version the test client asks for unless a test says otherwise (the 2025-06-18 rules).
CLIENT_VERSION = "2025-06-18"
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
ACCEPT = "application/json, text/event-stream"
#: [seconds] connect timeout of every request.
CONNECT_TIMEOUT = 5.0
#: [seconds] read timeout of every plain request and default read timeout of streams.
READ_TIMEOUT = 10.0


#: Connections opened at once per try of :func:`connection_to_a_worker`.
WORKER_PROBE_BATCH = 8
#: [seconds] how long :func:`connection_to_a_worker` tries (workers may still be starting).
WORKER_PROBE_TIME = 20.0


def connection_to_a_worker(ask_pid: Callable[[requests.Session], int], avoid: set[int]) -> tuple[requests.Session, int]:
    """A kept-alive connection to a gunicorn worker whose pid is not in ``avoid``, and its pid.

    ``ask_pid(http)`` makes one request on the connection ``http`` and returns the pid of the
    worker that answered. A new connection goes to the least loaded worker (zemcp's worker
    class; the first to accept under another one), and the others may still be starting:
    one worker can take every connection when they come one by one. Each try opens a batch of
    connections at once, so that the others take some while it is busy; tries go on for
    :data:`WORKER_PROBE_TIME`.

    Raises:
        pytest.fail: no connection reached another worker in time.
    """

    def probe(_: int) -> tuple[requests.Session, int]:
        http = requests.Session()
        return http, ask_pid(http)

    tries = 0
    deadline = time.monotonic() + WORKER_PROBE_TIME
    with ThreadPoolExecutor(WORKER_PROBE_BATCH) as pool:
        while time.monotonic() < deadline:
            tries += 1
            found = None
            for http, pid in pool.map(probe, range(WORKER_PROBE_BATCH)):
                if found is None and pid not in avoid:
                    found = http, pid
                else:
                    http.close()
            if found is not None:
                return found
            time.sleep(0.1)
    pytest.fail(
        f"{tries} batches of {WORKER_PROBE_BATCH} new connections in {WORKER_PROBE_TIME:g} s all reached workers {avoid}"
    )


#: [seconds] how long a server may take to accept TCP connections after start.
START_TIMEOUT = 20.0
#: [seconds] how long a server may take to exit after SIGTERM before it is killed.
STOP_TIMEOUT = 5.0

#: Settings of the shared ``server`` fixture (everything else at its default).
DEFAULT_SERVER_SETTINGS = {"keepalive_interval": "0.5", "elicitation_timeout": "30"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read, release)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# -- SSE reading ------------------------------------------------------------------------


class SseStream:
    """Incremental reader of one ``text/event-stream`` response opened with ``stream=True``.

    ``next_item()`` returns the next event or comment as soon as its bytes arrived; each read
    of the socket is bounded by the read timeout the request was made with.

    Attributes:
        response: the streaming ``requests`` response.
        events: every event read so far, as ``{"event": name, "data": parsed JSON, "id": event id}``
            (an event with empty data, such as a priming event, is not listed).
        comments: every comment line read so far (without the leading ``:``).
        ended: True once the server ended the body.
        last_event_id: the latest ``id`` field read ("" before any).
        ids: every ``id`` field read, in order (priming events included).
        retry: the latest ``retry`` field [milliseconds], or None.
    """

    def __init__(self, response: requests.Response, http: requests.Session):
        self.response = response
        self._http = http
        self._chunks = response.iter_content(chunk_size=None)
        self._buffer = b""
        self.events: list[dict] = []
        self.comments: list[str] = []
        self.ended = False
        self.last_event_id = ""
        self.ids: list[str] = []
        self.retry: int | None = None

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
        """The next ``("event", {"event", "data"})`` or ``("comment", text)``; None at the end."""
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
        """Read the stream's first block, a priming event (an id, ``retry`` and empty data); returns its id."""
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
        self.last_event_id = fields["id"].strip()
        self.ids.append(self.last_event_id)
        self.retry = int(fields["retry"])
        return self.last_event_id

    def next_message(self) -> dict | None:
        """The JSON-RPC message of the next event (comments skipped); None at the end."""
        while True:
            item = self.next_item()
            if item is None:
                return None
            if item[0] == "event":
                return item[1]["data"]

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
        self.response.close()
        self._http.close()


# -- the MCP client -----------------------------------------------------------------------


class SourceAddress(requests.adapters.HTTPAdapter):
    """Connects from ``address`` (another loopback address, such as 127.0.0.2), so that the
    server sees a client of its own: Linux routes all of 127.0.0.0/8 to the loopback."""

    def __init__(self, address: str):
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def http_session(source: str | None = None) -> requests.Session:
    """A ``requests.Session``, connecting from the loopback address ``source`` when given."""
    http = requests.Session()
    if source is not None:
        http.mount("http://", SourceAddress(source))
    return http


class McpClient:
    """A minimal MCP Streamable HTTP client for tests.

    Plain requests use one ``requests.Session``; every streaming call gets a connection of
    its own, so an answer POST always travels on another connection than the stream it
    answers, and closing a stream really closes its socket.

    Attributes:
        url: the endpoint (``http://127.0.0.1:<port>/mcp``).
        session_id: the ``Mcp-Session-Id`` from initialize, or None.
        protocol_version: the negotiated version, sent as ``MCP-Protocol-Version``.
        init_response: the HTTP response to initialize.
        source: the loopback address it connects from (None: the system's choice, 127.0.0.1).
    """

    def __init__(self, url: str, name: str = "zemcp-tests", version: str = "1.0", source: str | None = None):
        self.url = url
        self.name = name
        self.version = version
        self.source = source
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.init_response: requests.Response | None = None
        self.http = http_session(source)
        self._next_id = 0
        self._streams: list[SseStream] = []

    def new_id(self) -> int:
        """A request id not used before by this client."""
        self._next_id += 1
        return self._next_id

    def headers(self, extra: dict | None = None, *, session: bool = True, version: bool = True) -> dict:
        """The headers of an MCP POST, plus ``extra`` (a value of None removes a header, requests' defaults too)."""
        headers = {"Content-Type": "application/json", "Accept": ACCEPT}
        if session and self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if version and self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        for key, value in (extra or {}).items():
            for existing in [k for k in headers if k.lower() == key.lower()]:
                del headers[existing]
            # None is kept: requests then also drops its own default (e.g. "Accept: */*").
            headers[key] = value
        return headers

    def post(
        self,
        message: Any = None,
        *,
        data: Any = None,
        headers: dict | None = None,
        session: bool = True,
        version: bool = True,
        timeout: float = READ_TIMEOUT,
    ) -> requests.Response:
        """POST one message (JSON-encoded) or raw ``data``; the response is read in full."""
        body = data if data is not None else json.dumps(message)
        return self.http.post(
            self.url,
            data=body,
            headers=self.headers(headers, session=session, version=version),
            timeout=(CONNECT_TIMEOUT, timeout),
        )

    def open_stream(
        self, message: dict, *, headers: dict | None = None, timeout: float = READ_TIMEOUT
    ) -> tuple[requests.Response, SseStream | None]:
        """POST ``message`` on a connection of its own with ``stream=True``.

        Returns:
            the response and, when it is ``text/event-stream``, a reader for it (closed at
            the end of the test if still open).
        """
        http = http_session(self.source)
        response = http.post(
            self.url,
            data=json.dumps(message),
            headers=self.headers(headers),
            timeout=(CONNECT_TIMEOUT, timeout),
            stream=True,
        )
        return self._reader(response, http)

    def _reader(
        self, response: requests.Response, http: requests.Session
    ) -> tuple[requests.Response, SseStream | None]:
        """``response`` with a reader when it is an event stream (closed with the client), else read in full."""
        if response.headers.get("Content-Type", "").startswith("text/event-stream"):
            stream = SseStream(response, http)
            self._streams.append(stream)
            return response, stream
        _ = response.content  # read it all, then free the connection
        http.close()
        return response, None

    def get_stream(
        self, last_event_id: str | None = None, *, headers: dict | None = None, timeout: float = READ_TIMEOUT
    ) -> tuple[requests.Response, SseStream | None]:
        """GET the endpoint on a connection of its own with ``stream=True``: the session's
        standalone stream, or with ``last_event_id`` the resumption of a stream.

        Returns:
            the response and, when it is ``text/event-stream``, a reader for it.
        """
        http = http_session(self.source)
        extra = {"Accept": "text/event-stream", "Content-Type": None}
        if last_event_id:
            extra["Last-Event-ID"] = last_event_id
        response = http.get(
            self.url,
            headers=self.headers({**extra, **(headers or {})}),
            timeout=(CONNECT_TIMEOUT, timeout),
            stream=True,
        )
        return self._reader(response, http)

    # -- lifecycle ------------------------------------------------------------------------

    def initialize(
        self,
        *,
        elicitation: bool = True,
        protocol_version: str = CLIENT_VERSION,
        capabilities: dict | None = None,
        headers: dict | None = None,
        initialized: bool = True,
    ) -> requests.Response:
        """Send initialize; on 200 keep the session id and negotiated version.

        Args:
            elicitation: declare ``capabilities.elicitation: {}``.
            capabilities: the whole capabilities object (overrides ``elicitation``).
            headers: extra request headers.
            initialized: send ``notifications/initialized`` after a successful initialize.
        """
        if capabilities is None:
            capabilities = {"elicitation": {}} if elicitation else {}
        message = {
            "jsonrpc": "2.0",
            "id": self.new_id(),
            "method": "initialize",
            "params": {
                "protocolVersion": protocol_version,
                "capabilities": capabilities,
                "clientInfo": {"name": self.name, "version": self.version},
            },
        }
        response = self.post(message, headers=headers, version=False)
        self.init_response = response
        if response.status_code == 200:
            self.session_id = response.headers["Mcp-Session-Id"]
            self.protocol_version = response.json()["result"]["protocolVersion"]
            if initialized:
                note = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
                assert note.status_code == 202, (note.status_code, note.text)
        return response

    def request(self, method: str, params: dict | None = None, **kwargs) -> requests.Response:
        """POST a request with a fresh id (read in full)."""
        message = {"jsonrpc": "2.0", "id": self.new_id(), "method": method}
        if params is not None:
            message["params"] = params
        return self.post(message, **kwargs)

    def rpc(self, method: str, params: dict | None = None) -> dict:
        """A request that must succeed with a JSON answer; returns its ``result``."""
        response = self.request(method, params)
        assert response.status_code == 200, (response.status_code, response.text)
        assert response.headers["Content-Type"].startswith("application/json"), response.headers
        body = response.json()
        assert "result" in body, body
        return body["result"]

    def delete(self, session_id: str | None = None) -> requests.Response:
        """DELETE the session (this client's unless ``session_id`` is given)."""
        return self.http.delete(
            self.url, headers={"Mcp-Session-Id": session_id or self.session_id}, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)
        )

    # -- tools ----------------------------------------------------------------------------

    def call_message(self, arguments: dict | None = None, name: str = "ze_execute") -> dict:
        """A tools/call message with a fresh id."""
        return {
            "jsonrpc": "2.0",
            "id": self.new_id(),
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments if arguments is not None else {}},
        }

    def execute(self, command: str) -> dict:
        """Run one ze_execute command that must answer plain JSON; returns the CallToolResult."""
        response = self.post(self.call_message({"command": command}))
        assert response.status_code == 200, (response.status_code, response.text)
        assert response.headers["Content-Type"].startswith("application/json"), response.headers
        return response.json()["result"]

    def command_text(self, command: str) -> str:
        """The text output of a command that must succeed."""
        result = self.execute(command)
        assert result["isError"] is False, result
        return result["content"][0]["text"]

    def start_elicitation(self, *, timeout: float = READ_TIMEOUT) -> tuple[dict, requests.Response, SseStream, dict]:
        """Call ze_execute without a command and read the elicitation request.

        Returns:
            the tools/call message, the response, its stream and the elicitation/create request.
        """
        call = self.call_message({})
        response, stream = self.open_stream(call, timeout=timeout)
        assert response.status_code == 200, (response.status_code, response.text)
        assert stream is not None, (
            f"expected text/event-stream, got {response.headers.get('Content-Type')}: {response.text}"
        )
        first = stream.next_message()
        assert first is not None and first.get("method") == "elicitation/create", first
        return call, response, stream, first

    def answer(
        self, request_id: Any, result: dict | None = None, *, error: dict | None = None, session_id: str | None = None
    ) -> requests.Response:
        """POST the client's response to a server request (on the plain connection)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            message["error"] = error
        else:
            message["result"] = result
        extra = {"Mcp-Session-Id": session_id} if session_id else None
        return self.post(message, headers=extra)

    def accept(self, request_id: Any, content: dict) -> requests.Response:
        """Answer an elicitation with action accept and ``content``."""
        return self.answer(request_id, {"action": "accept", "content": content})

    # -- commands that report server state ------------------------------------------------

    def status(self) -> dict:
        """``server status`` parsed into numbers (sessions, pending, caps, threads, pid)."""
        text = self.command_text("server status")
        fields = {
            "pid": r"^pid: (\d+)$",
            "uptime": r"^uptime: (\d+) s$",
            "sessions": r"^sessions: (\d+) \(cap \d+\)$",
            "session_cap": r"^sessions: \d+ \(cap (\d+)\)$",
            "pending": r"^pending elicitations: (\d+) \(cap \d+\)$",
            "pending_cap": r"^pending elicitations: \d+ \(cap (\d+)\)$",
            "threads": r"^thread budget: (\d+) threads",
            "threads_pending": r"^thread budget: \d+ threads = (\d+) for pending",
            "threads_listen": r"^thread budget: .* \+ (\d+) for listen streams",
            "listen_cap": r"^listen streams: \d+ \(cap (\d+)\)$",
            "listen_streams": r"^listen streams: (\d+) \(cap \d+\)$",
            "resuming_streams": r"^resumed streams: (\d+)$",
            "standalone_streams": r"^standalone streams: (\d+) \(cap \d+\)$",
            "standalone_cap": r"^standalone streams: \d+ \(cap (\d+)\)$",
            "replay_bytes": r"^replay buffers of finished streams: (\d+) bytes",
            "running": r"^running calls and streams: (\d+) \(call budget \d+\)$",
            "call_budget": r"^running calls and streams: \d+ \(call budget (\d+)\)$",
            "threads_reserved": r"^thread budget: .* \+ (\d+) reserved$",
            "threads_standalone": r"^thread budget: .* \+ (\d+) for standalone streams",
        }
        parsed: dict[str, Any] = {"text": text}
        for key, pattern in fields.items():
            match = re.search(pattern, text, re.M)
            assert match, f"server status lacks {key!r} ({pattern}):\n{text}"
            parsed[key] = int(match.group(1))
        return parsed

    def wait_pending(self, expected: int, deadline: float = 8.0) -> dict:
        """Poll ``server status`` until the process has ``expected`` pending elicitations."""
        end = time.monotonic() + deadline
        while True:
            status = self.status()
            if status["pending"] == expected or time.monotonic() > end:
                assert status["pending"] == expected, (
                    f"pending elicitations stayed at {status['pending']} for {deadline} s, expected {expected}:\n"
                    f"{status['text']}"
                )
                return status
            time.sleep(0.1)

    def close(self) -> None:
        """Close every stream still open and the plain connection."""
        for stream in self._streams:
            stream.close()
        self.http.close()


# -- the 2026-07-28 (stateless) client ----------------------------------------------------

#: The stateless protocol revision (MCP 2026-07-28 basic/versioning, "modern").
MODERN_VERSION = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
#: Request header naming a request in :data:`TRACE_FORMAT` lines (ignored by the server).
TAG_HEADER = "X-Zemcp-Test-Tag"


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


class ModernClient:
    """A minimal MCP 2026-07-28 client over raw HTTP, for tests.

    Every request carries the ``params._meta`` envelope (protocol version, client
    capabilities, client info) and the ``MCP-Protocol-Version``, ``Mcp-Method`` and
    ``Mcp-Name`` headers, and travels on a connection of its own (``Connection: close``), so
    consecutive rounds of one call may reach different gunicorn workers. No session: nothing
    is remembered between requests except the id counter. Safe to share between threads.

    Attributes:
        url: the endpoint.
        name, version: the ``clientInfo`` sent with every request.
        capabilities: the ``clientCapabilities`` sent with every request.
    """

    def __init__(
        self, url: str, name: str = "zemcp-modern-tests", version: str = "1.0", capabilities: dict | None = None
    ):
        self.url = url
        self.name = name
        self.version = version
        self.capabilities = {"elicitation": {}} if capabilities is None else capabilities
        self._ids = iter(range(1, 1 << 62))
        self._lock = threading.Lock()

    def new_id(self) -> int:
        """A request id not used before by this client."""
        with self._lock:
            return next(self._ids)

    def meta(self) -> dict:
        """The per-request envelope for ``params._meta``."""
        return {
            META_VERSION: MODERN_VERSION,
            META_CAPABILITIES: self.capabilities,
            META_CLIENT_INFO: {"name": self.name, "version": self.version},
        }

    def message(self, method: str, params: dict | None = None) -> dict:
        """A request with a fresh id whose params carry the envelope."""
        return {
            "jsonrpc": "2.0",
            "id": self.new_id(),
            "method": method,
            "params": {**(params or {}), "_meta": self.meta()},
        }

    def headers(self, message: dict, extra: dict | None = None) -> dict:
        """The headers of a POST of ``message`` (standard MCP headers from its body), plus ``extra``."""
        headers = {
            "Content-Type": "application/json",
            "Accept": ACCEPT,
            "Connection": "close",
            "MCP-Protocol-Version": MODERN_VERSION,
            "Mcp-Method": message["method"],
        }
        params = message.get("params") or {}
        if message["method"] in ("tools/call", "prompts/get"):
            headers["Mcp-Name"] = params["name"]
        elif message["method"] == "resources/read":
            headers["Mcp-Name"] = params["uri"]
        elif message["method"].startswith("tasks/") and isinstance(params.get("taskId"), str):
            headers["Mcp-Name"] = params["taskId"]
        headers.update(extra or {})
        return headers

    def post(self, message: dict, *, headers: dict | None = None, timeout: float = READ_TIMEOUT) -> requests.Response:
        """POST ``message`` on a fresh connection; the response is read in full."""
        with requests.Session() as http:
            response = http.post(
                self.url,
                data=json.dumps(message),
                headers=self.headers(message, headers),
                timeout=(CONNECT_TIMEOUT, timeout),
            )
            _ = response.content
        return response

    @staticmethod
    def reply(response: requests.Response, request_id: Any) -> dict:
        """The JSON-RPC response to ``request_id`` in a JSON or ``text/event-stream`` body."""
        kind = response.headers.get("Content-Type", "")
        if kind.startswith("text/event-stream"):
            messages = sse_messages(response.text)
        else:
            assert kind.startswith("application/json"), (response.status_code, kind, response.text)
            messages = [response.json()]
        replies = [m for m in messages if "method" not in m and m.get("id") == request_id]
        assert len(replies) == 1, f"expected one response to id {request_id!r}, got {messages}"
        return replies[0]

    def call(
        self,
        arguments: dict | None = None,
        *,
        name: str = "ze_execute",
        input_responses: dict | None = None,
        request_state: Any = None,
        headers: dict | None = None,
    ) -> tuple[requests.Response, dict]:
        """One tools/call round; returns the HTTP response and the JSON-RPC response."""
        params: dict[str, Any] = {"name": name, "arguments": arguments if arguments is not None else {}}
        if input_responses is not None:
            params["inputResponses"] = input_responses
        if request_state is not None:
            params["requestState"] = request_state
        message = self.message("tools/call", params)
        response = self.post(message, headers=headers)
        return response, self.reply(response, message["id"])

    def call_result(self, arguments: dict | None = None, **kwargs) -> dict:
        """A tools/call round that must answer HTTP 200 with a result; returns the result."""
        response, reply = self.call(arguments, **kwargs)
        assert response.status_code == 200, (response.status_code, response.text)
        assert "result" in reply, reply
        assert "Mcp-Session-Id" not in response.headers, response.headers
        return reply["result"]

    def ask_command(self, *, headers: dict | None = None) -> dict:
        """Round 1 of ze_execute without a command: must end ``input_required`` asking for ``command``."""
        result = self.call_result({}, headers=headers)
        assert result.get("resultType") == "input_required", result
        assert list(result["inputRequests"]) == ["command"], result
        assert result["inputRequests"]["command"]["method"] == "elicitation/create", result
        assert isinstance(result.get("requestState"), str) and result["requestState"], result
        return result

    def answer_command(self, first: dict, command: str, *, headers: dict | None = None) -> dict:
        """Round 2: the retry answering round 1's question with ``command``; returns its result."""
        return self.call_result(
            {},
            input_responses={"command": {"action": "accept", "content": {"command": command}}},
            request_state=first["requestState"],
            headers=headers,
        )

    def run_eliciting(self, command: str) -> str:
        """Both rounds of an eliciting ze_execute answered with ``command``; the completed call's text."""
        final = self.answer_command(self.ask_command(), command)
        assert final.get("resultType") == "complete" and final.get("isError") is False, final
        return final["content"][0]["text"]


# -- gunicorn ---------------------------------------------------------------------------


class GunicornServer:
    """``gunicorn -c gunicorn.conf.py wsgi:app`` in its own process group on a free port.

    Attributes:
        port: the TCP port on 127.0.0.1.
        url: the MCP endpoint URL.
        env: the ZEMCP_* variables it was started with.
        log_path: file receiving gunicorn's stdout and stderr (access and error logs).

    ``gunicorn_args`` are extra command-line options, placed before the app. With
    ``config=False`` gunicorn runs without gunicorn.conf.py, with its own defaults (the sync
    worker), as a site that mounts zemcp in its own gunicorn setup might. ``app`` is the
    WSGI app gunicorn loads (the reference server by default); ``cwd`` the directory it
    starts in (the checkout by default, whose zemcp it then imports).
    """

    def __init__(
        self,
        settings: dict[str, Any],
        log_dir: Path,
        gunicorn_args: tuple[str, ...] = (),
        config: bool = True,
        app: str = "wsgi:app",
        cwd: Path = REPO,
    ):
        self.port = free_port()
        self.base = f"http://{HOST}:{self.port}"
        self.url = f"{self.base}/mcp"
        # The tests read what went over the wire from the access log, which is off by default.
        self.env = {"ZEMCP_ACCESS_LOG": "-"}
        self.env.update({"ZEMCP_" + key.upper(): str(value) for key, value in settings.items()})
        self.env["ZEMCP_BIND"] = f"{HOST}:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZEMCP_")}
        env.update(self.env)
        env["PYTHONUNBUFFERED"] = "1"
        fd, name = tempfile.mkstemp(prefix=f"gunicorn-{self.port}-", suffix=".log", dir=log_dir)
        self.log_path = Path(name)
        self._log = os.fdopen(fd, "wb")
        self._clients: list[McpClient] = []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                # Without -c, gunicorn would still read ./gunicorn.conf.py: name an empty file instead.
                *(
                    ("-c", "gunicorn.conf.py")
                    if config
                    else ("-c", os.devnull, "--bind", self.env["ZEMCP_BIND"], "--access-logfile", "-")
                ),
                *gunicorn_args,
                app,
            ],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            self._wait_listening()
        except BaseException:
            self.stop()
            raise

    def _wait_listening(self) -> None:
        end = time.monotonic() + START_TIMEOUT
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                pytest.fail(f"gunicorn exited with {self.proc.returncode} at start ({self.env}):\n{self.log()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        pytest.fail(
            f"gunicorn did not accept connections on {HOST}:{self.port} within {START_TIMEOUT} s:\n{self.log()}"
        )

    def log(self) -> str:
        """Everything gunicorn wrote so far (it writes to the file directly)."""
        return self.log_path.read_text(errors="replace")

    def client(self, name: str = "zemcp-tests", version: str = "1.0", source: str | None = None) -> McpClient:
        """A new, uninitialized client of this server (closed when the server stops), connecting
        from the loopback address ``source`` when given."""
        client = McpClient(self.url, name, version, source)
        self._clients.append(client)
        return client

    def session(
        self,
        *,
        elicitation: bool = True,
        name: str = "zemcp-tests",
        version: str = "1.0",
        protocol_version: str = CLIENT_VERSION,
        source: str | None = None,
    ) -> McpClient:
        """A client with a live session (initialize must succeed), from loopback address ``source`` if given."""
        client = self.client(name, version, source)
        response = client.initialize(elicitation=elicitation, protocol_version=protocol_version)
        assert response.status_code == 200, (response.status_code, response.text)
        return client

    def close_clients(self) -> None:
        """Close every client's streams and connections (the server keeps running)."""
        clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    def stop(self) -> None:
        """Close the clients, SIGTERM the process group, wait, SIGKILL on timeout."""
        self.close_clients()
        stop_group(self.proc, STOP_TIMEOUT)
        self._log.close()


_SERVERS_KEY = pytest.StashKey[list]()


def _remember(request: pytest.FixtureRequest, server: GunicornServer) -> None:
    node = request.node
    node.stash.setdefault(_SERVERS_KEY, []).append(server)


@pytest.fixture(scope="session")
def _log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gunicorn-logs")


def _server_factory(request: pytest.FixtureRequest, log_dir: Path, gunicorn_args: tuple[str, ...] = ()) -> Iterator:
    """Yield ``start(app="wsgi:app", **settings)``, which starts a gunicorn for the test; stop them all after it."""
    servers: list[GunicornServer] = []

    def start(app: str = "wsgi:app", **settings: Any) -> GunicornServer:
        server = GunicornServer(settings, log_dir, gunicorn_args, app=app)
        servers.append(server)
        _remember(request, server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def start_server(request: pytest.FixtureRequest, _log_dir: Path) -> Iterator:
    """Factory: ``start_server(elicitation_timeout=1, ...)`` starts a gunicorn for this test."""
    yield from _server_factory(request, _log_dir)


@pytest.fixture(scope="session")
def _shared_server(_log_dir: Path) -> Iterator[GunicornServer]:
    server = GunicornServer(DEFAULT_SERVER_SETTINGS, _log_dir)
    yield server
    server.stop()


def _lend(request: pytest.FixtureRequest, shared: GunicornServer) -> Iterator[GunicornServer]:
    """Yield a session-wide server to one test; its clients are closed after the test."""
    _remember(request, shared)
    yield shared
    shared.close_clients()


@pytest.fixture
def server(request: pytest.FixtureRequest, _shared_server: GunicornServer) -> Iterator[GunicornServer]:
    """The shared gunicorn (default settings, 0.5 s keep-alive); clients close after each test."""
    yield from _lend(request, _shared_server)


@pytest.fixture
def client(server: GunicornServer) -> McpClient:
    """An initialized client with the elicitation capability on the shared server."""
    return server.session()


# -- access-log tracing ---------------------------------------------------------------------

#: gunicorn ``access_log_format`` of traced servers: one line per request, ``|``-separated
#: ``key=value`` fields; a header that was not there reads ``-``.
TRACE_FORMAT = "|".join(
    [
        "zemcp-trace",
        "pid=%(p)s",
        # The client's TCP port: two requests with one port came on one connection.
        "port=%({remote_port}e)s",
        "status=%(s)s",
        "http=%(m)s",
        "path=%(U)s",
        "mcp-method=%({mcp-method}i)s",
        "mcp-name=%({mcp-name}i)s",
        "version=%({mcp-protocol-version}i)s",
        "session-in=%({mcp-session-id}i)s",
        "session-out=%({mcp-session-id}o)s",
        "content-type=%({content-type}o)s",
        "tag=%({" + TAG_HEADER.lower() + "}i)s",
    ]
)


@dataclass(frozen=True)
class TraceRecord:
    """One request as a traced server's access log recorded it (``None`` for an absent header).

    Attributes:
        pid: the gunicorn worker process that served it.
        port: the client's TCP port of the connection it came on.
        status: the HTTP status.
        http: the HTTP method.
        path, mcp_method, mcp_name, version, session_in, session_out, content_type, tag: the
            path, the ``Mcp-Method``, ``Mcp-Name`` and ``MCP-Protocol-Version`` request headers,
            the ``Mcp-Session-Id`` request and response headers, the response ``Content-Type``,
            and the :data:`TAG_HEADER` request header.
    """

    pid: int
    port: int
    status: int
    http: str
    path: str
    mcp_method: str | None
    mcp_name: str | None
    version: str | None
    session_in: str | None
    session_out: str | None
    content_type: str | None
    tag: str | None


def trace_records(server: GunicornServer, since: int = 0) -> list[TraceRecord]:
    """The :data:`TRACE_FORMAT` lines of ``server``'s log after character ``since``, in log order.

    A request is logged when its response ended, so a record lands after its client read the
    end of the answer; use :func:`wait_trace` to wait for it.
    """
    records = []
    for line in server.log()[since:].splitlines():
        if not line.startswith("zemcp-trace|"):
            continue
        fields = dict(part.split("=", 1) for part in line.split("|")[1:])
        value = {key: (None if text == "-" else text) for key, text in fields.items()}
        records.append(
            TraceRecord(
                pid=int(fields["pid"].strip("<>")),
                port=int(fields["port"]),
                status=int(fields["status"]),
                http=fields["http"],
                path=fields["path"],
                mcp_method=value["mcp-method"],
                mcp_name=value["mcp-name"],
                version=value["version"],
                session_in=value["session-in"],
                session_out=value["session-out"],
                content_type=value["content-type"],
                tag=value["tag"],
            )
        )
    return records


def wait_trace(
    server: GunicornServer,
    since: int,
    count: int,
    deadline: float = 5.0,
    until: Callable[[TraceRecord], bool] | None = None,
) -> list[TraceRecord]:
    """Poll until at least ``count`` records follow ``since`` and, with ``until``, one of them
    satisfies it (bounded by ``deadline`` s); returns them all."""
    end = time.monotonic() + deadline
    while True:
        records = trace_records(server, since)
        done = len(records) >= count and (until is None or any(until(r) for r in records))
        if done or time.monotonic() > end:
            assert done, (
                f"expected {count} traced requests within {deadline} s (and one matching {until}), got {records}"
            )
            return records
        time.sleep(0.05)


@pytest.fixture
def start_traced_server(request: pytest.FixtureRequest, _log_dir: Path) -> Iterator:
    """Factory like ``start_server``, for a gunicorn whose access log uses :data:`TRACE_FORMAT`."""
    yield from _server_factory(request, _log_dir, ("--access-logformat", TRACE_FORMAT))


@pytest.fixture(scope="session")
def _shared_traced_server(_log_dir: Path) -> Iterator[GunicornServer]:
    server = GunicornServer(DEFAULT_SERVER_SETTINGS, _log_dir, ("--access-logformat", TRACE_FORMAT))
    yield server
    server.stop()


@pytest.fixture
def traced_server(request: pytest.FixtureRequest, _shared_traced_server: GunicornServer) -> Iterator[GunicornServer]:
    """A shared traced gunicorn (the ``server`` settings); read its requests with :func:`trace_records`."""
    yield from _lend(request, _shared_traced_server)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """On a failure, attach the tail of the log of each gunicorn the test used."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for server in item.stash.get(_SERVERS_KEY, []):
            try:
                lines = server.log().splitlines()[-80:]
            except (OSError, ValueError):
                continue
            report.sections.append((f"gunicorn {server.url} {server.env}", "\n".join(lines)))


@pytest.fixture(scope="session")
def _shared_redis() -> Iterator[RedisServer]:
    server = RedisServer(require_redis())
    yield server
    server.stop()


@pytest.fixture
def redis_server(_shared_redis: RedisServer) -> RedisServer:
    """The run's redis-server, with no keys left by an earlier test."""
    _shared_redis.flush()
    return _shared_redis


@pytest.fixture
def start_redis() -> Iterator[Callable[[], RedisServer]]:
    """Factory: a redis-server of this test's own (stopped at teardown)."""
    started: list[RedisServer] = []

    def start() -> RedisServer:
        server = RedisServer(require_redis())
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def ts_sdk1_modules() -> Path:
    """node_modules with Node 22, ``@modelcontextprotocol/sdk`` 1.x and undici (installed once, cached)."""
    return install_sdk1()


# -- markers by need ------------------------------------------------------------------------

#: The marker a test gets when it uses one of these fixtures (directly or through another):
#: what the fixture starts or installs. setup.cfg registers the markers; docs/contributing.md
#: says how to pick tests by them.
MARKING_FIXTURES: dict[str, frozenset[str]] = {
    # Every GunicornServer, of these fixtures or of a test module's own, logs to _log_dir; a
    # proxy stack's instances are gunicorns too.
    "gunicorn": frozenset({"_log_dir", "start_stack", "stack"}),
    "redis": frozenset({"redis_server", "start_redis", "_shared_redis"}),
    "node": frozenset({"ts_sdk1_modules", "node_modules"}),
    "browser": frozenset({"chromium"}),
    "proxy": frozenset({"start_stack", "stack"}),
}
#: Folders under tests/ whose every test starts the server in a process of its own: gunicorn
#: (through gunicorn.conf.py, ``zemcp run`` or a ``.ci`` scenario) or ``zemcp run`` over stdio.
SERVER_FOLDERS = frozenset({"integration", "functional"})
#: The parameter value of the fixtures that run a test once per state backend and, for this one,
#: take the run's redis-server with ``request.getfixturevalue``, where no fixture list shows it.
REDIS_BACKEND = "redis"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with what it needs (``gunicorn``, ``redis``, ``node``, ``browser``, ``proxy``).

    A test is marked by the fixtures it uses (:data:`MARKING_FIXTURES`), by its folder
    (:data:`SERVER_FOLDERS`), and by a :data:`REDIS_BACKEND` parameter. ``slow`` (a test that
    takes more than about 5 s on its own) is written on the test itself, where it was measured.
    """
    tests = Path(__file__).resolve().parent
    for item in items:
        needs = {
            marker for marker, fixtures in MARKING_FIXTURES.items() if fixtures & set(getattr(item, "fixturenames", ()))
        }
        path = item.path.resolve()
        if path.is_relative_to(tests) and path.relative_to(tests).parts[0] in SERVER_FOLDERS:
            needs.add("gunicorn")
        callspec = getattr(item, "callspec", None)
        if callspec is not None and REDIS_BACKEND in [v for v in callspec.params.values() if isinstance(v, str)]:
            needs.add("redis")
        for marker in sorted(needs):
            item.add_marker(marker)
