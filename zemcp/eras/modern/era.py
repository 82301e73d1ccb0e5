"""The stateless 2026-07-28 era: the per-request envelope, no sessions, whatever the transport.

MCP 2026-07-28 (basic/versioning, basic/transports/streamable-http, basic/patterns/mrtr):
every request carries its protocol version, client capabilities and client info in
``params._meta``, mirrored in the ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name``
headers; nothing is remembered between requests. A request is checked in this order, each
step answering with its error when it fails:

1. ``params._meta`` holds the envelope (-32602, HTTP 400);
2. the standard headers match the body (-32020 HeaderMismatch, 400);
3. the version is served here (-32022 UnsupportedProtocolVersion with ``data.supported``
   and ``data.requested``, 400);
4. the ``Mcp-Param-*`` headers of a tool's ``x-mcp-header`` arguments match (-32020, 400);
5. the method exists in this revision (-32601, 404: also ``initialize``, ``ping``,
   ``logging/setLevel`` and ``resources/(un)subscribe``, which it removed).

Every result carries ``resultType`` and ``_meta["io.modelcontextprotocol/serverInfo"]``;
list results, ``resources/read`` and ``server/discover`` carry the caching hints ``ttlMs``
and ``cacheScope`` (SEP-2549). A handler that asks the client something ends the round with
an ``InputRequiredResult`` and is replayed on the retry (:mod:`zemcp.eras.modern.mrtr`); its
``requestState`` is sealed and bound to the request (:mod:`zemcp.eras.modern.request_state`), so any
worker or instance with the same key can serve any round.

:meth:`ModernEra.serve` takes one message and its :class:`zemcp.eras.requestcontext.RequestContext`
and gives its outcome, whatever the transport: the header checks (steps 2 and 4) apply where the
transport has headers (HTTP), and the transport says what the outcome means on its wire (HTTP:
:mod:`zemcp.http.outcomes`, where each error code's status is).
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from zemcp import logsafe
from zemcp.core.exchange import RoundEnded
from zemcp.core.resources import RESOURCE_NOT_FOUND
from zemcp.core.results import error_result
from zemcp.core.server import Server, Work
from zemcp.eras.modern import listen, mrtr, tasks
from zemcp.eras.modern.request_state import RequestStateError, RequestStateSealer, StateTooLarge, new_key
from zemcp.eras.requestcontext import Outcome, RequestContext, Running
from zemcp.protocol import header_values, headers as mcp_headers, jsonrpc, param_headers, versions
from zemcp.protocol.caching import NO_CACHE, CacheHint
from zemcp.protocol.capabilities import ClientView
from zemcp.protocol.elicitation import ClientDisconnected
from zemcp.protocol.envelope import (
    META_SERVER_INFO,
    MISSING_CAPABILITY,
    check_version,
    client_view,
)
from zemcp.protocol.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, ProtocolError

log = logging.getLogger("zemcp.modern")

#: Methods whose results carry ``ttlMs`` and ``cacheScope``.
CACHEABLE = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read", "server/discover"}
)


# One sealer per server, whichever of its apps serves a round.
_SEALERS: weakref.WeakKeyDictionary[Server, RequestStateSealer] = weakref.WeakKeyDictionary()
_SEALERS_LOCK = threading.Lock()


def sealer_of(server: Server) -> RequestStateSealer:
    """The ``requestState`` sealer of ``server``: keyed by ``request_state_key``, or without
    one by a key of the server's own, so that only this server (this process) can open the
    states it seals."""
    with _SEALERS_LOCK:
        sealer = _SEALERS.get(server)
        if sealer is None:
            settings = server.settings
            sealer = RequestStateSealer(
                settings.request_state_key or (new_key(),), settings.elicitation_timeout, server.name
            )
            _SEALERS[server] = sealer
        return sealer


def retire_codes(message: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC response with the error codes 2026-07-28 retired replaced by their successors:
    resource not found (-32002) is invalid params (-32602) here, ``error.data.uri`` kept."""
    error = message.get("error")
    if isinstance(error, dict) and error.get("code") == RESOURCE_NOT_FOUND:
        error["code"] = INVALID_PARAMS
    return message


