"""A client's answer POSTed to a session: what the HTTP response says of its delivery.

MCP basic/transports (2025-11-25, "Sending Messages to the Server"): a POSTed JSON-RPC
response is answered 202 Accepted with no body once the server accepts it, otherwise with an
HTTP error status and, optionally, a JSON-RPC error without an id. A 404 to a request that
carries ``Mcp-Session-Id`` means the session is gone ("Session Management"), and clients then
drop the session and all its work, so an answer that merely found no taker never gets one:

- :attr:`Delivery.TAKEN`: 202;
- :attr:`Delivery.NOT_WAITING`: 400, the spec's example status for a message not accepted;
  one text for every cause, so that a session cannot probe another session's request ids;
- :attr:`Delivery.UNCONFIRMED` (Redis): 503, since the process holding the call did not say
  within its bound that it took the answer (it died a moment ago, or stalls); the answer was
  not used, and the call's own stream ends with an error.
"""

from __future__ import annotations

from werkzeug.wrappers import Response

from zemcp import logsafe
from zemcp.protocol import jsonrpc
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST
from zemcp.replies.responses import empty_response, error_response
from zemcp.state.waitingcalls import Delivery


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
