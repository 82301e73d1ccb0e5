"""The stateless 2026-07-28 era over Streamable HTTP: the per-request envelope, no sessions.

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
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from werkzeug.wrappers import Request

from zemcp import logsafe
from zemcp.auth.principal import InsufficientScope, Principal
from zemcp.core import observed
from zemcp.core.admission import Busy
from zemcp.core.exchange import RoundEnded
from zemcp.core.resources import RESOURCE_NOT_FOUND
from zemcp.core.results import error_result
from zemcp.core.server import Server, Work
from zemcp.eras.modern import listen, mrtr, tasks
from zemcp.eras.modern.refusals import refusal
from zemcp.eras.modern.request_state import RequestStateError, RequestStateSealer, StateTooLarge, new_key
from zemcp.observe.telemetry import NULL_OPERATION, REFUSAL, SERVED, Operation
from zemcp.protocol import header_values, headers as mcp_headers, jsonrpc, param_headers, versions
from zemcp.protocol.caching import NO_CACHE, CacheHint
from zemcp.protocol.capabilities import ClientView
from zemcp.protocol.elicitation import ClientDisconnected
from zemcp.protocol.envelope import (
    META_SERVER_INFO,
    META_VERSION,
    MISSING_CAPABILITY,
    UNSUPPORTED_VERSION,
    check_version,
    client_view,
    version_of,
)
from zemcp.protocol.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, ProtocolError
from zemcp.replies.direct import DirectSink
from zemcp.replies.responses import (
    WSGIResponse,
    empty_response,
    error_response,
    json_response,
    new_sink,
    reply,
)
from zemcp.replies.sinks import ReplySink
from zemcp.state import shares
from zemcp.state.fanout import ListenLimitReached
from zemcp.state.shares import ShareTaken
from zemcp.state.tasks import TaskLimitReached

log = logging.getLogger("zemcp.modern")

#: HTTP status of each JSON-RPC error code (others: 200 with the error in the body).
STATUS: dict[object, int] = {
    -32700: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    header_values.HEADER_MISMATCH: 400,
    MISSING_CAPABILITY: 400,
    UNSUPPORTED_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}
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


def selects(message: jsonrpc.Message, headers: Any) -> bool:
    """True when a POSTed message is to be served in the 2026-07-28 era (basic/versioning, "dual-era").

    A request whose ``params._meta`` carries the protocol version is modern (an
    ``initialize`` in that envelope too: 2026-07-28 removed the method, so it gets 404).
    Otherwise ``initialize`` starts a handshake-era session, and any other message is modern
    when its ``MCP-Protocol-Version`` header names no handshake version and it comes without
    ``Mcp-Session-Id`` (its envelope is then checked, and refused, here).
    """
    params = getattr(message, "params", None)
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and META_VERSION in meta:
        return True
    if isinstance(message, jsonrpc.Request) and message.method == "initialize":
        return False
    version = headers.get(mcp_headers.PROTOCOL_VERSION_HEADER)
    return version is not None and version not in versions.HANDSHAKE and headers.get("Mcp-Session-Id") is None


def retire_codes(message: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC response with the error codes 2026-07-28 retired replaced by their successors:
    resource not found (-32002) is invalid params (-32602) here, ``error.data.uri`` kept."""
    error = message.get("error")
    if isinstance(error, dict) and error.get("code") == RESOURCE_NOT_FOUND:
        error["code"] = INVALID_PARAMS
    return message