class ModernEra:
    """Serves 2026-07-28 requests of one :class:`Server` statelessly.

    Args:
        server: the MCP server core.
    """

    def __init__(self, server: Server):
        self.server = server
        self.settings = server.settings
        #: Seals and opens the ``requestState`` of multi-round-trip requests.
        self.request_states = sealer_of(server)

    def serve(self, message: jsonrpc.Message, context: RequestContext) -> Outcome:
        """Serve one message of the stateless era, checked in the order above.

        Args:
            message: the message.
            context: its context (``headers`` None: a transport without a header layer,
                stdio, where all request metadata travels in ``params._meta``). A
                ``requestState`` sealed for one principal opens only for the same one.
        Returns:
            a JSON-RPC response (an invalid request's error included, its retired codes
            replaced: :func:`retire_codes`); a :class:`zemcp.eras.requestcontext.Running` call;
            the sink of a ``subscriptions/listen`` stream; None for a notification (the
            revision defines none from the client: closing a stream cancels).
        Raises:
            ProtocolError: a JSON-RPC response, which a 2026-07-28 client never sends.
            InsufficientScope: the principal lacks a scope of the tool, prompt or resource.
            ListenLimitReached, Busy, ShareTaken: no room for a listen stream.
            TaskLimitReached: a task cannot be created (``max_tasks``, the client's share, a stop).
        """
        if isinstance(message, jsonrpc.Notification):
            return None
        if isinstance(message, jsonrpc.Response):
            raise ProtocolError(
                INVALID_REQUEST,
                "Invalid Request: a 2026-07-28 client sends no JSON-RPC "
                "responses; answers to input requests travel in the retried request's inputResponses",
            )
        try:
            client = client_view(message)
            headers = context.headers
            if headers is not None:
                try:
                    mcp_headers.check_standard(headers, message.method, message.params, client.protocol_version)
                except header_values.HeaderError as exc:
                    raise ProtocolError(header_values.HEADER_MISMATCH, exc.message) from None
            check_version(client)
            if headers is not None and message.method == "tools/call":
                self._check_param_headers(headers, message)
            outcome = self._dispatch(client, message, context)
        except ProtocolError as exc:
            outcome = jsonrpc.error(message.id, exc.code, exc.message, exc.data)
        return retire_codes(outcome) if isinstance(outcome, dict) else outcome

    def _dispatch(self, client: ClientView, message: jsonrpc.Request, context: RequestContext) -> Outcome:
        """Serve a request whose envelope, headers and version were checked."""
        method = message.method
        if method == "server/discover":
            return self.result(message.id, method, self.discover(), NO_CACHE)
        if method == "subscriptions/listen":
            return listen.open_listen(self.server, message, context, client)
        if method in tasks.METHODS:
            return self.result(message.id, method, tasks.serve(self.server, client, message, context.principal))
        if method in tasks.REMOVED:
            raise tasks.removed(method)
        if method not in self.server.methods():
            raise ProtocolError(
                METHOD_NOT_FOUND, f"Method not found: {method} is not a method of MCP {client.protocol_version}"
            )
        outcome = self.server.prepare(client, message, context.access)
        if isinstance(outcome, Work):
            if outcome.tool is not None and tasks.wants_task(self.server, client, outcome):
                if outcome.missing:
                    # The missing arguments are asked by multi-round-trip before the task exists.
                    work = tasks.asking_first(self.server, client, message, outcome, context.client)
                    return self._start(client, message, work, context)
                return self.result(
                    message.id, method, tasks.create(self.server, client, message, outcome, context.client)
                )
            return self._start(client, message, outcome, context)
        return self.result(message.id, method, outcome, self.server.cache_hint(message))

    def _check_param_headers(self, headers: Any, message: jsonrpc.Request) -> None:
        name = message.params.get("name")
        # A name that is no string (an object, a list) names no tool: tools/call refuses it with -32602.
        tool = self.server.tools.get(name) if isinstance(name, str) else None
        if tool is None or not tool.header_annotations:
            return
        try:
            param_headers.check_params(headers, tool.header_annotations, message.params.get("arguments") or {})
        except header_values.HeaderError as exc:
            raise ProtocolError(header_values.HEADER_MISMATCH, exc.message) from None

    def discover(self) -> dict[str, Any]:
        """The ``server/discover`` result (MCP 2026-07-28 server/discover), before decoration."""
        result: dict[str, Any] = {
            "supportedVersions": list(versions.ALL),
            "capabilities": self.server.capabilities(versions.STATELESS),
        }
        if self.server.instructions:
            result["instructions"] = self.server.instructions
        return result

    def result(
        self, request_id: jsonrpc.RequestId, method: str, result: dict[str, Any], cache: CacheHint = NO_CACHE
    ) -> dict[str, Any]:
        """A JSON-RPC result with what every 2026-07-28 result carries: ``resultType``,
        ``serverInfo`` in ``_meta``, and for a complete result of a cacheable method the
        caching hints (``cache``; an ``input_required`` result carries none)."""
        body = {"resultType": "complete", **result}
        meta = body.get("_meta")
        body["_meta"] = {
            **(meta if isinstance(meta, dict) else {}),
            META_SERVER_INFO: self.server.implementation(versions.STATELESS),
        }
        if method in CACHEABLE and body["resultType"] == "complete":
            body = {**body, **cache.fields()}
        return jsonrpc.result(request_id, body)

    # -- multi-round-trip requests -----------------------------------------------------

    def _start(self, client: ClientView, request: jsonrpc.Request, work: Work, context: RequestContext) -> Running:
        """Set up one round of ``work``; its sink tells JSON from stream.

        The rounds of one call share a call id, carried in the sealed ``requestState``: each
        round's span has it (``zemcp.mrtr.call``) with its number (``zemcp.mrtr.round``).
        """
        params = request.params
        token = params.get("requestState")
        state = None
        if token is not None:
            try:
                state = self.request_states.open(
                    token, method=work.method, target=work.target, arguments=work.arguments, principal=_key(work)
                )
            except RequestStateError as exc:
                hint = (
                    (
                        "; another process sealed it: give every worker and instance the same "
                        "ZEMCP_REQUEST_STATE_KEY (docs/deploy.md)"
                    )
                    if exc.reason == "unknown key"
                    else ""
                )
                log.warning(
                    "refused a requestState for %s %s: %s%s", work.method, logsafe.clip(work.target), exc.reason, hint
                )
                raise ProtocolError(
                    INVALID_PARAMS, f"Invalid params: {exc}", data={"reason": "invalid_request_state"}
                ) from None
        answers, asked, held = mrtr.parse_state(state)
        lineage = mrtr.Lineage.of(state)
        context.operation.annotate({"zemcp.mrtr.call": lineage.call, "zemcp.mrtr.round": lineage.round})
        responses = mrtr.check_responses(params.get("inputResponses"), asked)
        progress = params["_meta"].get("progressToken")
        sink = context.open_sink(None, None)
        round_ = mrtr.Round(
            client,
            request.id,
            sink,
            progress if jsonrpc.valid_id(progress) else None,
            answers,
            asked,
            held,
            responses,
            self.settings.elicitation_timeout,
        )
        round_.operation = context.operation
        round_.site_request = context.request
        # Closing the response stream is this era's cancellation (basic/patterns/cancellation).
        sink.on_close(lambda: None if sink.finished else round_.abort(ClientDisconnected()))

        def job() -> None:
            response = None
            try:
                try:
                    response = self.server.execute(work, round_)
                except RoundEnded:
                    pass
                response = self._finish(work, request, round_, response, lineage)
            except BaseException:
                log.exception("%s %s: the round could not be answered", work.method, logsafe.clip(work.target))
                response = jsonrpc.error(
                    request.id, jsonrpc.INTERNAL_ERROR, f"Internal error while serving {work.method}"
                )
            finally:
                # The layers hear of the end before the response is handed over.
                context.finish(response, round_.ending)
                sink.finish(response)

        return Running(job, sink)

    def _finish(
        self,
        work: Work,
        request: jsonrpc.Request,
        round_: mrtr.Round,
        response: dict[str, Any] | None,
        lineage: mrtr.Lineage,
    ) -> dict[str, Any] | None:
        """The round's response: an ``InputRequiredResult``, -32021, or the decorated result."""
        if isinstance(round_.ended, mrtr.InputRequired):
            round_.report_ignored(f"{work.method} {logsafe.clip(work.target)}")
            body, state = round_.input_required()
            state.update(lineage.next())
            try:
                body["requestState"] = self.request_states.seal(
                    state, method=work.method, target=work.target, arguments=work.arguments, principal=_key(work)
                )
            except StateTooLarge as exc:
                return jsonrpc.error(
                    request.id,
                    INVALID_PARAMS,
                    f"Invalid params: {exc}; send shorter answers (or arguments), or start the "
                    f"request again without requestState",
                )
            return self.result(request.id, work.method, body)
        if isinstance(round_.ended, mrtr.ReplayMismatch):
            log.warning("%s %s broke the replay contract: %s", work.method, logsafe.clip(work.target), round_.ended)
            text = str(round_.ended)
            if work.is_tool:
                return self.result(request.id, work.method, error_result(text))
            return jsonrpc.error(request.id, jsonrpc.INTERNAL_ERROR, f"{work.method} {work.target}: {text}")
        if response is None:
            return None
        if round_.unused_answers:
            log.warning(
                "%s %s returned without asking %d question(s) it had answers for: handlers must ask the same "
                "questions in the same order on every round",
                work.method,
                logsafe.clip(work.target),
                round_.unused_answers,
            )
        failed = "error" in response or response["result"].get("isError") is True
        if failed and round_.missing_capabilities:
            needed = ", ".join(
                f"{name}" + (f" ({', '.join(sorted(modes))} mode)" if modes else "")
                for name, modes in sorted(round_.missing_capabilities.items())
            )
            return jsonrpc.error(
                request.id,
                MISSING_CAPABILITY,
                f"Missing required client capability: {work.method} {work.target} needs "
                f"{needed}, which this request's clientCapabilities do not declare",
                {"requiredCapabilities": round_.missing_capabilities},
            )
        if "error" in response:
            return retire_codes(response)
        # A result that took answers depends on more than its cache key: never reusable.
        retried = request.params.get("requestState") is not None or request.params.get("inputResponses") is not None
        return self.result(
            request.id, work.method, response["result"], NO_CACHE if retried else self.server.cache_hint(request)
        )


def _key(work: Work) -> str | None:
    """What a ``requestState`` is bound to beyond the request: the principal, with authorization on."""
    return work.auth.key if work.auth is not None else None
