"""Elicitation: a tool asks the user for information mid-call (MCP 2025-06-18 client/elicitation).

What a handler's ``ctx.elicit(message, requested_schema)`` does, in order:

1. refuse at once if the client did not declare ``capabilities.elicitation`` at initialize
   (:class:`ElicitUnsupported`) or ``requested_schema`` is outside the spec's flat subset
   (:class:`ElicitSchemaInvalid`); nothing is sent in either case;
2. take a slot in the correlation table (:class:`ElicitTooMany` when a cap is reached);
3. send ``elicitation/create`` on the request's own reply sink, which upgrades the HTTP
   response to ``text/event-stream`` on the first send;
4. wait for the client's answer and turn it into content or an exception of this module.

Every outcome other than ``accept`` with valid content is an :class:`ElicitError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jsonschema
from jsonschema.exceptions import best_match

from zemcp import jsonrpc
from zemcp.correlation import CapacityError

if TYPE_CHECKING:
    from zemcp.correlation import CorrelationTable
    from zemcp.session import Call


class ElicitError(Exception):
    """Base of every elicitation outcome other than an accepted answer."""


class ElicitDeclined(ElicitError):
    """The user explicitly refused (action ``decline``). Do not do the work."""

    def __init__(self) -> None:
        super().__init__("the user declined to provide the requested information")


class ElicitCancelled(ElicitError):
    """The user dismissed the request without choosing (action ``cancel``, or an error answer)."""

    def __init__(self, detail: str = "") -> None:
        text = "the user cancelled the request without answering"
        super().__init__(f"{text} ({detail})" if detail else text)


class ElicitMalformed(ElicitError):
    """The answer was unusable: unknown action, content not an object, or content that fails
    ``requestedSchema``. The message says which."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"malformed elicitation answer: {detail}")


class ElicitUnsupported(ElicitError):
    """The client did not declare the elicitation capability; nothing was sent."""

    def __init__(self) -> None:
        super().__init__(
            "the client did not declare the elicitation capability at initialize; "
            "ask for the value as a tool argument instead"
        )


class ElicitTooMany(ElicitError):
    """A cap on pending elicitations is reached (per session or per process); nothing was sent."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"too many pending elicitations: {detail}; answer or cancel the pending ones first")


class ElicitSchemaInvalid(ElicitError):
    """``requested_schema`` is outside the spec's flat subset; nothing was sent.

    Attributes:
        path: where in the schema the problem is (``<root>`` or ``properties.<name>...``).
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"requestedSchema is invalid at {path}: {reason}")
        self.path = path


class ElicitTimeout(ElicitError):
    """No answer arrived within the elicitation timeout; the server sent
    ``notifications/cancelled`` for its request."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer to the elicitation within {seconds:g} s")


class ElicitAborted(ElicitError):
    """The request the elicitation belongs to can no longer be answered."""


class RequestCancelled(ElicitAborted):
    """The client sent ``notifications/cancelled`` for the tools/call; no response will be sent."""

    def __init__(self, reason: str | None = None) -> None:
        text = "the client cancelled the request"
        super().__init__(f"{text}: {reason}" if reason else text)


class SessionEnded(ElicitAborted):
    """The session was deleted by the client or expired while the elicitation was pending."""

    def __init__(self, why: str) -> None:
        super().__init__(f"the session ended ({why}) while waiting for the answer")


class ClientDisconnected(ElicitAborted):
    """The client closed the connection that carried the request's stream."""

    def __init__(self) -> None:
        super().__init__("the client disconnected while waiting for the answer")


_TEXT = {"title": {"type": "string"}, "description": {"type": "string"}}

_STRING = {
    "type": "object",
    "properties": {
        "type": {"const": "string"},
        **_TEXT,
        "minLength": {"type": "integer", "minimum": 0},
        "maxLength": {"type": "integer", "minimum": 0},
        "format": {"enum": ["email", "uri", "date", "date-time"]},
        "enum": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
        "enumNames": {"type": "array", "items": {"type": "string"}},
        "default": {"type": "string"},
    },
    "additionalProperties": False,
}

_NUMBER = {
    "type": "object",
    "properties": {
        "type": {"enum": ["number", "integer"]},
        **_TEXT,
        "minimum": {"type": "number"},
        "maximum": {"type": "number"},
        "default": {"type": "number"},
    },
    "additionalProperties": False,
}

_BOOLEAN = {
    "type": "object",
    "properties": {"type": {"const": "boolean"}, **_TEXT, "default": {"type": "boolean"}},
    "additionalProperties": False,
}

# The 2025-06-18 subset (schema.ts PrimitiveSchemaDefinition): a flat object of primitives.
# Unknown keywords are refused, which also refuses nesting, arrays, $ref, oneOf/anyOf/allOf/not.
REQUESTED_SCHEMA_META = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["type", "properties"],
    "properties": {
        "type": {"const": "object"},
        **_TEXT,
        "properties": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"enum": ["string", "number", "integer", "boolean"]}},
                "allOf": [
                    {"if": {"properties": {"type": {"const": "string"}}}, "then": _STRING},
                    {"if": {"properties": {"type": {"enum": ["number", "integer"]}}}, "then": _NUMBER},
                    {"if": {"properties": {"type": {"const": "boolean"}}}, "then": _BOOLEAN},
                ],
            },
        },
        "required": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
    "additionalProperties": False,
}

