"""The MCP server core: lifecycle, method dispatch and tool calls, independent of HTTP.

Implements MCP basic/lifecycle (``initialize``, version negotiation, ``ping``), basic/utilities
(cancellation, progress), server/utilities (logging, completion, pagination), server/tools,
server/resources and server/prompts for protocol versions 2024-11-05 to 2025-11-25. A transport (see
:mod:`zemcp.transport`) parses HTTP, then calls :meth:`Server.initialize` or
:meth:`Server.handle` and turns the outcome into a response.

Tool handlers run on a bounded thread pool created once per process, so the HTTP thread can
tell "plain JSON answer" from "the handler is streaming" (see :mod:`zemcp.sinks`).
"""

from __future__ import annotations

import logging
import os
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from zemcp import __version__, jsonrpc, versions
from zemcp.config import Settings
from zemcp.correlation import CorrelationTable
from zemcp.elicitation import ClientDisconnected, ElicitAborted, RequestCancelled, SessionEnded
from zemcp.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, ProtocolError

#: JSON-RPC error of a request that needs URL-mode elicitations first (MCP 2025-11-25).
URL_ELICITATION_REQUIRED = -32042
from zemcp.session import Call, Session, SessionRegistry, fingerprint
from zemcp.sinks import ReplySink
from zemcp.context import LOG_LEVELS, CallFinished, Context, URLElicitationRequired
from zemcp.tools import Tool, ToolRegistry, error_result
from zemcp.completions import CompletionRegistry
from zemcp.pagination import PAGE_SIZE, list_result
from zemcp.prompts import PromptRegistry, make_prompt
from zemcp.resources import ResourceRegistry

log = logging.getLogger("zemcp.server")



_SERVERS: "weakref.WeakSet[Server]" = weakref.WeakSet()


