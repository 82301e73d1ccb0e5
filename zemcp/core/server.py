"""The MCP server core: registries, capabilities and the era-agnostic methods, independent of HTTP.

Implements MCP server/tools, server/resources, server/prompts and server/utilities
(completion, pagination) once, for both protocol eras. The era-specific request handling
lives beside it: :mod:`zemcp.eras.handshake.era` (``initialize``, sessions, server-to-client requests
pushed on the stream; 2024-11-05 to 2025-11-25) and :mod:`zemcp.eras.modern.era` (the stateless
2026-07-28 envelope and multi-round-trip requests). Both call :meth:`Server.prepare` for a
method's work and :meth:`Server.execute` to run a handler with a :class:`zemcp.Context` on
the request's :class:`zemcp.core.exchange.Exchange`. What a server offers is registered
through the decorators it inherits from :class:`zemcp.core.registrar.Registrar`; the call
budget it admits requests to is its :class:`zemcp.core.admission.Admission`.

Handlers that may talk to the client run on the request's own thread under gunicorn
(:class:`zemcp.replies.direct.DirectSink`), and elsewhere on a bounded thread pool created once
per process, so that the HTTP thread can tell "plain JSON answer" from "the handler is
streaming" (see :mod:`zemcp.replies.sinks`).
"""

from __future__ import annotations

import functools
import logging
import os
import time
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from zemcp import logsafe
from zemcp.auth.access import OPEN, Access
from zemcp.auth.authorization import Authorization
from zemcp.auth.principal import Principal
from zemcp.config import Settings
from zemcp.core.admission import Admission
from zemcp.core.audit import AuditHook, AuditTrail
from zemcp.core.context import Context
from zemcp.core.errors import CallFinished, URLElicitationRequired
from zemcp.core.exchange import Exchange, RoundEnded
from zemcp.core.registrar import Icons, Registrar
from zemcp.core.resources import Resource, Subscriber
from zemcp.core.results import error_result
from zemcp.core.tasks import TaskRunner
from zemcp.core.tools import Tool
from zemcp.observe.telemetry import Telemetry
from zemcp.protocol import apps, jsonrpc, versions
from zemcp.protocol.caching import NO_CACHE, CacheHint
from zemcp.protocol.capabilities import ClientView
from zemcp.protocol.elicitation import ElicitAborted, RequestCancelled, ServerStopping, SessionEnded
from zemcp.protocol.icons import checked_icons
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from zemcp.protocol.pagination import PAGE_SIZE, list_result
from zemcp.protocol.tasks import EXTENSION, TASKS_VERSION
from zemcp.state import open_state
from zemcp.state.session import Session, fingerprint
from zemcp.state.unavailable import StateUnavailable
from zemcp.version import __version__

log = logging.getLogger("zemcp.server")

#: JSON-RPC error of a request that needs URL-mode elicitations first (MCP 2025-11-25 only).
URL_ELICITATION_REQUIRED = -32042

_SERVERS: weakref.WeakSet[Server] = weakref.WeakSet()


def shutdown_all(grace: float = 0.0) -> int:
    """End every session of every :class:`Server` of this process (the process is stopping),
    and let their tasks run for up to ``grace`` [seconds]; returns how many sessions ended."""
    return sum(server.shutdown(grace) for server in list(_SERVERS))


def serve_all() -> None:
    """Every :class:`Server` of this process begins serving (:attr:`zemcp.state.seams.State.serving`):
    with shared state, what it announces from now on, from a request or from a thread of the
    application's own, reaches the streams of every process. gunicorn's ``post_worker_init``
    calls it once the worker has loaded the application; a request calls it too, for servers
    made later or served elsewhere.

    Raises:
        nothing: a backend that cannot join now (Redis out of reach) joins at its next try.
    """
    for server in list(_SERVERS):
        server.state.serving()


class Work(NamedTuple):
    """A request whose handler may talk to the client: run it with :meth:`Server.execute`.

    Attributes:
        method: ``tools/call``, ``prompts/get`` or ``resources/read``.
        target: the tool or prompt name, or the resource URI.
        arguments: the request's arguments (``{}`` for a resource), what a 2026-07-28
            ``requestState`` is bound to.
        run: the handler call, ``run(ctx) -> result dict``.
        auth: the principal of the request's access token (``ctx.auth``), None without
            authorization.
        tool, missing: of a ``tools/call``, the tool and the arguments it asks the user for.
        user: whom the request acts for (``ctx.user``): the site's user when a framework
            view serves the endpoint, else the principal; kept for the call's task too.
    """

    method: str
    target: str
    arguments: dict[str, Any]
    run: Callable[[Context], dict[str, Any]]
    auth: Principal | None = None
    tool: Tool | None = None
    missing: tuple[str, ...] = ()
    user: Any = None

    @property
    def is_tool(self) -> bool:
        """True for ``tools/call``, whose failures are ``isError`` results rather than errors."""
        return self.method == "tools/call"