_META_VALIDATOR = jsonschema.Draft202012Validator(REQUESTED_SCHEMA_META)
_FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER


def check_requested_schema(schema: Any) -> None:
    """Check ``schema`` against the spec's flat subset before anything is sent.

    Args:
        schema: the ``requestedSchema`` a handler passed to ``elicit``.
    Raises:
        ElicitSchemaInvalid: with the path of the first problem and what is allowed there.
    """
    error = best_match(_META_VALIDATOR.iter_errors(schema))
    if error is not None:
        path = ".".join(str(p) for p in error.absolute_path) or "<root>"
        raise ElicitSchemaInvalid(path, error.message)
    if isinstance(schema, dict):
        names = set(schema["properties"])
        for name in schema.get("required", []):
            if name not in names:
                raise ElicitSchemaInvalid("required", f"{name!r} is required but not in properties")
        for name, prop in schema["properties"].items():
            labels = prop.get("enumNames")
            if labels is not None and len(labels) != len(prop.get("enum", ())):
                raise ElicitSchemaInvalid(
                    f"properties.{name}.enumNames", "enumNames needs an enum of the same length"
                )


def interpret_answer(answer: jsonrpc.Response, schema: dict) -> dict:
    """Turn the client's response to ``elicitation/create`` into content or an exception.

    Args:
        answer: the client's JSON-RPC response.
        schema: the ``requestedSchema`` that was sent; accepted content is validated against it.
    Returns:
        the accepted content (a flat dict).
    Raises:
        ElicitDeclined, ElicitCancelled (also for a JSON-RPC error answer), ElicitMalformed.
    """
    if answer.error is not None:
        message = answer.error.get("message")
        raise ElicitCancelled(f"the client answered with an error: {message}" if message else "")
    action = answer.result.get("action")
    if action == "decline":
        raise ElicitDeclined()
    if action == "cancel":
        raise ElicitCancelled()
    if action != "accept":
        raise ElicitMalformed(f"action must be accept, decline or cancel, got {action!r}")
    content = answer.result.get("content", {})
    if not isinstance(content, dict):
        raise ElicitMalformed(f"content must be a JSON object, got {type(content).__name__}")
    error = best_match(jsonschema.Draft202012Validator(schema, format_checker=_FORMATS).iter_errors(content))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        raise ElicitMalformed(f"content does not match requestedSchema{' at ' + where if where else ''}: {error.message}")
    return content


def elicit(call: "Call", table: "CorrelationTable", timeout: float, message: str, requested_schema: dict) -> dict:
    """Ask the client for information on behalf of the tool call ``call`` and wait.

    Args:
        call: the in-flight request whose stream carries the question.
        table: the process's correlation table.
        timeout: [seconds] how long to wait for the answer.
        message: the human-readable question.
        requested_schema: a flat object schema of the fields wanted.
    Returns:
        the accepted content, validated against ``requested_schema``.
    Raises:
        ElicitUnsupported, ElicitSchemaInvalid, ElicitTooMany: before anything is sent.
        ElicitDeclined, ElicitCancelled, ElicitMalformed: from the answer.
        ElicitTimeout: no answer in ``timeout`` seconds.
        RequestCancelled, SessionEnded, ClientDisconnected: the wait was cut short.
    """
    if not isinstance(message, str) or not message:
        raise TypeError("elicit(message, requested_schema): message must be a non-empty string")
    if not call.session.client_supports_elicit():
        raise ElicitUnsupported()
    check_requested_schema(requested_schema)
    call.raise_if_aborted()
    try:
        pending = table.register(call.session, call)
    except CapacityError as exc:
        raise ElicitTooMany(str(exc)) from None
    try:
        # An abort that landed between the check above and register() found no entry to end.
        call.raise_if_aborted()
        call.sink.send(
            jsonrpc.request(
                pending.id, "elicitation/create", {"message": message, "requestedSchema": requested_schema}
            )
        )
        answer = table.wait(pending, timeout)
    except TimeoutError:
        _withdraw(call, pending.id, "no answer within the elicitation timeout")
        raise ElicitTimeout(timeout) from None
    except (RequestCancelled, SessionEnded) as exc:
        _withdraw(call, pending.id, str(exc))
        raise
    finally:
        table.discard(pending)
    return interpret_answer(answer, requested_schema)


def _withdraw(call: "Call", request_id: str, reason: str) -> None:
    # The spec asks a sender that stops waiting to say so, so the client can close its prompt.
    call.sink.send(jsonrpc.notification("notifications/cancelled", {"requestId": request_id, "reason": reason}))
