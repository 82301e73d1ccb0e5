"""The MCP server core: lifecycle, method dispatch and tool calls, independent of HTTP.

Implements MCP basic/lifecycle (``initialize``, version negotiation, ``ping``), basic/utilities
cancellation (``notifications/cancelled``) and server/tools (``tools/list``, ``tools/call``)
for protocol versions 2024-11-05, 2025-03-26 and 2025-06-18. A transport (see
:mod:`zemcp.transport`) parses HTTP, then calls :meth:`Server.initialize` or
:meth:`Server.handle` and turns the outcome into a response.

Tool handlers run on a bounded thread pool created once per process, so the HTTP thread can
tell "plain JSON answer" from "the handler is streaming" (see :mod:`zemcp.sinks`).
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from zemcp import __version__, jsonrpc
from zemcp.config import Settings
from zemcp.correlation import CorrelationTable
from zemcp.elicitation import ClientDisconnected, ElicitAborted, RequestCancelled, SessionEnded
from zemcp.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, ProtocolError
from zemcp.session import Call, Session, SessionRegistry, fingerprint
from zemcp.sinks import ReplySink
from zemcp.context import Context
from zemcp.tools import Tool, ToolRegistry

log = logging.getLogger("zemcp.server")

#: Protocol versions served, preferred first (MCP basic/lifecycle, "Version Negotiation").
SUPPORTED_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
LATEST_VERSION = SUPPORTED_VERSIONS[0]


class AlreadyInitialized(Exception):
    """``initialize`` arrived with the id of a live session (HTTP 400, no session created)."""


class Server:
    """An MCP server: tools, sessions and the pending elicitations of one process.

    Args:
        name: ``serverInfo.name``.
        version: ``serverInfo.version``.
        instructions: optional ``instructions`` returned by initialize.
        settings: limits and timeouts; ``Settings.from_env()`` when omitted.
    """

    def __init__(self, name: str, version: str = "0.0.0", *, instructions: str | None = None,
                 settings: Settings | None = None):
        self.name = name
        self.version = version
        self.instructions = instructions
        self.settings = settings if settings is not None else Settings.from_env()
        self.tools = ToolRegistry()
        self.pending = CorrelationTable(self.settings.pending_budget, self.settings.max_pending_per_session)
        self.sessions = SessionRegistry(self.settings.max_sessions, self.settings.session_ttl, self._session_ended)
        # One worker per gunicorn thread: each thread waits on at most one handler.
        self._pool = ThreadPoolExecutor(max_workers=self.settings.threads, thread_name_prefix="zemcp-handler")
        self.started = time.time()
        self._methods: dict[str, Callable[[Session, jsonrpc.Request], Any]] = {
            "ping": lambda session, request: {},
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
        }

    def tool(self, name: str | None = None, *, description: str | None = None, input_schema: dict | None = None,
             title: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator registering a function as a tool.

        Args:
            name: the tool name; the function's name when omitted.
            description: shown to the model; the docstring when omitted.
            input_schema: JSON Schema of the arguments; ``{"type": "object"}`` when omitted.
            title: optional display name.
        Returns:
            the decorator, which returns the function unchanged.
        Raises:
            ValueError: a bad name, a taken name, or an input schema that is not an object schema.
        """

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            self.tools.add(Tool(
                name=name or func.__name__,
                handler=func,
                description=description or inspect_doc(func),
                input_schema=input_schema if input_schema is not None else {"type": "object"},
                title=title,
            ))
            return func

        return register

    # -- lifecycle ---------------------------------------------------------------------

    def check_protocol_header(self, value: str | None) -> None:
        """Check an ``MCP-Protocol-Version`` request header (absent is accepted).

        Raises:
            ProtocolError: the value is not a version this server supports.
        """
        if value is not None and value not in SUPPORTED_VERSIONS:
            raise ProtocolError(
                INVALID_REQUEST,
                f"Bad Request: unsupported MCP-Protocol-Version {value!r}; this server supports "
                f"{', '.join(SUPPORTED_VERSIONS)} (initialize negotiates one)",
            )

    def initialize(self, request: jsonrpc.Request, session_id: str | None) -> tuple[Session, dict]:
        """Handle ``initialize``: negotiate the version and create a session.

        Args:
            request: the initialize request.
            session_id: the ``Mcp-Session-Id`` it carried, if any.
        Returns:
            the new session and the JSON-RPC response.
        Raises:
            AlreadyInitialized: ``session_id`` names a live session.
            ProtocolError: malformed params.
            SessionLimitReached: the session cap is reached.
        """
        if session_id is not None and session_id in self.sessions:
            raise AlreadyInitialized(
                "Bad Request: this session is already initialized; to start a new session, send "
                "initialize without the Mcp-Session-Id header"
            )
        params = request.params
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: initialize needs params.protocolVersion (a string)", request.id)
        capabilities = params.get("capabilities", {})
        client_info = params.get("clientInfo", {})
        if not isinstance(capabilities, dict) or not isinstance(client_info, dict):
            raise ProtocolError(
                INVALID_PARAMS, "Invalid params: capabilities and clientInfo must be objects", request.id
            )
        version = requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION
        session = self.sessions.create(version, client_info, capabilities)
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": self.name, "version": self.version},
        }
        if self.instructions:
            result["instructions"] = self.instructions
        log.info("session %s initialized: client %s %s, protocol %s, elicitation %s",
                 fingerprint(session.id), client_info.get("name"), client_info.get("version"), version,
                 "yes" if session.client_supports_elicit() else "no")
        return session, jsonrpc.result(request.id, result)

    def end_session(self, session_id: str) -> bool:
        """End a session at the client's request (DELETE); False when it is not live."""
        return self.sessions.end(session_id, "deleted by the client")

    def _session_ended(self, session: Session, why: str) -> None:
        reason = SessionEnded(why)
        for call in session.calls():
            call.abort(reason)
        n = self.pending.abandon(lambda p: p.session_id == session.id, reason)
        log.info("session %s ended (%s); %d pending elicitation(s) ended", fingerprint(session.id), why, n)

    # -- messages ----------------------------------------------------------------------

    def handle(self, session: Session, message: jsonrpc.Message) -> dict | ReplySink | None:
        """Handle one message of a live session.

        Returns:
            None for a notification or response (the transport answers 202); a dict for a
            request answered at once (a JSON-RPC response); a :class:`ReplySink` for a
            tools/call, whose :meth:`ReplySink.first` tells JSON from stream.
        """
        if isinstance(message, jsonrpc.Response):
            self.pending.resolve(session.id, message)
            return None
        if isinstance(message, jsonrpc.Notification):
            if message.method == "notifications/cancelled":
                self._cancel(session, message.params)
            return None
        method = self._methods.get(message.method)
        if method is None:
            if message.method == "initialize":
                return jsonrpc.error(message.id, INVALID_REQUEST, "Invalid Request: this session is already initialized")
            return jsonrpc.error(message.id, METHOD_NOT_FOUND, f"Method not found: {message.method}")
        try:
            outcome = method(session, message)
        except ProtocolError as exc:
            return jsonrpc.error(message.id, exc.code, exc.message, exc.data)
        return outcome if isinstance(outcome, ReplySink) else jsonrpc.result(message.id, outcome)

    def _cancel(self, session: Session, params: dict) -> None:
        # Invalid or unknown ids are ignored, as basic/utilities/cancellation allows.
        request_id, reason = params.get("requestId"), params.get("reason")
        if not jsonrpc.valid_id(request_id):
            return
        call = session.call(request_id)
        if call is not None:
            self._abort(call, RequestCancelled(reason if isinstance(reason, str) else None))

    def _abort(self, call: Call, reason: ElicitAborted) -> None:
        if call.abort(reason):
            self.pending.abandon(lambda p: p.call is call, reason)

    def _tools_list(self, session: Session, request: jsonrpc.Request) -> dict:
        return {"tools": self.tools.definitions()}

    def _tools_call(self, session: Session, request: jsonrpc.Request) -> ReplySink:
        name = request.params.get("name")
        arguments = request.params.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(name, str):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: tools/call needs params.name (a string)")
        tool = self.tools.get(name)
        if tool is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {name!r}; tools/list names the available tools")
        if not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: params.arguments must be an object")
        problem = tool.check_arguments(arguments)
        if problem is not None:
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: {problem}")
        sink = ReplySink()
        try:
            call = session.begin(request.id, sink)
        except ValueError as exc:
            raise ProtocolError(INVALID_REQUEST, f"Invalid Request: {exc}") from None
        sink.on_close(lambda: None if sink.finished else self._abort(call, ClientDisconnected()))
        self._pool.submit(self._run, tool, arguments, call)
        return sink

    def _run(self, tool: Tool, arguments: dict, call: Call) -> None:
        response: dict | None = None
        try:
            result = tool.run(arguments, Context(call, self.pending, self.settings.elicitation_timeout))
            if not call.cancelled:
                response = jsonrpc.result(call.request_id, result)
        except ElicitAborted as exc:
            # No response after a cancel (MCP basic/utilities/cancellation); otherwise the
            # session ended or the client left, and the error explains it to whoever reads.
            if not isinstance(exc, RequestCancelled):
                response = jsonrpc.result(call.request_id, {"content": [{"type": "text", "text": str(exc)}], "isError": True})
        except Exception:
            log.exception("tool %r failed outside its handler", tool.name)
            response = jsonrpc.error(call.request_id, jsonrpc.INTERNAL_ERROR, "Internal error while running the tool")
        finally:
            call.session.finish(call)
            call.sink.finish(response)

    # -- status ------------------------------------------------------------------------

    def status(self) -> dict:
        """Live figures of this process: version, pid, uptime [s], sessions, pending, threads."""
        return {
            "version": __version__,
            "pid": os.getpid(),
            "uptime": time.time() - self.started,
            "sessions": len(self.sessions),
            "pending": self.pending.count(),
            "threads": self.settings.threads,
            "thread_reserve": self.settings.thread_reserve,
            "pending_budget": self.settings.pending_budget,
        }


def inspect_doc(func: Callable[..., Any]) -> str:
    """The first paragraph of a function's docstring, or its name when it has none."""
    doc = inspect.getdoc(func) or ""
    return doc.split("\n\n", 1)[0].strip() or func.__name__
