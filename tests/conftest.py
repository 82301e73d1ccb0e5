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
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.processes import stop_group

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
        events: every event read so far, as ``{"event": name, "data": parsed JSON}``.
        comments: every comment line read so far (without the leading ``:``).
        ended: True once the server ended the body.
    """

    def __init__(self, response: requests.Response, http: requests.Session):
        self.response = response
        self._http = http
        self._chunks = response.iter_content(chunk_size=None)
        self._buffer = b""
        self.events: list[dict] = []
        self.comments: list[str] = []
        self.ended = False

    def _line(self) -> bytes | None:
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line, self._buffer = self._buffer[:newline], self._buffer[newline + 1:]
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
                if data:
                    event = {"event": name or "message", "data": json.loads("\n".join(data))}
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
            # id: and retry: are not used by this server; ignore them as SSE says.

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
    """

    def __init__(self, url: str, name: str = "zemcp-tests", version: str = "1.0"):
        self.url = url
        self.name = name
        self.version = version
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.init_response: requests.Response | None = None
        self.http = requests.Session()
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

    def post(self, message: Any = None, *, data: Any = None, headers: dict | None = None, session: bool = True,
             version: bool = True, timeout: float = READ_TIMEOUT) -> requests.Response:
        """POST one message (JSON-encoded) or raw ``data``; the response is read in full."""
        body = data if data is not None else json.dumps(message)
        return self.http.post(self.url, data=body, headers=self.headers(headers, session=session, version=version),
                              timeout=(CONNECT_TIMEOUT, timeout))

    def open_stream(self, message: dict, *, headers: dict | None = None,
                    timeout: float = READ_TIMEOUT) -> tuple[requests.Response, SseStream | None]:
        """POST ``message`` on a connection of its own with ``stream=True``.

        Returns:
            the response and, when it is ``text/event-stream``, a reader for it (closed at
            the end of the test if still open).
        """
        http = requests.Session()
        response = http.post(self.url, data=json.dumps(message), headers=self.headers(headers),
                             timeout=(CONNECT_TIMEOUT, timeout), stream=True)
        if response.headers.get("Content-Type", "").startswith("text/event-stream"):
            stream = SseStream(response, http)
            self._streams.append(stream)
            return response, stream
        _ = response.content  # read it all, then free the connection
        http.close()
        return response, None

    # -- lifecycle ------------------------------------------------------------------------

    def initialize(self, *, elicitation: bool = True, protocol_version: str = CLIENT_VERSION,
                   capabilities: dict | None = None, headers: dict | None = None,
                   initialized: bool = True) -> requests.Response:
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
            "jsonrpc": "2.0", "id": self.new_id(), "method": "initialize",
            "params": {"protocolVersion": protocol_version, "capabilities": capabilities,
                       "clientInfo": {"name": self.name, "version": self.version}},
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
        return self.http.delete(self.url, headers={"Mcp-Session-Id": session_id or self.session_id},
                                timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))

    # -- tools ----------------------------------------------------------------------------

    def call_message(self, arguments: dict | None = None, name: str = "ze_execute") -> dict:
        """A tools/call message with a fresh id."""
        return {"jsonrpc": "2.0", "id": self.new_id(), "method": "tools/call",
                "params": {"name": name, "arguments": arguments if arguments is not None else {}}}

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
        assert stream is not None, f"expected text/event-stream, got {response.headers.get('Content-Type')}: {response.text}"
        first = stream.next_message()
        assert first is not None and first.get("method") == "elicitation/create", first
        return call, response, stream, first

    def answer(self, request_id: Any, result: dict | None = None, *, error: dict | None = None,
               session_id: str | None = None) -> requests.Response:
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
            "threads_reserved": r"^thread budget: .* \+ (\d+) reserved$",
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
                    f"{status['text']}")
                return status
            time.sleep(0.1)

    def close(self) -> None:
        """Close every stream still open and the plain connection."""
        for stream in self._streams:
            stream.close()
        self.http.close()


# -- gunicorn ---------------------------------------------------------------------------


class GunicornServer:
    """``gunicorn -c gunicorn.conf.py wsgi:app`` in its own process group on a free port.

    Attributes:
        port: the TCP port on 127.0.0.1.
        url: the MCP endpoint URL.
        env: the ZEMCP_* variables it was started with.
        log_path: file receiving gunicorn's stdout and stderr (access and error logs).
    """

    def __init__(self, settings: dict[str, Any], log_dir: Path):
        self.port = free_port()
        self.base = f"http://{HOST}:{self.port}"
        self.url = f"{self.base}/mcp"
        self.env = {"ZEMCP_" + key.upper(): str(value) for key, value in settings.items()}
        self.env["ZEMCP_BIND"] = f"{HOST}:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZEMCP_")}
        env.update(self.env)
        env["PYTHONUNBUFFERED"] = "1"
        fd, name = tempfile.mkstemp(prefix=f"gunicorn-{self.port}-", suffix=".log", dir=log_dir)
        self.log_path = Path(name)
        self._log = os.fdopen(fd, "wb")
        self._clients: list[McpClient] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"],
            cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
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
        pytest.fail(f"gunicorn did not accept connections on {HOST}:{self.port} within {START_TIMEOUT} s:\n{self.log()}")

    def log(self) -> str:
        """Everything gunicorn wrote so far (it writes to the file directly)."""
        return self.log_path.read_text(errors="replace")

    def client(self, name: str = "zemcp-tests", version: str = "1.0") -> McpClient:
        """A new, uninitialized client of this server (closed when the server stops)."""
        client = McpClient(self.url, name, version)
        self._clients.append(client)
        return client

    def session(self, *, elicitation: bool = True, name: str = "zemcp-tests", version: str = "1.0",
                protocol_version: str = CLIENT_VERSION) -> McpClient:
        """A client with a live session (initialize must succeed)."""
        client = self.client(name, version)
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


@pytest.fixture
def start_server(request: pytest.FixtureRequest, _log_dir: Path) -> Iterator:
    """Factory: ``start_server(elicitation_timeout=1, ...)`` starts a gunicorn for this test."""
    servers: list[GunicornServer] = []

    def start(**settings: Any) -> GunicornServer:
        server = GunicornServer(settings, _log_dir)
        servers.append(server)
        _remember(request, server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def _shared_server(_log_dir: Path) -> Iterator[GunicornServer]:
    server = GunicornServer(DEFAULT_SERVER_SETTINGS, _log_dir)
    yield server
    server.stop()


@pytest.fixture
def server(request: pytest.FixtureRequest, _shared_server: GunicornServer) -> Iterator[GunicornServer]:
    """The shared gunicorn (default settings, 0.5 s keep-alive); clients close after each test."""
    _remember(request, _shared_server)
    yield _shared_server
    _shared_server.close_clients()


@pytest.fixture
def client(server: GunicornServer) -> McpClient:
    """An initialized client with the elicitation capability on the shared server."""
    return server.session()


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