class Server(Registrar):
    """An MCP server: tools, resources, prompts, sessions and the pending elicitations of one process.

    Args:
        name: ``serverInfo.name``.
        version: ``serverInfo.version``.
        title: ``serverInfo.title``, a display name (2025-06-18 on).
        description: ``serverInfo.description``: what the server is for (2025-11-25 on).
        website_url: ``serverInfo.websiteUrl``: an absolute ``https:`` or ``http:`` URL (2025-11-25 on).
        icons: ``serverInfo.icons``: :class:`zemcp.Icon` or dicts in the schema's shape, as
            for :meth:`tool` (2025-11-25 on).
        instructions: optional ``instructions`` returned by initialize and ``server/discover``.
        settings: limits and timeouts; ``Settings.from_env()`` when omitted.
        auth: the authorization of the endpoint (:class:`zemcp.auth.Authorization`, for a
            verifier of your own); built from the ``auth_*`` settings when omitted (None
            when ``auth`` is ``off``).
    Raises:
        ValueError: a ``title`` or ``description`` that is not a string, a ``website_url``
            that is not an absolute http(s) URL, or bad ``icons``.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.0.0",
        *,
        title: str | None = None,
        description: str | None = None,
        website_url: str | None = None,
        icons: Icons = (),
        instructions: str | None = None,
        settings: Settings | None = None,
        auth: Authorization | None = None,
    ):
        self.name = name
        self.version = version
        self.instructions = instructions
        self._implementation = implementation_info(name, version, title, description, website_url, icons)
        self.settings = settings if settings is not None else Settings.from_env()
        self.auth = auth if auth is not None else Authorization.from_settings(self.settings, name)
        self.state = open_state(self.settings, self._session_ended)
        super().__init__(self.state.fanout)
        self.sessions = self.state.sessions
        self.pending = self.state.pending
        self.replay_budget = self.state.replay_budget
        self.admission = Admission(self.settings, self.subscriptions)
        #: Where the audit records of this server go: the ``zemcp.audit`` log and the hooks of :meth:`on_audit`.
        self.audit = AuditTrail(self.settings)
        #: The tasks of this server in this process.
        self.tasks = TaskRunner(
            self.settings, self.state.tasks, self.pending, self.execute, self.abort, audit=self.audit
        )
        self.started = time.time()
        #: Spans, metrics and request records of this server (:mod:`zemcp.observe`).
        # The exporters outlive a server (one per process): they must not keep it alive.
        this = weakref.ref(self)
        self.telemetry = Telemetry(self.settings, lambda: _gauges(this()), self.sessions.shared)
        _SERVERS.add(self)
        self._methods: dict[str, Callable[[ClientView, jsonrpc.Request, Access], dict[str, Any] | Work]] = {
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "resources/list": self._resources_list,
            "resources/templates/list": self._resources_templates_list,
            "resources/read": self._resources_read,
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "completion/complete": self._completion_complete,
        }
        # Asked on every request: made once.
        self._method_names = frozenset(self._methods)
        self._handler_scopes: tuple[Callable[[Context], AbstractContextManager[object]], ...] = ()

    def on_audit(self, hook: AuditHook) -> AuditHook:
        """Hand every audit record of this server to ``hook``: a site stores them where it wants
        (a database table, a queue). Usable as a decorator.

        One :class:`zemcp.AuditRecord` per ``tools/call`` (a task's when its run ends),
        ``prompts/get`` and ``resources/read`` once it ends, in both eras and over both
        transports, whether ``audit_log`` is on or not (a hook makes the records; the log
        writes them only when on). The hook runs on the thread that served the call, before
        the client gets the response: keep it short (or queue the record). An exception it
        raises is logged on ``zemcp.audit`` and never reaches the call. Register hooks before
        the server is served (``McpApp(server)``, ``zemcp.django.view(server)``, stdio): the
        request pipeline is built then, and leaves the audit layer out when nothing records.

        Args:
            hook: ``hook(record)``; its return value is ignored.
        Returns:
            ``hook``, unchanged.
        Raises:
            TypeError: ``hook`` is not callable.
            RuntimeError: the server is served already without the audit layer (the message
                says what to do instead).
        """
        self.audit.add_hook(hook)
        return hook

    # -- capabilities and sessions -----------------------------------------------------

    def implementation(self, version: str = versions.LATEST) -> dict[str, Any]:
        """The server's ``Implementation`` (``serverInfo`` of initialize, and
        ``_meta["io.modelcontextprotocol/serverInfo"]`` of every 2026-07-28 result) with the
        fields protocol ``version`` knows: ``title`` from 2025-06-18, ``description``,
        ``websiteUrl`` and ``icons`` from 2025-11-25 (MCP schema ``Implementation``).

        Returns:
            a dict the caller must not change (shared by the requests of that version).
        """
        info = self._implementation
        if not versions.since(version, versions.ICONS):
            info = {k: v for k, v in info.items() if k not in ("description", "websiteUrl", "icons")}
        if not versions.since(version, versions.TITLES_AND_STRUCTURED_OUTPUT):
            info = {k: v for k, v in info.items() if k != "title"}
        return info

    def capabilities(self, version: str = versions.LATEST) -> dict[str, Any]:
        """``ServerCapabilities`` (initialize, ``server/discover``): exactly the features this
        server has that protocol ``version`` knows (``completions`` arrived in 2025-03-26).

        The MCP Apps extension (``extensions["io.modelcontextprotocol/ui"]``) is advertised
        in every version when the server has an app (:meth:`app_resource`, ``ui_resource=``);
        the tasks extension at 2026-07-28 when a tool may run as a task.

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
        extensions: dict[str, Any] = {}
        if self.tools.tasks:
            if versions.is_modern(version):
                extensions[EXTENSION] = {}
            elif version == TASKS_VERSION:
                capabilities["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        if self.apps:
            # MCP Apps negotiates through extensions in every version (apps.mdx, "Capability Negotiation").
            extensions[apps.EXTENSION] = {}
        if extensions:
            capabilities["extensions"] = extensions
        return capabilities

    def shutdown(self, grace: float = 0.0) -> int:
        """End every session and listen stream (the process is stopping); returns how many sessions ended.

        Waiting handlers wake with ``SessionEnded`` and their streams finish, so a graceful
        stop does not wait for elicitation answers that would arrive at a process going away.
        Listen streams end with a result for their request (a graceful end). Where sessions
        are shared with other processes (Redis), they live on: only the calls running here
        end (``ServerStopping``), and the count is 0. Running tasks get ``grace`` [seconds],
        then fail (:meth:`zemcp.core.tasks.TaskRunner.stop`).
        """
        self.tasks.stop(grace)  # before the sessions end: their end would cancel the tasks
        self.subscriptions.close_all({"resultType": "complete"})
        if not self.sessions.shared:
            return sum(self.sessions.end(s.id, "the server is shutting down") for s in self.sessions.sessions())
        # Shared sessions live on in the other processes: end only what runs here.
        stopping = ServerStopping()
        for session in self.sessions.local():
            for call in session.calls():
                self.abort(call, stopping)
        self.sessions.close()
        return 0

    def end_session(self, session_id: str) -> bool:
        """End a session at the client's request (DELETE); False when it is not live."""
        return self.sessions.end(session_id, "deleted by the client")

    def _session_ended(self, session: Session, why: str) -> None:
        self.telemetry.session_ended(session.created, session.protocol_version, session.transport)
        self.tasks.session_ended(session)
        reason = SessionEnded(why)
        for call in session.calls():
            call.abort(reason)
        self.subscriptions.drop_session(session.id)
        session.streams.close()
        n = self.pending.end_session(session.id, reason)
        label = fingerprint(session.id)
        log.info(
            "session %s ended (%s); %d pending server-to-client request(s) ended",
            label,
            why,
            n,
            extra={"event": "session_ended", "session": label},
        )

    def abort(self, call: Any, reason: ElicitAborted) -> None:
        """End a running request's waits (its handler raises ``reason`` at its next ``ctx`` use).

        Only a request of a session can wait in the table of waiting calls; a 2026-07-28
        round never does, so ending one leaves the table alone.
        """
        # A call that never asked holds nothing in the table: no need to look there.
        if call.abort(reason) and call.session is not None and getattr(call, "asked", True):
            self.pending.end_call(call, reason)

    # -- the era-agnostic methods --------------------------------------------------------

    def methods(self) -> frozenset[str]:
        """The methods :meth:`prepare` serves."""
        return self._method_names

    def prepare(self, client: ClientView, request: jsonrpc.Request, access: Access = OPEN) -> dict[str, Any] | Work:
        """Serve one of :meth:`methods` for ``client``, or set up its handler's work.

        Args:
            client, request: who asks and what.
            access: what the request's principal may see and use (lists show only that);
                :data:`zemcp.auth.access.OPEN` without authorization.
        Returns:
            the result dict of a request answered at once, or a :class:`Work` for a handler
            that may talk to the client (tools, and prompts and resources taking a Context).
        Raises:
            ProtocolError: the request is invalid (the error to answer with).
            InsufficientScope: the tool, prompt or resource needs scopes the principal lacks.
            KeyError: ``request.method`` is not one of :meth:`methods`.
        """
        self.state.serving()  # either era: from now on, what this process announces reaches every process
        outcome = self._methods[request.method](client, request, access)
        if isinstance(outcome, Work) and access.user is not None:
            return outcome._replace(auth=access.principal, user=access.user)
        return outcome

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

    def around_handlers(self, scope: Callable[[Context], AbstractContextManager[object]]) -> None:
        """Enter ``scope(ctx)`` around every handler run of this server, on the thread that runs it.

        A handler runs on its request's thread, on zemcp's handler pool or on a task thread,
        none of them a thread the site's framework manages: what the framework does around a
        request of its own (Django closes its stale database connections) a scope does around a
        handler run (:mod:`zemcp.django.connections` registers that one); what a framework's
        request gives its views a scope gives the handler (:mod:`zemcp.flask` pushes a copy of
        the Flask request context of ``ctx.request``, or an app context without one). The scope is entered
        just before the handler runs (an ``async def`` handler's event loop runs inside it),
        and exited once it returned or raised, including when a 2026-07-28 round ends to ask
        the client. Scopes are entered in the order they were registered; registering one
        again changes nothing.

        Args:
            scope: a factory of context managers (a ``contextlib.contextmanager`` function),
                called once per handler run with the handler's :class:`zemcp.Context`
                (``ctx.request`` and ``ctx.user`` say whom the run serves).
        Raises:
            nothing here; what a scope raises on entry fails that handler run as an internal
            error (logged), never the server.
        """
        if scope not in self._handler_scopes:
            self._handler_scopes = (*self._handler_scopes, scope)

    def execute(self, work: Work, exchange: Exchange) -> dict[str, Any] | None:
        """Run ``work``'s handler with a Context on ``exchange``; never raises what the handler raised.

        The handler runs with the span of the exchange's operation (:attr:`Exchange.operation
        <zemcp.core.exchange.Exchange.operation>`) current, so that its own spans are children
        of the request's, and its questions to the client are spans of their own; and inside
        the scopes registered with :meth:`around_handlers`.

        Returns:
            the JSON-RPC response; None when the client cancelled the request (no response,
            MCP basic/utilities/cancellation).
        Raises:
            RoundEnded: (2026-07-28) the round ends to ask the client, or the replay broke.
        """
        request_id = exchange.request_id
        operation = exchange.operation
        try:
            if work.is_tool:
                operation.capture_arguments(work.arguments)
            with operation.activate():
                ctx = Context(exchange, work.auth, work.user)
                if not self._handler_scopes:
                    return jsonrpc.result(request_id, work.run(ctx))
                with ExitStack() as scopes:
                    for scope in self._handler_scopes:
                        scopes.enter_context(scope(ctx))
                    return jsonrpc.result(request_id, work.run(ctx))
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
            # The session ended or the client left; the error explains it to whoever reads, and
            # the audit record of any handler (a tool's notes it already) says it was cancelled.
            if exchange.ending is None:
                exchange.ending = exc
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

    def _tools_list(self, client: ClientView, request: jsonrpc.Request, access: Access) -> dict[str, Any]:
        definitions = self.tools.definitions()
        if access.filters:
            # Filtered before paging, so that every page is full.
            definitions = [d for d in definitions if access.visible("tool", d["name"])]
        return _for_version(
            list_result(request.params, "tools", definitions, PAGE_SIZE), "tools", client, self.tools.tasks
        )

    def _resources_list(self, client: ClientView, request: jsonrpc.Request, access: Access) -> dict[str, Any]:
        result = self._visible(
            self.resources.list_result(request.params, PAGE_SIZE), "resources", "resource", "uri", access
        )
        return _for_version(result, "resources", client)

    def _resources_templates_list(self, client: ClientView, request: jsonrpc.Request, access: Access) -> dict[str, Any]:
        result = self._visible(
            self.resources.templates_result(request.params, PAGE_SIZE),
            "resourceTemplates",
            "resource",
            "uriTemplate",
            access,
        )
        return _for_version(result, "resourceTemplates", client)

    def _resources_read(self, client: ClientView, request: jsonrpc.Request, access: Access) -> dict[str, Any] | Work:
        target, uri, _ = self.resources.find(request.params, access.permits)
        registered = target.uri if isinstance(target, Resource) else target.uri_template
        access.check("resource", registered, f"resources/read {uri!r}")
        if target.context_param is None:
            return self.resources.read(request.params)
        params = request.params
        return Work("resources/read", uri, {}, lambda ctx: self.resources.read(params, ctx))

    def subscribe(self, session: Subscriber, params: dict[str, Any], access: Access = OPEN) -> dict[str, Any]:
        """``resources/subscribe`` for a session (its updates then reach the session's standalone stream).

        Raises:
            ProtocolError: as :meth:`zemcp.core.resources.ResourceRegistry.subscribe`.
            InsufficientScope: the resource needs scopes the principal lacks (its updates would
                tell of a resource it may not read).
        """
        target, uri, _ = self.resources.find(params, access.permits)
        registered = target.uri if isinstance(target, Resource) else target.uri_template
        access.check("resource", registered, f"resources/subscribe {uri!r}")
        return self.resources.subscribe(session, params)

    def _prompts_list(self, client: ClientView, request: jsonrpc.Request, access: Access) -> dict[str, Any]:
        result = self._visible(self.prompts.list_result(request.params, PAGE_SIZE), "prompts", "prompt", "name", access)
        return _for_version(result, "prompts", client)

    def _prompts_get(self, client: ClientView, request: jsonrpc.Request, access: Access) -> dict[str, Any] | Work:
        prompt = self.prompts.require(request.params.get("name"), "prompts/get", "params.name", access.permits)
        access.check("prompt", prompt.name, f"prompts/get {prompt.name!r}")
        arguments = prompt.check(request.params.get("arguments"))
        if prompt.context_param is None:
            return prompt.render(arguments)
        return Work("prompts/get", prompt.name, arguments, lambda ctx: prompt.render(arguments, ctx))

    def _completion_complete(self, client: ClientView, request: jsonrpc.Request, access: Access) -> dict[str, Any]:
        ref = request.params.get("ref")
        if access.principal is not None and isinstance(ref, dict):
            if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
                access.check("prompt", ref["name"], f"completion/complete for prompt {ref['name']!r}")
            elif ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
                access.check("resource", ref["uri"], f"completion/complete for {ref['uri']!r}")
        return self.completions.complete(request.params, access.permits)

    def _tools_call(self, client: ClientView, request: jsonrpc.Request, access: Access) -> dict[str, Any] | Work:
        name = request.params.get("name")
        arguments = request.params.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(name, str):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: tools/call needs params.name (a string)")
        tool = self.tools.get(name)
        if tool is None or not access.permits("tool", tool.name):
            # One the user may not use is unknown too: nothing tells that it exists.
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {name!r}; tools/list names the available tools")
        access.check("tool", tool.name, f"tools/call {tool.name!r}")
        if not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: params.arguments must be an object")
        # Arguments the tool asks the user for (elicit_missing): the rest must be valid already.
        missing = tool.missing(arguments) if tool.elicited else []
        problem = tool.check_partial(arguments, missing) if missing else tool.check_arguments(arguments)
        if problem is None and missing and not client.client_supports_elicit("form"):
            # Deterministic in every version and era: the model can retry with the argument.
            return error_result(f"Error: missing required argument: {', '.join(missing)}")
        if problem is not None:
            if versions.since(client.protocol_version, versions.ELICITATION_MODES):
                # SEP-1303: input validation failures are tool errors the model can correct.
                return error_result(problem)
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: {problem}")
        run = tool_runner(tool, arguments, missing, client.protocol_version)
        return Work("tools/call", tool.name, arguments, run, tool=tool, missing=tuple(missing))

    # -- status ------------------------------------------------------------------------

    def gauges(self) -> dict[str, Any]:
        """The live figures :data:`zemcp.observe.instruments.GAUGES` names: running calls and the
        budget, pending elicitations, open streams by kind, live sessions (0 while shared
        sessions are out of reach, so that a scrape still reports everything else)."""
        try:
            sessions = len(self.sessions)
        except StateUnavailable:
            sessions = 0
        return {
            "zemcp.calls.running": self.admission.running,
            "zemcp.calls.budget": self.settings.call_budget,
            "zemcp.elicitations.pending": self.pending.count(),
            "zemcp.streams.open": {
                "standalone": self.admission.standalone,
                "listen": self.subscriptions.count(),
                "resuming": self.admission.resuming,
            },
            "zemcp.sessions.live": sessions,
        }

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
            "running": self.admission.running,
            "call_budget": self.settings.call_budget,
            "listen_streams": self.subscriptions.count(),
            "listen_budget": self.settings.listen_budget,
            "resuming_streams": self.admission.resuming,
            "standalone_streams": self.admission.standalone,
            "standalone_budget": self.settings.standalone_budget,
            "replay_bytes": self.replay_budget.held,
            "tasks_running": self.tasks.running,
            "tasks_held": len(self.state.tasks),
        }