def shutdown_all() -> int:
    """End every session of every :class:`Server` of this process (the process is stopping).

    Returns:
        how many sessions ended.
    """
    return sum(server.shutdown() for server in list(_SERVERS))


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
        self.resources = ResourceRegistry()
        self.prompts = PromptRegistry()
        self.completions = CompletionRegistry(self.prompts, self.resources)
        self.pending = CorrelationTable(self.settings.pending_budget, self.settings.max_pending_per_session)
        self.sessions = SessionRegistry(self.settings.max_sessions, self.settings.session_ttl, self._session_ended,
                                        self.settings.instance)
        # One worker per gunicorn thread: each thread waits on at most one handler.
        self._pool = ThreadPoolExecutor(max_workers=self.settings.threads, thread_name_prefix="zemcp-handler")
        self.started = time.time()
        _SERVERS.add(self)
        self._methods: dict[str, Callable[[Session, jsonrpc.Request], Any]] = {
            "ping": lambda session, request: {},
            "logging/setLevel": self._set_log_level,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "resources/list": self._resources_list,
            "resources/templates/list": self._resources_templates_list,
            "resources/read": self._resources_read,
            "resources/subscribe": self._resources_subscribe,
            "resources/unsubscribe": self._resources_unsubscribe,
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "completion/complete": self._completion_complete,
        }

    def tool(self, name: str | Callable[..., Any] | None = None, *, title: str | None = None,
             description: str | None = None, input_schema: dict | None = None, output_schema: dict | None = None,
             structured_output: bool = False, annotations: dict | None = None) -> Any:
        """Decorator registering a function as a tool: ``@server.tool`` or ``@server.tool(...)``.

        The input schema comes from the function's typed parameters (see
        :class:`zemcp.tools.Tool` and docs/authoring.md).

        Args:
            name: the tool name; the function's name when omitted.
            title: optional display name.
            description: shown to the model; the docstring's first paragraph when omitted.
            input_schema: JSON Schema of the arguments, used verbatim; derived from the
                signature when omitted.
            output_schema: JSON Schema of the structured result; the return value is then
                the ``structuredContent``.
            structured_output: derive the output schema from the return annotation.
            annotations: ToolAnnotations (``title``, ``readOnlyHint``, ``destructiveHint``,
                ``idempotentHint``, ``openWorldHint``).
        Returns:
            the decorator, which returns the function unchanged (bare use: the function).
        Raises:
            ValueError: a bad or taken name, a schema that is not an object schema, bad annotations.
            TypeError: a parameter or return type that cannot be expressed as JSON Schema.
        """

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            self.tools.add(Tool(
                name if isinstance(name, str) else None, func, description, input_schema, title,
                output_schema=output_schema, structured_output=structured_output, annotations=annotations,
            ))
            return func

        # Bare @server.tool passes the function itself as the first argument.
        return register(name) if callable(name) else register

    def resource(self, uri: str, *, name: str | None = None, title: str | None = None,
                 description: str | None = None, mime_type: str | None = "text/plain",
                 size: int | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator registering a function as a resource, or as a resource template.

        A ``uri`` with ``{name}`` expressions (RFC 6570 level 1) registers a template: the
        function is called with the variables of the URI read as keyword arguments. Otherwise
        it is called without arguments. It returns ``str`` (text), ``bytes`` (blob) or a list
        of those and of content dicts (MCP server/resources).

        Args:
            uri: the resource's URI, or a URI template.
            name: the function's name when omitted.
            title: optional display name.
            description: the docstring's first paragraph when omitted.
            mime_type: MIME type of the contents; None leaves it out.
            size: optional size [bytes] of a static resource.
        Returns:
            the decorator, which returns the function unchanged.
        Raises:
            ValueError: the URI is taken or malformed, or the function's parameters do not
                fit the template's variables.
        """

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            self.resources.register(func, uri, name=name, title=title, description=description,
                                    mime_type=mime_type, size=size)
            return func

        return register

    def prompt(self, name: str | Callable[..., Any] | None = None, *, title: str | None = None,
               description: str | None = None) -> Any:
        """Decorator registering a function as a prompt; usable bare (``@server.prompt``) too.

        The function's parameters are the prompt's arguments (strings; required when they
        have no default; described by ``Annotated[str, "..."]`` or the docstring's ``Args:``).
        It returns ``str`` (one user message) or a list of strings and ``{"role", "content"}``
        dicts (MCP server/prompts).

        Args:
            name: the prompt name; the function's name when omitted.
            title: optional display name.
            description: the docstring's first paragraph when omitted.
        Returns:
            the decorator, which returns the function unchanged (used bare: the function).
        Raises:
            ValueError: a taken name, or a parameter that cannot be a prompt argument.
        """

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            self.prompts.add(make_prompt(func, name=None if callable(name) else name, title=title,
                                         description=description))
            return func

        return register(name) if callable(name) else register

    def completion(self, *, prompt: str | None = None,
                   resource: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator registering a completion provider for a prompt's or a template's arguments.

        The provider is called as ``provider(argument, value, context)`` with the argument's
        name, the partial value and the other arguments already given, and returns the
        suggested values (MCP server/utilities/completion).

        Args:
            prompt: the prompt name it completes arguments of.
            resource: the URI template it completes variables of.
        Returns:
            the decorator, which returns the function unchanged.
        Raises:
            ValueError: not exactly one of ``prompt`` and ``resource``, or that ref already
                has a provider.
        """

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            self.completions.add(func, prompt=prompt, resource=resource)
            return func

        return register

    # -- lifecycle ---------------------------------------------------------------------

    def check_protocol_header(self, value: str | None) -> None:
        """Check an ``MCP-Protocol-Version`` request header (absent is accepted).

        Raises:
            ProtocolError: the value is not a version this server supports.
        """
        if value is not None and value not in versions.SUPPORTED:
            raise ProtocolError(
                INVALID_REQUEST,
                f"Bad Request: unsupported MCP-Protocol-Version {value!r}; this server supports "
                f"{', '.join(versions.SUPPORTED)} (initialize negotiates one)",
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
        version = requested if requested in versions.SUPPORTED else versions.LATEST
        session = self.sessions.create(version, client_info, capabilities)
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self.capabilities(version),
            "serverInfo": {"name": self.name, "version": self.version},
        }
        if self.instructions:
            result["instructions"] = self.instructions
        # %r: client-chosen strings must not be able to forge log lines.
        log.info("session %s initialized: client %r %r, protocol %s, elicitation %s",
                 fingerprint(session.id), client_info.get("name"), client_info.get("version"), version,
                 "yes" if session.client_supports_elicit() else "no")
        return session, jsonrpc.result(request.id, result)

    def capabilities(self, version: str = versions.LATEST) -> dict:
        """``ServerCapabilities`` for initialize: exactly the features this server has that
        protocol ``version`` knows (``completions`` arrived in 2025-03-26)."""
        capabilities: dict[str, Any] = {"logging": {}}
        if len(self.tools):
            capabilities["tools"] = {"listChanged": False}
        if len(self.resources):
            # No "subscribe": updates need a standalone GET stream, which is not offered.
            capabilities["resources"] = {"listChanged": False}
        if len(self.prompts):
            capabilities["prompts"] = {"listChanged": False}
        if (len(self.prompts) or len(self.resources)) and versions.since(version, versions.ANNOTATIONS_AND_COMPLETIONS):
            capabilities["completions"] = {}
        return capabilities

    def shutdown(self) -> int:
        """End every session because the process is stopping; returns how many ended.

        Waiting handlers wake with ``SessionEnded`` and their streams finish, so a graceful
        stop does not wait for elicitation answers that would arrive at a process going away.
        """
        return sum(self.sessions.end(s.id, "the server is shutting down") for s in self.sessions.sessions())

    def end_session(self, session_id: str) -> bool:
        """End a session at the client's request (DELETE); False when it is not live."""
        return self.sessions.end(session_id, "deleted by the client")

    def _session_ended(self, session: Session, why: str) -> None:
        reason = SessionEnded(why)
        for call in session.calls():
            call.abort(reason)
        self.resources.forget_session(session.id)
        n = self.pending.abandon(lambda p: p.session_id == session.id, reason)
        log.info("session %s ended (%s); %d pending server-to-client request(s) ended", fingerprint(session.id), why, n)

    # -- messages ----------------------------------------------------------------------

    def handle(self, session: Session, message: jsonrpc.Message) -> dict | ReplySink | None:
        """Handle one message of a live session.

        ``initialize`` is not a method here: it goes to :meth:`initialize`.

        Returns:
            None for a notification or response (the transport answers 202); a dict for a
            request answered at once (a JSON-RPC response); a :class:`ReplySink` for a
            tools/call, whose :meth:`ReplySink.first` tells JSON from stream.
        Raises:
            SessionNotFound: the session ended while the request arrived.
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

    def _set_log_level(self, session: Session, request: jsonrpc.Request) -> dict:
        level = request.params.get("level")
        if level not in LOG_LEVELS:
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
        session.log_level = level
        return {}

    def _tools_list(self, session: Session, request: jsonrpc.Request) -> dict:
        return _for_version(list_result(request.params, "tools", self.tools.definitions(), PAGE_SIZE), "tools", session)

    def _resources_list(self, session: Session, request: jsonrpc.Request) -> dict:
        return _for_version(self.resources.list_result(request.params, PAGE_SIZE), "resources", session)

    def _resources_templates_list(self, session: Session, request: jsonrpc.Request) -> dict:
        return _for_version(self.resources.templates_result(request.params, PAGE_SIZE), "resourceTemplates", session)

    def _resources_read(self, session: Session, request: jsonrpc.Request) -> dict:
        return self.resources.read(request.params)

    def _resources_subscribe(self, session: Session, request: jsonrpc.Request) -> dict:
        return self.resources.subscribe(session.id, request.params)

    def _resources_unsubscribe(self, session: Session, request: jsonrpc.Request) -> dict:
        return self.resources.unsubscribe(session.id, request.params)

    def _prompts_list(self, session: Session, request: jsonrpc.Request) -> dict:
        return _for_version(self.prompts.list_result(request.params, PAGE_SIZE), "prompts", session)

    def _prompts_get(self, session: Session, request: jsonrpc.Request) -> dict:
        return self.prompts.get_result(request.params)

    def _completion_complete(self, session: Session, request: jsonrpc.Request) -> dict:
        return self.completions.complete(request.params)

    def _tools_call(self, session: Session, request: jsonrpc.Request) -> ReplySink | dict:
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
            if versions.since(session.protocol_version, versions.ELICITATION_MODES):
                # SEP-1303: input validation failures are tool errors the model can correct.
                return error_result(problem)
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: {problem}")
        meta = request.params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        sink = ReplySink()
        try:
            call = session.begin(request.id, sink, token if jsonrpc.valid_id(token) else None)
        except ValueError as exc:
            raise ProtocolError(INVALID_REQUEST, f"Invalid Request: {exc}") from None
        sink.on_close(lambda: None if sink.finished else self._abort(call, ClientDisconnected()))
        self._pool.submit(self._run, tool, arguments, call)
        return sink

    def _run(self, tool: Tool, arguments: dict, call: Call) -> None:
        response: dict | None = None
        try:
            result = tool.run(arguments, Context(call, self.pending, self.settings.elicitation_timeout))
            if not versions.since(call.session.protocol_version, versions.TITLES_AND_STRUCTURED_OUTPUT):
                # structuredContent arrived in 2025-06-18; older clients read the text item.
                result.pop("structuredContent", None)
            if not call.cancelled:
                response = jsonrpc.result(call.request_id, result)
        except URLElicitationRequired as exc:
            if call.session.client_supports_elicit("url"):
                response = jsonrpc.error(call.request_id, URL_ELICITATION_REQUIRED, str(exc),
                                         {"elicitations": exc.elicitations})
            else:
                # A mode the client did not declare must not be used: tell the user in text.
                steps = "; ".join(f"{e['message']}: {e['url']}" for e in exc.elicitations)
                response = jsonrpc.result(call.request_id, error_result(f"{exc}, which this client cannot do here: {steps}"))
        except ElicitAborted as exc:
            # No response after a cancel (MCP basic/utilities/cancellation); otherwise the
            # session ended or the client left, and the error explains it to whoever reads.
            if not isinstance(exc, RequestCancelled):
                response = jsonrpc.result(call.request_id, error_result(str(exc)))
        except BaseException:
            # This is a pool thread: whatever escaped, the client still gets an answer.
            log.exception("tool %r failed outside its handler", tool.name)
            response = jsonrpc.error(call.request_id, jsonrpc.INTERNAL_ERROR, "Internal error while running the tool")
        finally:
            if call.cancelled:
                response = None  # never answer a cancelled request, whatever ended it
            # Threads the handler left behind must not talk on a finished request.
            self._abort(call, CallFinished())
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


def _for_version(result: dict, key: str, session: Session) -> dict:
    """Leave out of list items the fields the session's protocol version does not have.

    ``title`` and ``outputSchema`` arrived in 2025-06-18, tool ``annotations`` in 2025-03-26.
    """
    version = session.protocol_version
    drop = ({"title", "outputSchema"} if not versions.since(version, versions.TITLES_AND_STRUCTURED_OUTPUT) else set()) | (
        {"annotations"} if not versions.since(version, versions.ANNOTATIONS_AND_COMPLETIONS) else set())
    if drop:
        result[key] = [{k: v for k, v in item.items() if k not in drop} for item in result[key]]
    return result
