"""What an era's outcome, or a refusal, is on the wire of Streamable HTTP (MCP basic/transports).

The eras answer a message with an outcome or refuse it with an exception
(:mod:`zemcp.eras.requestcontext`); this module is where each becomes an HTTP response: the
status codes, ``Retry-After``, ``WWW-Authenticate``, JSON or an event stream. Every refusal is
counted here, under its reason (:data:`zemcp.observe.instruments.REFUSALS`), as it is answered;
an answer is never a refusal, even when a 2026-07-28 error code maps to an HTTP error status
(its operation counted it). ``docs/transport.md`` lists every status.

A POSTed answer to a server's question (basic/transports 2025-11-25, "Sending Messages to the
Server") is answered 202 Accepted with no body once the server accepts it, otherwise with an
HTTP error status and a JSON-RPC error without an id. A 404 to a request that carries
``Mcp-Session-Id`` means the session is gone ("Session Management"), and clients then drop the
session and all its work, so an answer that merely found no taker never gets one:

- :attr:`Delivery.TAKEN <zemcp.state.waitingcalls.Delivery.TAKEN>`: 202;
- ``NOT_WAITING``: 400, the spec's example status for a message not accepted; one text for
  every cause, so that a session cannot probe another session's request ids;
- ``UNCONFIRMED`` (Redis): 503, since the process holding the call did not say within its bound
  that it took the answer (it died a moment ago, or stalls); the answer was not used, and the
  call's own stream ends with an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Response

from zemcp import logsafe
from zemcp.auth.principal import InsufficientScope
from zemcp.core.admission import Busy
from zemcp.eras.requestcontext import Outcome, Running
from zemcp.protocol import header_values, jsonrpc
from zemcp.protocol.envelope import MISSING_CAPABILITY, UNSUPPORTED_VERSION
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, ProtocolError
from zemcp.replies.responses import (
    WSGIResponse,
    challenge_response,
    empty_response,
    error_response,
    json_response,
    reply,
)
from zemcp.state.fanout import ListenLimitReached
from zemcp.state.ratelimits import RateLimited
from zemcp.state.sessionstore import SessionLimitReached, SessionNotFound, SessionRequired
from zemcp.state.shares import ShareTaken
from zemcp.state.tasks import TaskLimitReached
from zemcp.state.unavailable import StateUnavailable
from zemcp.state.waitingcalls import Delivery

if TYPE_CHECKING:
    from zemcp.core.server import Server

#: HTTP status of each JSON-RPC error code of a 2026-07-28 answer (others: 200 with the error in the body).
STATUS: dict[object, int] = {
    -32700: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    header_values.HEADER_MISMATCH: 400,
    MISSING_CAPABILITY: 400,
    UNSUPPORTED_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}
#: [seconds] ``Retry-After`` of ``initialize`` refused at the session cap, and of a
#: ``subscriptions/listen`` refused at the listen-stream cap.
RETRY_AFTER = 30
#: The exceptions an era or a layer refuses a message with, which :func:`refusal` answers.
REFUSALS = (
    InsufficientScope,
    ListenLimitReached,
    Busy,
    ShareTaken,
    TaskLimitReached,
    RateLimited,
    SessionLimitReached,
    SessionNotFound,
    SessionRequired,
    ProtocolError,
    StateUnavailable,
)


def modern_status(message: dict[str, Any]) -> int:
    """The HTTP status of a 2026-07-28 JSON-RPC response (200 unless its error code maps, :data:`STATUS`)."""
    error = message.get("error")
    return STATUS.get(error.get("code"), 200) if isinstance(error, dict) else 200


def handshake_status(message: dict[str, Any]) -> int:
    """The HTTP status of a handshake-era JSON-RPC response: always 200 (an error rides in the body)."""
    return 200


def answer(
    outcome: Outcome,
    message: jsonrpc.Message,
    environ: dict[str, Any],
    keepalive: float,
    status_of: Any = handshake_status,
    headers: dict[str, Any] | None = None,
) -> WSGIResponse:
    """The HTTP response of an era's outcome.

    Args:
        outcome: what the era (through the pipeline) gave.
        message: the message it answers.
        environ: the WSGI environ (an event stream watches its client's socket).
        keepalive: [seconds] between SSE comments while a stream waits.
        status_of: the HTTP status of a JSON-RPC response (:func:`modern_status` or :func:`handshake_status`).
        headers: extra headers of the response.
    Returns:
        JSON for a response; the running call's JSON or event stream, decided late
        (:func:`zemcp.replies.responses.reply`); 202 / 400 / 503 for a POSTed answer; 202 for a
        notification.
    """
    if isinstance(outcome, dict):
        return json_response(status_of(outcome), outcome, headers)
    if isinstance(outcome, Running):
        return reply(outcome.sink, environ, keepalive, status_of, headers)
    if isinstance(outcome, Delivery):
        assert isinstance(message, jsonrpc.Response)  # only an answer is delivered
        return delivery_response(outcome, message)
    if outcome is None:
        return empty_response(202)
    return reply(outcome, environ, keepalive, status_of, headers)


def delivery_response(delivery: Delivery, answer: jsonrpc.Response) -> Response:
    """The HTTP response to the POST of ``answer``, given what became of it.

    Args:
        delivery: what :meth:`zemcp.state.waitingcalls.WaitingCalls.resolve` said of it.
        answer: the client's response (its id is the server's own request id).
    Returns:
        202 with no body, or 400 / 503 with a JSON-RPC error whose id is null (the answer's id
        names the server's request, not one of the client's).
    """
    if delivery is Delivery.TAKEN:
        return empty_response(202)
    answer_id = logsafe.clip(answer.id)
    if delivery is Delivery.UNCONFIRMED:
        return error_response(
            503,
            INTERNAL_ERROR,
            f"Service Unavailable: the worker process running the call that asked request {answer_id} did not "
            f"take this answer in time (it stopped or stalls); this answer was not used, and that call's stream "
            f"ends with an error. The session goes on: start the call again if it does not complete",
        )
    return error_response(
        400,
        INVALID_REQUEST,
        f"Bad Request: no request of this session is waiting for an answer with id {answer_id}: "
        f"it timed out, was cancelled or was answered already, or the server never sent it in this "
        f"session; this answer was not used. The session goes on: send its next requests as before",
    )


def refusal(server: Server, exc: Exception, message: jsonrpc.Message | None) -> Response:
    """The HTTP response refusing ``message`` with ``exc`` (one of :data:`REFUSALS`), counted.

    Args:
        server: whose authorization makes a scope challenge, and whose telemetry counts the refusal.
        exc: why it was refused.
        message: the refused message; its id is echoed when it is a request (a POSTed answer's
            id names the server's request, and is not).
    """
    request_id = message.id if isinstance(message, jsonrpc.Request) else None
    reason = getattr(exc, "reason", None)
    retry: dict[str, Any] = {"Retry-After": str(getattr(exc, "retry_after", RETRY_AFTER))}
    if isinstance(exc, InsufficientScope):
        assert server.auth is not None  # only authorization raises it
        response = challenge_response(server.auth.challenge_for(exc), request_id)
        reason = "auth"
    elif isinstance(exc, RateLimited):
        response = json_response(exc.status, jsonrpc.error(request_id, INTERNAL_ERROR, str(exc), exc.data), retry)
        reason = "rate"
    elif isinstance(exc, ListenLimitReached):
        response = error_response(429, INVALID_REQUEST, f"Too Many Requests: {exc}", retry, request_id)
        reason = "listen"
    elif isinstance(exc, SessionLimitReached):
        response = error_response(429, INVALID_REQUEST, f"Too Many Requests: {exc}", retry, request_id)
        reason = "sessions"
    elif isinstance(exc, (Busy, ShareTaken, TaskLimitReached)):
        response = error_response(exc.status, INTERNAL_ERROR, str(exc), retry, request_id)
    elif isinstance(exc, SessionNotFound):
        # The handler that asked keeps waiting for an answer wherever its session lives: the
        # client must learn that the answer went nowhere, not only that the session did.
        text = f"This answer was not delivered: {exc}" if isinstance(message, jsonrpc.Response) else str(exc)
        response = error_response(404, INVALID_REQUEST, text, id=request_id)
    elif isinstance(exc, SessionRequired):
        response = error_response(400, INVALID_REQUEST, str(exc), id=request_id)
    elif isinstance(exc, ProtocolError):
        response = error_response(400, exc.code, exc.message, id=request_id)
    elif isinstance(exc, StateUnavailable):
        response = error_response(503, INTERNAL_ERROR, str(exc), retry, request_id)
    else:
        raise TypeError(f"not a refusal: {exc!r}")
    return refused(server, response, reason)


def refused(server: Server, response: Response, reason: str | None = None) -> Response:
    """Count ``response`` as a refusal of ``server``'s endpoint and return it.

    Args:
        reason: what it is counted under (:data:`zemcp.observe.instruments.REFUSALS`); by its
            status when None: ``auth`` for 401 and 403, ``unavailable`` for 503, else ``protocol``.
    """
    status = response.status_code
    if reason is None:
        reason = "auth" if status in (401, 403) else "unavailable" if status == 503 else "protocol"
    server.telemetry.refused(reason, status)
    return response