def implementation_info(
    name: str, version: str, title: str | None, description: str | None, website_url: str | None, icons: Icons
) -> dict[str, Any]:
    """A server's whole ``Implementation`` (MCP 2025-11-25 schema), checked.

    Args:
        name, version, title, description, website_url, icons: as :class:`Server` takes them.
    Returns:
        ``{"name", "version", "title"?, "description"?, "websiteUrl"?, "icons"?}``.
    Raises:
        ValueError: as :class:`Server` says.
    """
    info: dict[str, Any] = {"name": name, "version": version}
    for key, value in (("title", title), ("description", description)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"Server {name!r}: {key} must be a string, got {type(value).__name__}")
        if value:
            info[key] = value
    if website_url is not None:
        parts = urlsplit(website_url) if isinstance(website_url, str) else None
        if parts is None or parts.scheme.lower() not in ("https", "http") or not parts.netloc:
            raise ValueError(
                f"Server {name!r}: website_url must be an absolute URL such as 'https://example.com/', "
                f"got {website_url!r}"
            )
        info["websiteUrl"] = website_url
    checked = checked_icons(icons, f"Server {name!r}")
    if checked:
        info["icons"] = checked
    return info


def _gauges(server: Server | None) -> dict[str, Any] | None:
    """The gauges of ``server``; None once it is gone (the exporters outlive a server)."""
    return server.gauges() if server is not None else None


