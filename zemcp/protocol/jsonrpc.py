"""JSON-RPC 2.0 messages as MCP uses them (MCP basic/index, "Messages").

Parses one POST body into a :class:`Request`, :class:`Notification` or :class:`Response`
and builds the messages the server sends. Pure: no HTTP here.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypeGuard

from zemcp.protocol import identifiers, jsontext

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

RequestId = str | int


class ProtocolError(Exception):
    """A message that must be answered with a JSON-RPC error.

    Attributes:
        code: the JSON-RPC error code (``PARSE_ERROR`` ...).
        message: what was wrong and what to do instead.
        id: the request id when it could be read, else ``None``.
        data: optional ``error.data`` (for example ``{"uri": ...}`` with -32002).
    """

    def __init__(self, code: int, message: str, id: RequestId | None = None, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.id = id
        self.data = data

    def to_message(self) -> dict[str, Any]:
        """The error as a JSON-RPC response object."""
        return error(self.id, self.code, self.message, self.data)


# Immutable records made for every message: tuples, which are cheaper to make than frozen dataclasses.
class Request(NamedTuple):
    """A client request: it has an ``id`` and wants exactly one response."""

    id: RequestId
    method: str
    params: dict[str, Any]


class Notification(NamedTuple):
    """A client notification: no ``id``, never answered."""

    method: str
    params: dict[str, Any]


class Response(NamedTuple):
    """A client's response to a server-to-client request (for example an elicitation answer).

    Exactly one of ``result`` and ``error`` is set; ``id`` may be ``None`` only for errors.
    """

    id: RequestId | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None


Message = Request | Notification | Response


def valid_id(value: Any) -> TypeGuard[RequestId]:
    """True for a usable request id: a string or an integer (JSON true/false and fractions are not)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse(body: bytes) -> Message:
    """Parse one JSON-RPC message from a POST body.

    Args:
        body: the raw request body (UTF-8 JSON).
    Returns:
        a :class:`Request`, :class:`Notification` or :class:`Response`.
    Raises:
        ProtocolError: ``PARSE_ERROR`` for bytes that are not JSON; ``INVALID_REQUEST`` for
            JSON that is not one JSON-RPC 2.0 message (arrays included: batching was removed
            in MCP 2025-06-18), or a response whose id holds a character no id may hold;
            ``INVALID_PARAMS`` for ``params`` that is not an object, or a request whose name,
            URI or task id holds such a character (:mod:`zemcp.protocol.identifiers`: a lone
            surrogate, a control character or a noncharacter), naming the field.
    """
    if not body.strip():
        raise ProtocolError(PARSE_ERROR, "Parse error: the body is empty; send one JSON-RPC message")
    try:
        data = jsontext.loads(body)
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            PARSE_ERROR, f"Parse error: the body is not UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    except RecursionError:
        raise ProtocolError(PARSE_ERROR, "Parse error: the JSON is nested too deeply") from None
    except ValueError as exc:
        detail = "an integer has too many digits" if "digits" in str(exc) else str(exc)
        raise ProtocolError(PARSE_ERROR, f"Parse error: the body is not valid JSON ({detail})") from None
    if isinstance(data, list):
        raise ProtocolError(
            INVALID_REQUEST,
            "Invalid Request: JSON-RPC batches are not supported since MCP 2025-06-18; send one message per POST",
        )
    if not isinstance(data, dict):
        raise ProtocolError(INVALID_REQUEST, "Invalid Request: the body must be a JSON-RPC 2.0 object")
    raw_id = data.get("id")
    # A decoded id is a str, an int, or a value no id may be (bool, float, null, object ...).
    id_ = raw_id if type(raw_id) is str or type(raw_id) is int else None
    if data.get("jsonrpc") != "2.0":
        raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', id_)
    if "method" in data:
        method = data["method"]
        if type(method) is not str or not method:
            raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "method" must be a non-empty string', id_)
        if id_ is None and "id" in data:
            why = "MCP forbids null" if raw_id is None else f"got {type(raw_id).__name__}"
            raise ProtocolError(INVALID_REQUEST, f'Invalid Request: "id" must be a string or an integer ({why})')
        params = data.get("params")
        if params is None:
            params = {}
        elif type(params) is not dict:
            raise ProtocolError(INVALID_PARAMS, 'Invalid params: "params" must be an object', id_)
        if id_ is None:
            return Notification(method, params)
        # Refused here, before any lookup, header check or state key is made of them.
        problem = identifiers.params_problem(method, params)
        if problem is not None:
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: {problem}", id_)
        return Request(id_, method, params)
    has_result, has_error = "result" in data, "error" in data
    if has_result == has_error:
        raise ProtocolError(
            INVALID_REQUEST,
            'Invalid Request: a message without "method" is a response and needs exactly one of "result" and "error"',
            id_,
        )
    if raw_id is not None and not valid_id(raw_id):
        raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')
    problem = identifiers.problem('"id"', raw_id) if type(raw_id) is str else None
    if problem is not None:
        # The id of a response names the server's request it answers, and keys its waiting call.
        raise ProtocolError(INVALID_REQUEST, f"Invalid Request: {problem}")
    if raw_id is None and has_result:
        raise ProtocolError(INVALID_REQUEST, 'Invalid Request: a result response needs an "id"')
    result, err = data.get("result"), data.get("error")
    if has_result and not isinstance(result, dict):
        raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "result" must be an object', id_)
    if has_error and not isinstance(err, dict):
        raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "error" must be an object', id_)
    return Response(raw_id, result if has_result else None, err if has_error else None)


def result(id: RequestId, value: dict[str, Any]) -> dict[str, Any]:
    """A success response ``{"jsonrpc", "id", "result"}``."""
    return {"jsonrpc": "2.0", "id": id, "result": value}


def error(id: RequestId | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """An error response; ``id`` is ``None`` when the request's id could not be read."""
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": id, "error": err}


def request(id: RequestId, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A server-to-client request."""
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


def notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A server-to-client notification."""
    return {"jsonrpc": "2.0", "method": method, "params": params}


def encode(message: dict[str, Any]) -> bytes:
    """One message as compact single-line UTF-8 JSON (safe inside an SSE ``data:`` line), by
    :func:`zemcp.protocol.jsontext.dumps`: a string with a lone surrogate is written with
    ``\\u`` escapes, so any Python string can be sent.

    Raises:
        TypeError: a value JSON cannot represent (a datetime, a set ...).
        ValueError: NaN or an infinity (not valid JSON).
    """
    return jsontext.dumps(message)
