"""The MCP server core: registries, capabilities and the era-agnostic methods, independent of HTTP.

Implements MCP server/tools, server/resources, server/prompts and server/utilities
(completion, pagination) once, for both protocol eras. The era-specific request handling
lives beside it: :mod:`zemcp.eras.handshake.era` (``initialize``, sessions, server-to-client requests
pushed on the stream; 2024-11-05 to 2025-11-25) and :mod:`zemcp.eras.modern.era` (the stateless
2026-07-28 envelope and multi-round-trip requests). Both call :meth:`Server.prepare` for a
method's work and :meth:`Server.execute` to run a handler with a :class:`zemcp.Context` on
the request's :class:`zemcp.protocol.inputs.Exchange`.

Handlers that may talk to the client run on the request's own thread under gunicorn
(:class:`zemcp.replies.responses.DirectSink`), and elsewhere on a bounded thread pool created once
per process, so that the HTTP thread can tell "plain JSON answer" from "the handler is
streaming" (see :mod:`zemcp.replies.sinks`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from zemcp import logsafe
from zemcp.auth import Authorization, InsufficientScope, Principal
from zemcp.config import Settings
from zemcp.core.completions import CompletionRegistry
from zemcp.core.context import Context
from zemcp.core.errors import CallFinished, URLElicitationRequired
from zemcp.core.exchange import Exchange, RoundEnded
from zemcp.core.prompts import PromptRegistry, make_prompt
from zemcp.core.resources import Resource, ResourceRegistry
from zemcp.core.results import error_result
from zemcp.core.tools import Tool, ToolRegistry
from zemcp.protocol import jsonrpc, versions
from zemcp.protocol.caching import NO_CACHE, CacheHint
from zemcp.protocol.capabilities import ClientView
from zemcp.protocol.elicitation import ElicitAborted, RequestCancelled, SessionEnded
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from zemcp.protocol.pagination import PAGE_SIZE, list_result
from zemcp.state import open_state
from zemcp.state.interfaces import REQUEST, STANDALONE, ListenLimitReached
from zemcp.state.sessions import Session, fingerprint
from zemcp.version import __version__

_F = TypeVar("_F", bound=Callable[..., Any])
_T = TypeVar("_T")

log = logging.getLogger("zemcp.server")

#: JSON-RPC error of a request that needs URL-mode elicitations first (MCP 2025-11-25 only).
URL_ELICITATION_REQUIRED = -32042

_SERVERS: weakref.WeakSet[Server] = weakref.WeakSet()


def shutdown_all() -> int:
    """End every session of every :class:`Server` of this process (the process is stopping).

    Returns:
        how many sessions ended.
    """
    return sum(server.shutdown() for server in list(_SERVERS))


#: [seconds] ``Retry-After`` of a call refused because the call budget is taken.
BUSY_RETRY_AFTER = 2


class Busy(Exception):
    """The threads for running calls and streams are all taken (HTTP 503 with ``Retry-After``).

    Attributes:
        retry_after: [seconds] when to try again.
    """

    def __init__(self, held: int, budget: int):
        super().__init__(
            f"Service Unavailable: {held} running calls and streams hold this process's {budget} threads for them "
            f"(ZEMCP_THREADS minus the reserve kept for answers, cancellations and pings); retry in "
            f"{BUSY_RETRY_AFTER} s, or raise ZEMCP_THREADS"
        )
        self.retry_after = BUSY_RETRY_AFTER


@dataclass(frozen=True)
class Work:
    """A request whose handler may talk to the client: run it with :meth:`Server.execute`.

    Attributes:
        method: ``tools/call``, ``prompts/get`` or ``resources/read``.
        target: the tool or prompt name, or the resource URI.
        arguments: the request's arguments (``{}`` for a resource), what a 2026-07-28
            ``requestState`` is bound to.
        run: the handler call, ``run(ctx) -> result dict``.
        auth: the principal of the request's access token (``ctx.auth``), None without
            authorization.
    """

    method: str
    target: str
    arguments: dict[str, Any]
    run: Callable[[Context], dict[str, Any]]
    auth: Principal | None = None

    @property
    def is_tool(self) -> bool:
        """True for ``tools/call``, whose failures are ``isError`` results rather than errors."""
        return self.method == "tools/call"


class Server:
    """An MCP server: tools, resources, prompts, sessions and the pending elicitations of one process.

    Args:
        name: ``serverInfo.name``.
        version: ``serverInfo.version``.
        instructions: optional ``instructions`` returned by initialize and ``server/discover``.
        settings: limits and timeouts; ``Settings.from_env()`` when omitted.
        auth: the authorization of the endpoint (:class:`zemcp.auth.Authorization`, for a
            verifier of your own); built from the ``auth_*`` settings when omitted (None
            when ``auth`` is ``off``).
    """

    def __init__(
        self,
        name: str,
        version: str = "0.0.0",
        *,
        instructions: str | None = None,
        settings: Settings | None = None,
        auth: Authorization | None = None,
    ):
        self.name = name
        self.version = version
        self.instructions = instructions
        self.settings = settings if settings is not None else Settings.from_env()
        self.auth = auth if auth is not None else Authorization.from_settings(self.settings, name)
        # (kind, name or URI) -> scopes a principal needs to see and use it; kinds: tool, prompt, resource.
        self._scopes: dict[tuple[str, str], tuple[str, ...]] = {}
        self.tools = ToolRegistry()
        self.resources = ResourceRegistry()
        self.prompts = PromptRegistry()
        self.completions = CompletionRegistry(self.prompts, self.resources)
        self.state = open_state(self.settings, self._session_ended)
        self.sessions = self.state.sessions
        self.pending = self.state.pending
        self.replay_budget = self.state.replay_budget
        self.subscriptions = self.state.fanout
        self._admission = threading.Lock()
        self._running = 0
        # Connections that read a session's stream by GET (each holds a gunicorn thread):
        # resumed request streams, and standalone streams.
        self._resuming = 0
        self._standalone = 0
        # One worker per gunicorn thread: each thread waits on at most one handler.
        self._pool = ThreadPoolExecutor(max_workers=self.settings.threads, thread_name_prefix="zemcp-handler")
        self.started = time.time()
        _SERVERS.add(self)
        self._methods: dict[str, Callable[[ClientView, jsonrpc.Request, Principal | None], dict[str, Any] | Work]] = {
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "resources/list": self._resources_list,
            "resources/templates/list": self._resources_templates_list,
            "resources/read": self._resources_read,
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "completion/complete": self._completion_complete,
        }

    @overload
    def tool(self, name: _F, /) -> _F: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        structured_output: bool = False,
        annotations: dict[str, Any] | None = None,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        scopes: tuple[str, ...] | list[str] = (),
        elicit_missing: bool | list[str] | tuple[str, ...] = False,
        elicit_message: str | None = None,
    ) -> Callable[[_F], _F]: ...

    def tool(
        self,
        name: str | _F | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        structured_output: bool = False,
        annotations: dict[str, Any] | None = None,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        scopes: tuple[str, ...] | list[str] = (),
        elicit_missing: bool | list[str] | tuple[str, ...] = False,
        elicit_message: str | None = None,
    ) -> _F | Callable[[_F], _F]:
        """Decorator registering a function as a tool: ``@server.tool`` or ``@server.tool(...)``.

        The input schema comes from the function's typed parameters (see
        :class:`zemcp.core.tools.Tool` and docs/authoring.md).

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
            ttl_ms, cache_scope: this tool's part of the ``tools/list`` caching hint
                (2026-07-28, see :mod:`zemcp.protocol.caching`): [milliseconds] and ``"public"`` or
                ``"private"``.
            scopes: OAuth scopes a caller needs, with authorization on, to see the tool in
                ``tools/list`` and to call it (403 ``insufficient_scope`` otherwise).
            elicit_missing: when a call lacks arguments, ask the user for all of them in one
                form elicitation before the handler runs, in either era (docs/elicitation.md,
                "Asking for missing arguments"): True for the required arguments a form can
                ask for (string, number, integer, boolean), or a list of argument names,
                asked for whenever they are absent or blank, required or not. Without the
                client's elicitation capability such a call ends with the ``isError`` text
                ``Error: missing required argument: <names>``.
            elicit_message: the question shown with that form (``"<title or name> needs:
                <fields>"`` when omitted).
        Returns:
            the decorator, which returns the function unchanged (bare use: the function).
        Raises:
            ValueError: a bad or taken name, a schema that is not an object schema, bad
                annotations or ``x-mcp-header`` marks, a bad caching hint, an
                ``elicit_missing`` that names an unknown argument or one a form cannot ask
                for (or, as True, finds none), a blank ``elicit_message``.
            TypeError: a parameter or return type that cannot be expressed as JSON Schema.
        """
        cache = CacheHint(ttl_ms, cache_scope)

        needed = _scopes(scopes)

        def register(func: _F) -> _F:
            tool = self.tools.add(
                Tool(
                    name if isinstance(name, str) else None,
                    func,
                    description,
                    input_schema,
                    title,
                    output_schema=output_schema,
                    structured_output=structured_output,
                    annotations=annotations,
                    cache=cache,
                    elicit_missing=elicit_missing,
                    elicit_message=elicit_message,
                )
            )
            self._scopes[("tool", tool.name)] = needed
            self.notify_list_changed("tools")
            return func

        # Bare @server.tool passes the function itself as the first argument.
        return register(name) if callable(name) else register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = "text/plain",
        size: int | None = None,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        scopes: tuple[str, ...] | list[str] = (),
    ) -> Callable[[_F], _F]:
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
            ttl_ms, cache_scope: the caching hint of reading it, and its part of the list's
                (2026-07-28, see :mod:`zemcp.protocol.caching`).
            scopes: OAuth scopes a caller needs, with authorization on, to see it listed and
                to read it.
        Returns:
            the decorator, which returns the function unchanged.
        Raises:
            ValueError: the URI is taken or malformed, the function's parameters do not
                fit the template's variables, or a bad caching hint.
        """
        cache = CacheHint(ttl_ms, cache_scope)

        needed = _scopes(scopes)

        def register(func: _F) -> _F:
            self.resources.register(
                func, uri, name=name, title=title, description=description, mime_type=mime_type, size=size, cache=cache
            )
            self._scopes[("resource", uri)] = needed
            self.notify_list_changed("resources")
            return func

        return register

    @overload
    def prompt(self, name: _F, /) -> _F: ...

    @overload
    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        scopes: tuple[str, ...] | list[str] = (),
    ) -> Callable[[_F], _F]: ...

    def prompt(
        self,
        name: str | _F | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        scopes: tuple[str, ...] | list[str] = (),
    ) -> _F | Callable[[_F], _F]:
        """Decorator registering a function as a prompt; usable bare (``@server.prompt``) too.

        The function's parameters are the prompt's arguments (strings; required when they
        have no default; described by ``Annotated[str, "..."]`` or the docstring's ``Args:``).
        It returns ``str`` (one user message) or a list of strings and ``{"role", "content"}``
        dicts (MCP server/prompts).

        Args:
            name: the prompt name; the function's name when omitted.
            title: optional display name.
            description: the docstring's first paragraph when omitted.
            ttl_ms, cache_scope: this prompt's part of the ``prompts/list`` caching hint
                (2026-07-28, see :mod:`zemcp.protocol.caching`).
            scopes: OAuth scopes a caller needs, with authorization on, to see it listed and
                to get it.
        Returns:
            the decorator, which returns the function unchanged (used bare: the function).
        Raises:
            ValueError: a taken name, a parameter that cannot be a prompt argument, or a bad
                caching hint.
        """
        cache = CacheHint(ttl_ms, cache_scope)

        needed = _scopes(scopes)

        def register(func: _F) -> _F:
            prompt = self.prompts.add(
                make_prompt(
                    func, name=None if callable(name) else name, title=title, description=description, cache=cache
                )
            )
            self._scopes[("prompt", prompt.name)] = needed
            self.notify_list_changed("prompts")
            return func

        return register(name) if callable(name) else register

    def completion(self, *, prompt: str | None = None, resource: str | None = None) -> Callable[[_F], _F]:
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

        def register(func: _F) -> _F:
            self.completions.add(func, prompt=prompt, resource=resource)
            return func

        return register

    # -- change notifications ------------------------------------------------------------

    def notify_list_changed(self, kind: str) -> int:
        """Tell the clients listening for it that the ``kind`` list changed (``tools``,
        ``prompts`` or ``resources``): ``notifications/<kind>/list_changed`` on every
        2026-07-28 ``subscriptions/listen`` stream of this process that asked for it, and on
        the standalone GET stream of every handshake-era session of this process.
        Registering through the decorators calls it; call it yourself when what a list shows
        changed another way.

        Returns:
            how many streams were told.
        Raises:
            ValueError: ``kind`` is not one of the three.
        """
        flags = {"tools": "toolsListChanged", "prompts": "promptsListChanged", "resources": "resourcesListChanged"}
        if kind not in flags:
            raise ValueError(f"kind must be 'tools', 'prompts' or 'resources', got {kind!r}")
        return self.subscriptions.list_changed(flags[kind])

    def notify_resource_updated(self, uri: str) -> int:
        """Tell the clients subscribed to ``uri`` that the resource changed
        (``notifications/resources/updated`` on the ``subscriptions/listen`` streams of this
        process whose ``resourceSubscriptions`` name it, and on the standalone GET stream of
        every session of this process that subscribed to it with ``resources/subscribe``);
        returns how many streams were told."""
        return self.subscriptions.resource_updated(uri)

    # -- capabilities and sessions -----------------------------------------------------

    def capabilities(self, version: str = versions.LATEST) -> dict[str, Any]:
        """``ServerCapabilities`` (initialize, ``server/discover``): exactly the features this
        server has that protocol ``version`` knows (``completions`` arrived in 2025-03-26).

        ``listChanged`` and ``resources.subscribe`` are true only when the era's push stream
        is allowed: ``subscriptions/listen`` in the 2026-07-28 era (``max_listen_streams``
        above 0), a session's standalone GET stream in the handshake era
        (``max_standalone_streams`` above 0).
        """
        if versions.since(version, versions.STATELESS):
            pushes = self.subscriptions.max_streams > 0
        else:
            pushes = self.settings.standalone_budget > 0
        capabilities: dict[str, Any] = {"logging": {}}
        if len(self.tools):
            capabilities["tools"] = {"listChanged": pushes}
        if len(self.resources):
            capabilities["resources"] = {"listChanged": pushes, **({"subscribe": True} if pushes else {})}
        if len(self.prompts):
            capabilities["prompts"] = {"listChanged": pushes}
        if (len(self.prompts) or len(self.resources)) and versions.since(version, versions.ANNOTATIONS_AND_COMPLETIONS):
            capabilities["completions"] = {}
        return capabilities

    def shutdown(self) -> int:
        """End every session and listen stream because the process is stopping; returns how
        many sessions ended.

        Waiting handlers wake with ``SessionEnded`` and their streams finish, so a graceful
        stop does not wait for elicitation answers that would arrive at a process going away.
        Listen streams end with a result for their request (a graceful end).
        """
        self.subscriptions.close_all({"resultType": "complete"})
        return sum(self.sessions.end(s.id, "the server is shutting down") for s in self.sessions.sessions())

    def end_session(self, session_id: str) -> bool:
        """End a session at the client's request (DELETE); False when it is not live."""
        return self.sessions.end(session_id, "deleted by the client")

    def _session_ended(self, session: Session, why: str) -> None:
        reason = SessionEnded(why)
        for call in session.calls():
            call.abort(reason)
        self.resources.forget_session(session.id)
        self.subscriptions.drop_session(session.id)
        session.streams.close()
        n = self.pending.end_session(session.id, reason)
        log.info("session %s ended (%s); %d pending server-to-client request(s) ended", fingerprint(session.id), why, n)

    def abort(self, call: Any, reason: ElicitAborted) -> None:
        """End a running request's waits (its handler raises ``reason`` at its next ``ctx`` use)."""
        if call.abort(reason):
            self.pending.end_call(call, reason)

    # -- the era-agnostic methods --------------------------------------------------------

    def methods(self) -> frozenset[str]:
        """The methods :meth:`prepare` serves."""
        return frozenset(self._methods)

    def prepare(
        self, client: ClientView, request: jsonrpc.Request, principal: Principal | None = None
    ) -> dict[str, Any] | Work:
        """Serve one of :meth:`methods` for ``client``, or set up its handler's work.

        Args:
            client, request: who asks and what.
            principal: who the request's access token names, with authorization on (lists
                then show only what it may use); None without authorization.
        Returns:
            the result dict of a request answered at once, or a :class:`Work` for a handler
            that may talk to the client (tools, and prompts and resources taking a Context).
        Raises:
            ProtocolError: the request is invalid (the error to answer with).
            InsufficientScope: the tool, prompt or resource needs scopes ``principal`` lacks.
            KeyError: ``request.method`` is not one of :meth:`methods`.
        """
        outcome = self._methods[request.method](client, request, principal)
        if isinstance(outcome, Work) and principal is not None:
            outcome = dataclasses.replace(outcome, auth=principal)
        return outcome

    def declared_scopes(self) -> list[str]:
        """Every scope a registration needs, in registration order (for ``scopes_supported``)."""
        return list(dict.fromkeys(scope for needed in self._scopes.values() for scope in needed))

    def _may_use(self, principal: Principal | None, kind: str, key: str) -> bool:
        """True when ``principal`` (None: authorization off) has the scopes ``kind`` ``key`` was
        registered with; the server-wide scopes were checked with the token."""
        return principal is None or not principal.missing(self._scopes.get((kind, key), ()))

    def _allow(self, principal: Principal | None, kind: str, key: str, what: str) -> None:
        """Raise :class:`InsufficientScope` unless ``principal`` may use ``kind`` ``key``."""
        if not self._may_use(principal, kind, key):
            raise InsufficientScope(list(self._scopes[(kind, key)]), what)

    def _visible(
        self, result: dict[str, Any], field: str, kind: str, key: str, principal: Principal | None
    ) -> dict[str, Any]:
        """``result`` with the ``field`` items ``principal`` may not use left out (by their ``key``)."""
        if principal is None or not self._scopes:
            return result
        return {**result, field: [item for item in result[field] if self._may_use(principal, kind, item[key])]}

    def cache_hint(self, request: jsonrpc.Request) -> CacheHint:
        """The caching hint of a cacheable request's result (MCP 2026-07-28 server/utilities/caching).

        A list carries the most cautious hint of its items; ``resources/read`` the hint of the
        resource or template read; anything else, and a URI no resource matches, ``NO_CACHE``.
        """
        method = request.method
        if method == "tools/list":
            return self.tools.cache_hint()
        if method == "prompts/list":
            return self.prompts.cache_hint()
        if method in ("resources/list", "resources/templates/list"):
            return self.resources.cache_hints()[method == "resources/templates/list"]
        if method == "resources/read":
            try:
                return self.resources.find(request.params)[0].cache
            except ProtocolError:
                return NO_CACHE
        return NO_CACHE

    def _check_room(self) -> None:
        """Raise :class:`Busy` when running calls and open streams hold the whole call budget."""
        held = self._running + self.subscriptions.count() + self._resuming + self._standalone
        if held >= self.settings.call_budget:
            raise Busy(held, self.settings.call_budget)

    def open_stream(self, opener: Callable[[], _T]) -> _T:
        """Open a stream that holds a thread while it is open (``opener()``, which returns it)
        if the call budget has room; checked and opened together, so that concurrent opens
        cannot pass the budget.

        Raises:
            Busy: the call budget is taken; nothing is opened.
        """
        with self._admission:
            self._check_room()
            return opener()

    def hold_thread(self, kind: str = REQUEST, force: bool = False) -> Callable[[], None]:
        """Count a connection that reads a session's stream by GET in the call budget (it holds
        a thread while it reads); returns the function that gives the place back (call it once).

        Args:
            kind: ``"request"`` (it resumes a request's stream) or ``"standalone"`` (it reads
                the session's standalone stream, capped by ``standalone_budget``).
            force: count it without checking (it takes over from a connection that holds a
                place and is giving it back).
        Raises:
            Busy: the call budget is taken.
            ListenLimitReached: (standalone) ``standalone_budget`` standalone streams are open.
        """
        standalone = kind == STANDALONE
        with self._admission:
            if not force and standalone and self._standalone >= self.settings.standalone_budget:
                raise ListenLimitReached(
                    f"this process already has its maximum of {self.settings.standalone_budget} standalone GET "
                    f"streams open (ZEMCP_MAX_STANDALONE_STREAMS); requests still get their own streams; retry later"
                )
            if not force:
                self._check_room()
            if standalone:
                self._standalone += 1
            else:
                self._resuming += 1

        def release() -> None:
            with self._admission:
                if standalone:
                    self._standalone -= 1
                else:
                    self._resuming -= 1

        return release

    def start(self, job: Callable[[], None], sink: Any) -> None:
        """Run ``job`` for a request whose output goes to ``sink``, counted in the call budget until it returns.

        With a :class:`zemcp.replies.responses.DirectSink` the job is left on the sink, for the
        request's own thread to run; otherwise it runs on the handler pool. ``job`` must answer
        its request whatever happens.

        Raises:
            Busy: the call budget is taken (``Settings.call_budget``); ``job`` does not run.
        """
        with self._admission:
            self._check_room()
            self._running += 1

        def counted() -> None:
            try:
                job()
            finally:
                with self._admission:
                    self._running -= 1

        if getattr(sink, "direct", False):
            sink.job = counted
        else:
            self._pool.submit(counted)

    def execute(self, work: Work, exchange: Exchange) -> dict[str, Any] | None:
        """Run ``work``'s handler with a Context on ``exchange``; never raises what the handler raised.

        Returns:
            the JSON-RPC response; None when the client cancelled the request (no response,
            MCP basic/utilities/cancellation).
        Raises:
            RoundEnded: (2026-07-28) the round ends to ask the client, or the replay broke.
        """
        request_id = exchange.request_id
        try:
            return jsonrpc.result(request_id, work.run(Context(exchange, work.auth)))
        except RoundEnded:
            raise
        except URLElicitationRequired as exc:
            client = exchange.client
            if client.client_supports_elicit("url") and not versions.since(client.protocol_version, versions.STATELESS):
                return jsonrpc.error(request_id, URL_ELICITATION_REQUIRED, str(exc), {"elicitations": exc.elicitations})
            # A mode the client did not declare (or a version without -32042): tell the user in text.
            steps = "; ".join(f"{e['message']}: {e['url']}" for e in exc.elicitations)
            return self._failure(work, request_id, f"{exc}, which this client cannot do here: {steps}")
        except RequestCancelled:
            return None
        except ElicitAborted as exc:
            # The session ended or the client left; the error explains it to whoever reads.
            return self._failure(work, request_id, str(exc))
        except ProtocolError as exc:
            return jsonrpc.error(request_id, exc.code, exc.message, exc.data)
        except BaseException:
            # A pool thread: whatever escaped, the client still gets an answer.
            log.exception("%s %s failed outside its handler", work.method, logsafe.clip(work.target))
            return jsonrpc.error(request_id, INTERNAL_ERROR, f"Internal error while serving {work.method}")
        finally:
            # Threads the handler left behind must not talk on a finished request.
            self.abort(exchange, CallFinished())

    def _failure(self, work: Work, request_id: jsonrpc.RequestId, text: str) -> dict[str, Any]:
        if work.is_tool:
            return jsonrpc.result(request_id, error_result(text))
        return jsonrpc.error(request_id, INTERNAL_ERROR, f"{work.method} {work.target}: {text}")

    def _tools_list(self, client: ClientView, request: jsonrpc.Request, principal: Principal | None) -> dict[str, Any]:
        definitions = self.tools.definitions()
        if principal is not None and self._scopes:
            # Filtered before paging, so that every page is full.
            definitions = [d for d in definitions if self._may_use(principal, "tool", d["name"])]
        return _for_version(list_result(request.params, "tools", definitions, PAGE_SIZE), "tools", client)

    def _resources_list(
        self, client: ClientView, request: jsonrpc.Request, principal: Principal | None
    ) -> dict[str, Any]:
        result = self._visible(
            self.resources.list_result(request.params, PAGE_SIZE), "resources", "resource", "uri", principal
        )
        return _for_version(result, "resources", client)

    def _resources_templates_list(
        self, client: ClientView, request: jsonrpc.Request, principal: Principal | None
    ) -> dict[str, Any]:
        result = self._visible(
            self.resources.templates_result(request.params, PAGE_SIZE),
            "resourceTemplates",
            "resource",
            "uriTemplate",
            principal,
        )
        return _for_version(result, "resourceTemplates", client)

    def _resources_read(
        self, client: ClientView, request: jsonrpc.Request, principal: Principal | None
    ) -> dict[str, Any] | Work:
        target, uri, _ = self.resources.find(request.params)
        registered = target.uri if isinstance(target, Resource) else target.uri_template
        self._allow(principal, "resource", registered, f"resources/read {uri!r}")
        if target.context_param is None:
            return self.resources.read(request.params)
        params = request.params
        return Work("resources/read", uri, {}, lambda ctx: self.resources.read(params, ctx))

    def subscribe(self, session_id: str, params: dict[str, Any], principal: Principal | None = None) -> dict[str, Any]:
        """``resources/subscribe`` for a session (its updates then reach the session's standalone stream).

        Raises:
            ProtocolError: as :meth:`zemcp.core.resources.ResourceRegistry.subscribe`.
            InsufficientScope: the resource needs scopes ``principal`` lacks (its updates would
                tell of a resource it may not read).
        """
        target, uri, _ = self.resources.find(params)
        registered = target.uri if isinstance(target, Resource) else target.uri_template
        self._allow(principal, "resource", registered, f"resources/subscribe {uri!r}")
        return self.resources.subscribe(session_id, params)

    def _prompts_list(
        self, client: ClientView, request: jsonrpc.Request, principal: Principal | None
    ) -> dict[str, Any]:
        result = self._visible(
            self.prompts.list_result(request.params, PAGE_SIZE), "prompts", "prompt", "name", principal
        )
        return _for_version(result, "prompts", client)

    def _prompts_get(
        self, client: ClientView, request: jsonrpc.Request, principal: Principal | None
    ) -> dict[str, Any] | Work:
        prompt = self.prompts.require(request.params.get("name"), "prompts/get", "params.name")
        self._allow(principal, "prompt", prompt.name, f"prompts/get {prompt.name!r}")
        arguments = prompt.check(request.params.get("arguments"))
        if prompt.context_param is None:
            return prompt.render(arguments)
        return Work("prompts/get", prompt.name, arguments, lambda ctx: prompt.render(arguments, ctx))

    def _completion_complete(
        self, client: ClientView, request: jsonrpc.Request, principal: Principal | None
    ) -> dict[str, Any]:
        ref = request.params.get("ref")
        if principal is not None and isinstance(ref, dict):
            if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
                self._allow(principal, "prompt", ref["name"], f"completion/complete for prompt {ref['name']!r}")
            elif ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
                self._allow(principal, "resource", ref["uri"], f"completion/complete for {ref['uri']!r}")
        return self.completions.complete(request.params)

    def _tools_call(
        self, client: ClientView, request: jsonrpc.Request, principal: Principal | None
    ) -> dict[str, Any] | Work:
        name = request.params.get("name")
        arguments = request.params.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(name, str):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: tools/call needs params.name (a string)")
        tool = self.tools.get(name)
        if tool is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {name!r}; tools/list names the available tools")
        self._allow(principal, "tool", tool.name, f"tools/call {tool.name!r}")
        if not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: params.arguments must be an object")
        # Arguments the tool asks the user for (elicit_missing): the rest must be valid already.
        missing = tool.missing(arguments)
        problem = tool.check_partial(arguments, missing) if missing else tool.check_arguments(arguments)
        if problem is None and missing and not client.client_supports_elicit("form"):
            # Deterministic in every version and era: the model can retry with the argument.
            return error_result(f"Error: missing required argument: {', '.join(missing)}")
        if problem is not None:
            if versions.since(client.protocol_version, versions.ELICITATION_MODES):
                # SEP-1303: input validation failures are tool errors the model can correct.
                return error_result(problem)
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: {problem}")
        structured = versions.since(client.protocol_version, versions.TITLES_AND_STRUCTURED_OUTPUT)

        def run(ctx: Context) -> dict[str, Any]:
            result = tool.run(arguments, ctx, missing)
            if not structured:
                # structuredContent arrived in 2025-06-18; older clients read the text item.
                result.pop("structuredContent", None)
            return result

        return Work("tools/call", tool.name, arguments, run)

    # -- status ------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
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
            "running": self._running,
            "call_budget": self.settings.call_budget,
            "listen_streams": self.subscriptions.count(),
            "listen_budget": self.settings.listen_budget,
            "resuming_streams": self._resuming,
            "standalone_streams": self._standalone,
            "standalone_budget": self.settings.standalone_budget,
            "replay_bytes": self.replay_budget.held,
        }


def _scopes(scopes: Any) -> tuple[str, ...]:
    """Registration ``scopes=`` as a tuple of scope tokens.

    Raises:
        ValueError: not a list or tuple of non-empty strings without spaces.
    """
    if not isinstance(scopes, (list, tuple)) or not all(isinstance(s, str) and s and " " not in s for s in scopes):
        raise ValueError(f"scopes must be a list of scope names (non-empty strings without spaces), got {scopes!r}")
    return tuple(scopes)


def _for_version(result: dict[str, Any], key: str, client: ClientView) -> dict[str, Any]:
    """Leave out of list items the fields the client's protocol version does not have.

    ``title`` and ``outputSchema`` arrived in 2025-06-18, tool ``annotations`` in 2025-03-26.
    """
    version = client.protocol_version
    drop = (
        {"title", "outputSchema"} if not versions.since(version, versions.TITLES_AND_STRUCTURED_OUTPUT) else set()
    ) | ({"annotations"} if not versions.since(version, versions.ANNOTATIONS_AND_COMPLETIONS) else set())
    if drop:
        result[key] = [{k: v for k, v in item.items() if k not in drop} for item in result[key]]
    return result