def status_of(message: dict[str, Any]) -> int:
    """The HTTP status of a JSON-RPC response in this era (200 unless an error code maps)."""
    error = message.get("error")
    return STATUS.get(error.get("code"), 200) if isinstance(error, dict) else 200


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

    def post(self, request: Request, message: jsonrpc.Message, principal: Principal | None = None) -> WSGIResponse:
        """Answer one POSTed message (already parsed) of the stateless era.

        With authorization on, ``principal`` is who the request's token names; a
        ``requestState`` sealed for one principal opens only for the same one.
        """
        if isinstance(message, jsonrpc.Notification):
            # The revision defines no client notifications over HTTP: closing a stream cancels.
            return empty_response(202)
        if isinstance(message, jsonrpc.Response):
            return error_response(
                400,
                INVALID_REQUEST,
                "Invalid Request: a 2026-07-28 client sends no JSON-RPC "
                "responses; answers to input requests travel in the retried request's inputResponses",
            )
        operation = observed.begin(self.server, message, request.environ, version_of(message))
        try:
            outcome = self._handle(request, message, principal, operation)
        except ProtocolError as exc:
            outcome = jsonrpc.error(message.id, exc.code, exc.message, exc.data)
        except (InsufficientScope, ListenLimitReached, Busy, ShareTaken, TaskLimitReached) as exc:
            operation.finish(None, type(exc).__name__)
            return refusal(self.server, request, message, exc)
        except BaseException as exc:
            operation.finish(None, type(exc).__name__)
            raise
        if isinstance(outcome, dict):
            outcome = retire_codes(outcome)
            operation.finish(outcome)
            # An error status here answers a served message: its operation counted it.
            request.environ[REFUSAL] = SERVED
            return json_response(status_of(outcome), outcome)
        return reply(outcome, request.environ, self.settings.keepalive_interval, status_of)

    def _handle(
        self, request: Request, message: jsonrpc.Request, principal: Principal | None, operation: Operation
    ) -> dict[str, Any] | ReplySink | DirectSink:
        client = client_view(message)
        try:
            mcp_headers.check_standard(request.headers, message.method, message.params, client.protocol_version)
        except header_values.HeaderError as exc:
            raise ProtocolError(header_values.HEADER_MISMATCH, exc.message) from None
        check_version(client)
        if message.method == "tools/call":
            self._check_param_headers(request, message)
        return self.dispatch(client, message, request.environ, principal, operation)

    def handle(self, message: jsonrpc.Request, environ: dict[str, Any]) -> dict[str, Any] | ReplySink | DirectSink:
        """Serve one request of a transport without a header layer (stdio, where all request
        metadata travels in ``params._meta``): a JSON-RPC response, or the sink of a running
        handler (``environ`` as for :meth:`zemcp.eras.handshake.era.HandshakeEra.handle`).

        Raises:
            ProtocolError: the envelope, the version or the request is invalid.
            Busy, ShareTaken, ListenLimitReached, TaskLimitReached: no room for the request.
        """
        operation = observed.begin(self.server, message, environ, version_of(message))

        def answer() -> dict[str, Any] | ReplySink | DirectSink:
            client = client_view(message)
            check_version(client)
            return self.dispatch(client, message, environ, None, operation)

        return operation.serve(answer)

    def dispatch(
        self,
        client: ClientView,
        message: jsonrpc.Request,
        environ: dict[str, Any],
        principal: Principal | None = None,
        operation: Operation = NULL_OPERATION,
    ) -> dict[str, Any] | ReplySink | DirectSink:
        """Serve a request whose envelope, headers and version were checked; a running
        handler's sink finishes ``operation`` when it ends (a JSON-RPC response is the caller's to finish)."""
        method = message.method
        if method == "server/discover":
            return self.result(message.id, method, self.discover(), NO_CACHE)
        if method == "subscriptions/listen":
            # The operation is the opening of the stream: it ends with the acknowledgement.
            sink = listen.open_listen(self.server, message, environ, client, principal)
            operation.finish(None)
            return sink
        if method in tasks.METHODS:
            return self.result(message.id, method, tasks.serve(self.server, client, message, principal))
        if method in tasks.REMOVED:
            raise tasks.removed(method)
        if method not in self.server.methods():
            raise ProtocolError(
                METHOD_NOT_FOUND, f"Method not found: {method} is not a method of MCP {client.protocol_version}"
            )
        outcome = self.server.prepare(client, message, principal)
        if isinstance(outcome, Work):
            if outcome.tool is not None and tasks.wants_task(self.server, client, outcome):
                if outcome.missing:
                    # The missing arguments are asked by multi-round-trip before the task exists.
                    work = tasks.asking_first(self.server, client, message, outcome, environ)
                    return self._start(client, message, work, environ, operation)
                return self.result(message.id, method, tasks.create(self.server, client, message, outcome, environ))
            return self._start(client, message, outcome, environ, operation)
        return self.result(message.id, method, outcome, self.server.cache_hint(message))

    def _check_param_headers(self, request: Request, message: jsonrpc.Request) -> None:
        name = message.params.get("name")
        # A name that is no string (an object, a list) names no tool: tools/call refuses it with -32602.
        tool = self.server.tools.get(name) if isinstance(name, str) else None
        if tool is None or not tool.header_annotations:
            return
        try:
            param_headers.check_params(request.headers, tool.header_annotations, message.params.get("arguments") or {})
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
            META_SERVER_INFO: {"name": self.server.name, "version": self.server.version},
        }
        if method in CACHEABLE and body["resultType"] == "complete":
            body = {**body, **cache.fields()}
        return jsonrpc.result(request_id, body)

    # -- multi-round-trip requests -----------------------------------------------------

    def _start(
        self, client: ClientView, request: jsonrpc.Request, work: Work, environ: dict[str, Any], operation: Operation
    ) -> ReplySink | DirectSink:
        """Start one round of ``work``; its sink tells JSON from stream.

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
        operation.annotate({"zemcp.mrtr.call": lineage.call, "zemcp.mrtr.round": lineage.round})
        responses = mrtr.check_responses(params.get("inputResponses"), asked)
        progress = params["_meta"].get("progressToken")
        sink = new_sink(environ, self.settings.keepalive_interval, send_timeout=self.settings.body_timeout)
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
        # Closing the response stream is this era's cancellation (basic/patterns/cancellation).
        sink.on_close(lambda: None if sink.finished else round_.abort(ClientDisconnected()))

        def job() -> None:
            response = None
            try:
                try:
                    response = self.server.execute(work, round_, operation)
                except RoundEnded:
                    pass
                response = self._finish(work, request, round_, response, lineage)
            except BaseException:
                log.exception("%s %s: the round could not be answered", work.method, logsafe.clip(work.target))
                response = jsonrpc.error(
                    request.id, jsonrpc.INTERNAL_ERROR, f"Internal error while serving {work.method}"
                )
            finally:
                # Ended before the response is handed over: whoever reads it then sees the span ended.
                operation.finish(response, None if response is not None else "cancelled")
                sink.finish(response)

        self.server.admission.start(job, sink, environ.get(shares.ENVIRON_KEY))
        return sink

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