def tool_runner(
    tool: Tool, arguments: dict[str, Any], missing: list[str] | tuple[str, ...], version: str
) -> Callable[[Context], dict[str, Any]]:
    """``run(ctx) -> CallToolResult`` of a ``tools/call`` for a client of protocol ``version``."""
    if versions.since(version, versions.TITLES_AND_STRUCTURED_OUTPUT):
        # A partial, not a lambda: one frame less between the request and the handler.
        return functools.partial(tool.run, arguments, missing=missing)

    def run(ctx: Context) -> dict[str, Any]:
        result = tool.run(arguments, ctx, missing)
        # structuredContent arrived in 2025-06-18; older clients read the text item.
        result.pop("structuredContent", None)
        return result

    return run


def _for_version(result: dict[str, Any], key: str, client: ClientView, tasks: bool = False) -> dict[str, Any]:
    """Leave out of list items the fields the client's protocol version does not have.

    ``title`` and ``outputSchema`` arrived in 2025-06-18, tool ``annotations`` in 2025-03-26;
    ``execution`` (which items have when ``tasks``) is only in 2025-11-25; ``icons`` arrived in
    2025-11-25. ``_meta`` is in every version, and stays.
    """
    version = client.protocol_version
    drop = (
        ({"icons"} if not versions.since(version, versions.ICONS) else set())
        | ({"title", "outputSchema"} if not versions.since(version, versions.TITLES_AND_STRUCTURED_OUTPUT) else set())
        | ({"annotations"} if not versions.since(version, versions.ANNOTATIONS_AND_COMPLETIONS) else set())
        | ({"execution"} if tasks and version != TASKS_VERSION else set())
    )
    if drop:
        result[key] = [{k: v for k, v in item.items() if k not in drop} for item in result[key]]
    return result
