"""The tests' MCP clients: one of each protocol era, with the same method names, over any wire.

* :class:`HandshakeClient`: a session of the handshake era (``initialize``, ``Mcp-Session-Id``,
  questions pushed on the call's stream and answered by a POST of the client's response).
* :class:`ModernClient`: the stateless 2026-07-28 era (the ``params._meta`` envelope and the
  ``Mcp-Method``/``Mcp-Name`` headers on every request; a question ends the round with an
  ``InputRequiredResult`` and is answered by a retry carrying ``inputResponses`` and the
  ``requestState``).

Both take a :class:`~tests.support.wires.Wire` (or the URL of a server, for an
:class:`~tests.support.wires.HttpWire`) and offer ``initialize``, ``request``, ``rpc``,
``list_tools``, ``call_tool``, ``open_call``, ``answer``, ``post``, ``open_stream`` and
``close``. Responses are the wire's own type: ``requests.Response`` over HTTP, werkzeug's
``TestResponse`` in process, :class:`~tests.support.wires.DirectResponse` on the direct-write
path; event streams are :class:`~tests.support.sse.SseStream` readers.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

from tests.support.net import READ_TIMEOUT
from tests.support.sse import SseStream, sse_messages
from tests.support.wires import Headers, HttpWire, InProcessWire, Wire, is_event_stream

#: The newest handshake-era version the server speaks.
LATEST_VERSION = "2025-11-25"
#: The version the test client asks for unless a test says otherwise (the 2025-06-18 rules).
CLIENT_VERSION = "2025-06-18"
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
ACCEPT = "application/json, text/event-stream"
#: The stateless protocol revision (MCP 2026-07-28 basic/versioning, "modern").
MODERN_VERSION = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
#: Request header naming a request in the access log of a traced gunicorn (ignored by the server).
TAG_HEADER = "X-Zemcp-Test-Tag"
#: Every client capability a handler may ask with: elicitation, sampling and roots.
ALL_CAPABILITIES = {"elicitation": {}, "sampling": {}, "roots": {}}


def _wire(target: Wire | str, source: str | None = None) -> Wire:
    if isinstance(target, Wire):
        assert source is None, "a source address belongs to an HttpWire"
        return target
    return HttpWire(target, source)


def _merge(headers: dict[str, str | None], extra: Headers | None) -> dict[str, str | None]:
    """``headers`` with ``extra`` over them, names compared without case (None kept: it removes)."""
    for key, value in (extra or {}).items():
        for existing in [k for k in headers if k.lower() == key.lower()]:
            del headers[existing]
        headers[key] = value
    return headers


def status_code(response: Any) -> int:
    """The HTTP status of a response of any wire."""
    return int(response.status_code)


# -- the handshake era ----------------------------------------------------------------------


class HandshakeClient:
    """A handshake-era MCP client: one session, begun with :meth:`initialize`.

    Plain requests go on the wire's shared connection; every streaming request
    (:meth:`open_stream`, :meth:`open_call`, :meth:`get_stream`) gets a connection of its own,
    so an answer POST always travels on another connection than the stream it answers, and
    closing a stream really closes its connection.

    Args:
        target: the wire, or the URL of a server to reach over HTTP.
        name, version: the ``clientInfo`` sent with initialize.
        source: with a URL, the loopback address to connect from (another client to the server).
        headers: headers sent with every request (an ``Authorization`` header, say).

    Attributes:
        wire: the wire the requests travel on.
        fixed_headers: the ``headers`` given.
        session_id: the ``Mcp-Session-Id`` from initialize, or None.
        protocol_version: the negotiated version, sent as ``MCP-Protocol-Version``.
        init_response: the response to initialize.
        init_result: initialize's result, once it succeeded.
    """

    def __init__(
        self,
        target: Wire | str,
        name: str = "zemcp-tests",
        version: str = "1.0",
        *,
        source: str | None = None,
        headers: Headers | None = None,
    ):
        self.wire = _wire(target, source)
        self.name = name
        self.version = version
        self.fixed_headers = dict(headers or {})
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.init_response: Any = None
        self.init_result: dict[str, Any] = {}
        self._next_id = 0
        self._streams: list[SseStream] = []

    @property
    def url(self) -> str:
        """The endpoint (a URL over HTTP, a path in process); settable over HTTP."""
        return self.wire.url

    @url.setter
    def url(self, value: str) -> None:
        self.wire.url = value

    @property
    def http(self) -> Any:
        """The ``requests.Session`` of the plain requests (over HTTP only); settable, to place
        them on a connection that reached a chosen worker."""
        assert isinstance(self.wire, HttpWire), "only an HttpWire has a requests session"
        return self.wire.http

    @http.setter
    def http(self, value: Any) -> None:
        assert isinstance(self.wire, HttpWire), "only an HttpWire has a requests session"
        self.wire.http = value

    def new_id(self) -> int:
        """A request id not used before by this client."""
        self._next_id += 1
        return self._next_id

    def headers(self, extra: Headers | None = None, *, session: bool = True, version: bool = True) -> dict:
        """The headers of an MCP POST (with the client's fixed headers), plus ``extra`` (a value of
        None removes a header, the wire's defaults too)."""
        headers = _merge({"Content-Type": "application/json", "Accept": ACCEPT}, self.fixed_headers)
        if session and self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if version and self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return _merge(headers, extra)

    def post(
        self,
        message: Any = None,
        *,
        data: Any = None,
        headers: Headers | None = None,
        session: bool = True,
        version: bool = True,
        timeout: float = READ_TIMEOUT,
    ) -> Any:
        """POST one message (JSON-encoded) or raw ``data`` (bytes or text); the response is read in full.

        Args:
            headers: extra headers (None removes one).
            session, version: send ``Mcp-Session-Id`` and ``MCP-Protocol-Version`` when known.
            timeout: [seconds] the read timeout.
        """
        body = data if data is not None else json.dumps(message)
        if isinstance(body, str):
            body = body.encode("utf-8")
        return self.wire.send("POST", self.headers(headers, session=session, version=version), body, timeout=timeout)

    def _keep(self, opened: tuple[Any, SseStream | None]) -> tuple[Any, SseStream | None]:
        if opened[1] is not None:
            self._streams.append(opened[1])
        return opened

    def open_stream(
        self, message: dict, *, headers: Headers | None = None, timeout: float = READ_TIMEOUT
    ) -> tuple[Any, SseStream | None]:
        """POST ``message`` on a connection of its own, without waiting for the body.

        Returns:
            the response and, when it is ``text/event-stream``, a reader for it (closed with
            the client if still open).
        """
        body = json.dumps(message).encode("utf-8")
        return self._keep(self.wire.open("POST", self.headers(headers), body, timeout=timeout))

    def get_stream(
        self, last_event_id: str | None = None, *, headers: Headers | None = None, timeout: float = READ_TIMEOUT
    ) -> tuple[Any, SseStream | None]:
        """GET the endpoint on a connection of its own: the session's standalone stream, or with
        ``last_event_id`` the resumption of a stream.

        Returns:
            the response and, when it is ``text/event-stream``, a reader for it.
        """
        extra: dict[str, str | None] = {"Accept": "text/event-stream", "Content-Type": None}
        if last_event_id:
            extra["Last-Event-ID"] = last_event_id
        return self._keep(self.wire.open("GET", self.headers({**extra, **(headers or {})}), timeout=timeout))

    # -- lifecycle ------------------------------------------------------------------------

    def initialize(
        self,
        *,
        elicitation: bool = True,
        protocol_version: str = CLIENT_VERSION,
        capabilities: dict | None = None,
        headers: Headers | None = None,
        initialized: bool = True,
    ) -> Any:
        """Send initialize; on 200 keep the session id and negotiated version.

        Args:
            elicitation: declare ``capabilities.elicitation: {}``.
            protocol_version: the version asked for.
            capabilities: the whole capabilities object (overrides ``elicitation``).
            headers: extra request headers.
            initialized: send ``notifications/initialized`` after a successful initialize
                (it must be accepted with 202).

        Returns:
            the response to initialize.
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
        if status_code(response) == 200:
            self.session_id = response.headers["Mcp-Session-Id"]
            self.init_result = self._reply(response, message["id"])["result"]
            self.protocol_version = self.init_result["protocolVersion"]
            if initialized:
                self.notify_initialized()
        return response

    def notify_initialized(self) -> None:
        """Send ``notifications/initialized``, which must be accepted with 202 and no body."""
        note = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert status_code(note) == 202 and self.wire.text(note) == "", (status_code(note), self.wire.text(note))

    def request(self, method: str, params: dict | None = None, **kwargs: Any) -> Any:
        """POST a request with a fresh id (read in full); ``kwargs`` as for :meth:`post`."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.new_id(), "method": method}
        if params is not None:
            message["params"] = params
        return self.post(message, **kwargs)

    def _answer_to(self, method: str, params: dict | None) -> dict:
        """The JSON-RPC response to a request, which must come as HTTP 200 application/json."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.new_id(), "method": method}
        if params is not None:
            message["params"] = params
        response = self.post(message)
        assert status_code(response) == 200, (status_code(response), self.wire.text(response))
        assert response.headers["Content-Type"].startswith("application/json"), response.headers
        body = self.wire.json(response)
        assert body.get("id") == message["id"], (message["id"], body)
        return body

    def _reply(self, response: Any, request_id: Any) -> dict:
        """The JSON-RPC response to ``request_id`` in ``response``: its JSON body, or the message
        of its event stream that answers it (as other servers than zemcp answer plain requests)."""
        if not is_event_stream(response.headers.get("Content-Type")):
            body: dict = self.wire.json(response)
            return body
        (reply,) = [
            m for m in sse_messages(self.wire.text(response)) if m.get("id") == request_id and "method" not in m
        ]
        return reply

    def result(self, method: str, params: dict | None = None) -> dict:
        """A request that must succeed, answered as JSON or as an event stream (any server: the
        official SDK's answers plain requests with a stream); returns its ``result``.
        :meth:`rpc` is the check that zemcp answers JSON."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.new_id(), "method": method}
        if params is not None:
            message["params"] = params
        response = self.post(message)
        assert status_code(response) == 200, (status_code(response), self.wire.text(response))
        reply = self._reply(response, message["id"])
        assert "result" in reply, reply
        return reply["result"]

    def rpc(self, method: str, params: dict | None = None) -> dict:
        """A request that must succeed with a JSON answer to its id; returns its ``result``."""
        body = self._answer_to(method, params)
        assert "result" in body, body
        return body["result"]

    def rpc_error(self, method: str, params: dict | None = None) -> dict:
        """A request that must fail with a JSON-RPC error to its id in an HTTP 200 JSON answer;
        returns the ``error``."""
        body = self._answer_to(method, params)
        assert "error" in body, body
        return body["error"]

    def delete(self, session_id: str | None = None) -> Any:
        """DELETE the session (this client's unless ``session_id`` is given)."""
        return self.wire.send("DELETE", {**self.fixed_headers, "Mcp-Session-Id": session_id or self.session_id})

    # -- tools ----------------------------------------------------------------------------

    def list_tools(self) -> list[dict]:
        """``tools/list`` (one page), which must succeed; returns its tools."""
        return self.rpc("tools/list")["tools"]

    def call_message(self, arguments: dict | None = None, name: str = "ze_execute", meta: dict | None = None) -> dict:
        """A tools/call message with a fresh id (``meta`` becomes ``params._meta``)."""
        params: dict[str, Any] = {"name": name, "arguments": arguments if arguments is not None else {}}
        if meta is not None:
            params["_meta"] = meta
        return {"jsonrpc": "2.0", "id": self.new_id(), "method": "tools/call", "params": params}

    def call_tool(
        self, name: str, arguments: dict | None = None, *, meta: dict | None = None, headers: Headers | None = None
    ) -> tuple[int, Any]:
        """Call tool ``name``, the response read in full; returns the request's id and the response."""
        message = self.call_message(arguments, name, meta)
        return message["id"], self.post(message, headers=headers)

    def open_call(
        self, name: str, arguments: dict | None = None, *, meta: dict | None = None, headers: Headers | None = None
    ) -> tuple[int, Any, SseStream | None]:
        """Call tool ``name`` on a connection of its own (see :meth:`open_stream`).

        Returns:
            the request's id, the response, and its stream reader (None for a JSON answer).
        """
        message = self.call_message(arguments, name, meta)
        response, stream = self.open_stream(message, headers=headers)
        return message["id"], response, stream

    def execute(self, command: str) -> dict:
        """Run one ze_execute command that must answer plain JSON; returns the CallToolResult."""
        response = self.post(self.call_message({"command": command}))
        assert status_code(response) == 200, (status_code(response), self.wire.text(response))
        assert response.headers["Content-Type"].startswith("application/json"), response.headers
        return self.wire.json(response)["result"]

    def command_text(self, command: str) -> str:
        """The text output of a command that must succeed."""
        result = self.execute(command)
        assert result["isError"] is False, result
        return result["content"][0]["text"]

    def start_elicitation(self, *, timeout: float = READ_TIMEOUT) -> tuple[dict, Any, SseStream, dict]:
        """Call ze_execute without a command and read the elicitation request.

        Returns:
            the tools/call message, the response, its stream and the elicitation/create request.
        """
        call = self.call_message({})
        response, stream = self.open_stream(call, timeout=timeout)
        assert status_code(response) == 200, (status_code(response), self.wire.text(response))
        assert stream is not None, f"expected text/event-stream, got {response.headers.get('Content-Type')}"
        first = stream.next_message()
        assert first is not None and first.get("method") == "elicitation/create", first
        return call, response, stream, first

    def answer(
        self, request_id: Any, result: dict | None = None, *, error: dict | None = None, session_id: str | None = None
    ) -> Any:
        """POST the client's response to a server request (on the plain connection).

        Args:
            request_id: the id of the server's request.
            result: the result (when ``error`` is None).
            error: a JSON-RPC error object instead of a result.
            session_id: another session's id to send it under.
        """
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            message["error"] = error
        else:
            message["result"] = result
        extra = {"Mcp-Session-Id": session_id} if session_id else None
        return self.post(message, headers=extra)

    def accept(self, request_id: Any, content: dict) -> Any:
        """Answer an elicitation with action accept and ``content``."""
        return self.answer(request_id, {"action": "accept", "content": content})

    # -- commands that report server state ------------------------------------------------

    def status(self) -> dict:
        """``server status`` parsed into numbers (sessions, pending, caps, threads, pid), and its ``text``."""
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
        """Poll ``server status`` until the process has ``expected`` pending elicitations
        (for ``deadline`` seconds at most); returns the last status."""
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
        """Close every stream still open and the wire's kept connection."""
        for stream in self._streams:
            stream.close()
        self.wire.close()


def handshake_session(
    target: Wire | str, *, name: str = "zemcp-tests", version: str = "1.0", **options: Any
) -> HandshakeClient:
    """A :class:`HandshakeClient` whose initialize succeeded (200) at the version it asked for.

    Args:
        target: the wire, or a server's URL.
        name, version: the ``clientInfo``.
        options: those of :meth:`HandshakeClient.initialize`.
    """
    client = HandshakeClient(target, name, version)
    response = client.initialize(**options)
    assert status_code(response) == 200, (status_code(response), client.wire.text(response))
    asked = options.get("protocol_version", CLIENT_VERSION)
    assert client.protocol_version == asked, f"asked for {asked}, the server answered {client.protocol_version}"
    return client


def inprocess_session(
    app: Any, *, path: str = "/mcp", remote_addr: str | None = None, **options: Any
) -> HandshakeClient:
    """:func:`handshake_session` with ``app`` in this process, over an
    :class:`~tests.support.wires.InProcessWire` (``path`` and ``remote_addr`` are its own);
    ``options`` as for :func:`handshake_session`."""
    return handshake_session(InProcessWire(app, path, remote_addr), **options)


# -- the 2026-07-28 era ---------------------------------------------------------------------


def envelope(capabilities: dict, name: str = "zemcp-modern-tests", version: str = "1.0") -> dict:
    """The 2026-07-28 per-request envelope (``params._meta``): this version, ``capabilities``
    and the ``clientInfo`` of ``name`` and ``version``."""
    return {
        META_VERSION: MODERN_VERSION,
        META_CAPABILITIES: capabilities,
        META_CLIENT_INFO: {"name": name, "version": version},
    }


class ModernClient:
    """A 2026-07-28 client: no session, every request stands alone.

    Every request carries the ``params._meta`` envelope (protocol version, client capabilities,
    client info) and the ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers, and
    travels on a connection of its own (``Connection: close``), so consecutive rounds of one call
    may reach different gunicorn workers. Nothing is remembered between requests except the id
    counter. Safe to share between threads.

    Args:
        target: the wire, or the URL of a server to reach over HTTP.
        name, version: the ``clientInfo`` sent with every request.
        capabilities: the ``clientCapabilities`` sent with every request (default: elicitation).

    Attributes:
        wire, name, version, capabilities: as given.
    """

    def __init__(
        self,
        target: Wire | str,
        name: str = "zemcp-modern-tests",
        version: str = "1.0",
        capabilities: dict | None = None,
    ):
        self.wire = _wire(target)
        self.name = name
        self.version = version
        self.capabilities = {"elicitation": {}} if capabilities is None else capabilities
        self._ids = iter(range(1, 1 << 62))
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The endpoint (a URL over HTTP, a path in process)."""
        return self.wire.url

    def new_id(self) -> int:
        """A request id not used before by this client."""
        with self._lock:
            return next(self._ids)

    def meta(self, capabilities: dict | None = None) -> dict:
        """The per-request envelope for ``params._meta`` (``capabilities`` instead of the client's)."""
        return envelope(self.capabilities if capabilities is None else capabilities, self.name, self.version)

    def message(
        self,
        method: str,
        params: dict | None = None,
        *,
        capabilities: dict | None = None,
        meta: dict | None = None,
        envelope: bool = True,
    ) -> dict:
        """A request with a fresh id.

        Args:
            params: the params besides ``_meta``.
            capabilities: the ``clientCapabilities`` of this request, instead of the client's.
            meta: entries added to (or replacing in) the envelope.
            envelope: False sends ``params`` exactly as given (no ``_meta`` added).
        """
        params = dict(params or {})
        if envelope:
            params["_meta"] = {**self.meta(capabilities), **(meta or {})}
        return {"jsonrpc": "2.0", "id": self.new_id(), "method": method, "params": params}

    def headers(self, message: dict, extra: Headers | None = None) -> dict:
        """The headers of a POST of ``message`` (standard MCP headers from its body: ``Mcp-Name``
        mirrors a tool's or prompt's name, a URI or a task id when it is a string), plus ``extra``
        (a value of None removes a header)."""
        headers: dict[str, str | None] = {
            "Content-Type": "application/json",
            "Accept": ACCEPT,
            "Connection": "close",
            "MCP-Protocol-Version": MODERN_VERSION,
            "Mcp-Method": message["method"],
        }
        params = message.get("params") or {}
        if message["method"] in ("tools/call", "prompts/get"):
            name = params.get("name")
        elif message["method"] == "resources/read":
            name = params.get("uri")
        elif message["method"].startswith("tasks/"):
            name = params.get("taskId")
        else:
            name = None
        # Only a string has a header form; without Mcp-Name the method's own check answers.
        if isinstance(name, str):
            headers["Mcp-Name"] = name
        return _merge(headers, extra)

    def post(self, message: dict, *, headers: Headers | None = None, timeout: float = READ_TIMEOUT) -> Any:
        """POST ``message`` on a connection of its own; the response is read in full."""
        body = json.dumps(message).encode("utf-8")
        return self.wire.send("POST", self.headers(message, headers), body, own=True, timeout=timeout)

    def open_stream(
        self, message: dict, *, headers: Headers | None = None, timeout: float = READ_TIMEOUT
    ) -> tuple[Any, SseStream | None]:
        """POST ``message`` without waiting for the body: the response and, when it is
        ``text/event-stream``, a reader for it (the caller closes it)."""
        body = json.dumps(message).encode("utf-8")
        return self.wire.open("POST", self.headers(message, headers), body, timeout=timeout)

    def request(
        self,
        method: str,
        params: dict | None = None,
        *,
        headers: Headers | None = None,
        capabilities: dict | None = None,
        meta: dict | None = None,
        envelope: bool = True,
    ) -> Any:
        """POST a request (see :meth:`message` for the options), read in full."""
        message = self.message(method, params, capabilities=capabilities, meta=meta, envelope=envelope)
        return self.post(message, headers=headers)

    def reply(self, response: Any, request_id: Any) -> dict:
        """The JSON-RPC response to ``request_id`` in a JSON or ``text/event-stream`` body."""
        kind = response.headers.get("Content-Type", "")
        if is_event_stream(kind):
            messages = sse_messages(self.wire.text(response))
        else:
            assert kind.startswith("application/json"), (status_code(response), kind, self.wire.text(response))
            messages = [self.wire.json(response)]
        replies = [m for m in messages if "method" not in m and m.get("id") == request_id]
        assert len(replies) == 1, f"expected one response to id {request_id!r}, got {messages}"
        return replies[0]

    def result(self, response: Any) -> dict:
        """The ``result`` of a JSON response (of this client's wire); fails on anything else."""
        body = self.wire.json(response)
        assert "result" in body, body
        return body["result"]

    def error(self, response: Any, status: int, code: int) -> dict:
        """The JSON-RPC ``error`` of a JSON response, which must have HTTP ``status`` and error ``code``."""
        body = self.wire.json(response)
        assert status_code(response) == status and body["error"]["code"] == code, (status_code(response), body)
        return body["error"]

    def rpc(self, method: str, params: dict | None = None) -> dict:
        """A request that must answer HTTP 200 with a result; returns the result."""
        message = self.message(method, params)
        response = self.post(message)
        assert status_code(response) == 200, (status_code(response), self.wire.text(response))
        reply = self.reply(response, message["id"])
        assert "result" in reply, reply
        return reply["result"]

    def initialize(self) -> dict:
        """``server/discover``, which this era has in place of initialize: the server's versions,
        capabilities and info (the request must succeed). Nothing is kept."""
        return self.rpc("server/discover")

    def list_tools(self) -> list[dict]:
        """``tools/list`` (one page), which must succeed; returns its tools."""
        return self.rpc("tools/list")["tools"]

    def tool_message(
        self,
        name: str,
        arguments: dict | None = None,
        *,
        input_responses: dict | None = None,
        request_state: Any = None,
        capabilities: dict | None = None,
        meta: dict | None = None,
    ) -> dict:
        """A tools/call message of tool ``name`` (a retry with ``input_responses`` and ``request_state``)."""
        params: dict[str, Any] = {"name": name, "arguments": arguments if arguments is not None else {}}
        if input_responses is not None:
            params["inputResponses"] = input_responses
        if request_state is not None:
            params["requestState"] = request_state
        return self.message("tools/call", params, capabilities=capabilities, meta=meta)

    def call_tool(
        self, name: str, arguments: dict | None = None, *, headers: Headers | None = None, **options: Any
    ) -> tuple[int, Any]:
        """One tools/call round of tool ``name``, read in full; ``options`` as for
        :meth:`tool_message`. Returns the request's id and the response."""
        message = self.tool_message(name, arguments, **options)
        return message["id"], self.post(message, headers=headers)

    def open_call(
        self, name: str, arguments: dict | None = None, *, headers: Headers | None = None, **options: Any
    ) -> tuple[int, Any, SseStream | None]:
        """One tools/call round of tool ``name`` without waiting for the body (see :meth:`open_stream`).

        Returns:
            the request's id, the response, and its stream reader (None for a JSON answer).
        """
        message = self.tool_message(name, arguments, **options)
        response, stream = self.open_stream(message, headers=headers)
        return message["id"], response, stream

    def answer(
        self,
        name: str,
        first: dict,
        responses: dict,
        arguments: dict | None = None,
        *,
        headers: Headers | None = None,
        **options: Any,
    ) -> tuple[int, Any]:
        """The retry of tool ``name`` answering the ``InputRequiredResult`` ``first``: its
        ``requestState`` and ``responses`` (``inputResponses``: key -> answer). Returns the
        request's id and the response, read in full."""
        return self.call_tool(
            name, arguments, headers=headers, input_responses=responses, request_state=first["requestState"], **options
        )

    def call(
        self,
        arguments: dict | None = None,
        *,
        name: str = "ze_execute",
        input_responses: dict | None = None,
        request_state: Any = None,
        headers: Headers | None = None,
    ) -> tuple[Any, dict]:
        """One tools/call round (ze_execute unless ``name`` says otherwise); returns the response
        and the JSON-RPC response to it."""
        message = self.tool_message(name, arguments, input_responses=input_responses, request_state=request_state)
        response = self.post(message, headers=headers)
        return response, self.reply(response, message["id"])

    def call_result(self, arguments: dict | None = None, **kwargs: Any) -> dict:
        """A tools/call round (as :meth:`call`) that must answer HTTP 200 with a result and no
        session; returns the result."""
        response, reply = self.call(arguments, **kwargs)
        assert status_code(response) == 200, (status_code(response), self.wire.text(response))
        assert "result" in reply, reply
        assert "Mcp-Session-Id" not in response.headers, response.headers
        return reply["result"]

    def ask_command(self, *, headers: Headers | None = None) -> dict:
        """Round 1 of ze_execute without a command: must end ``input_required`` asking for ``command``."""
        result = self.call_result({}, headers=headers)
        assert result.get("resultType") == "input_required", result
        assert list(result["inputRequests"]) == ["command"], result
        assert result["inputRequests"]["command"]["method"] == "elicitation/create", result
        assert isinstance(result.get("requestState"), str) and result["requestState"], result
        return result

    def answer_command(self, first: dict, command: str, *, headers: Headers | None = None) -> dict:
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

    def close(self) -> None:
        """Close the wire's kept connection (the client's own requests keep none)."""
        self.wire.close()


def inprocess_modern(app: Any, *, remote_addr: str | None = None, **options: Any) -> ModernClient:
    """A :class:`ModernClient` of ``app`` in this process, over an
    :class:`~tests.support.wires.InProcessWire` (``remote_addr`` is its own), declaring
    :data:`ALL_CAPABILITIES` unless ``options`` (those of :class:`ModernClient`) say otherwise."""
    options.setdefault("capabilities", ALL_CAPABILITIES)
    return ModernClient(InProcessWire(app, remote_addr=remote_addr), **options)
