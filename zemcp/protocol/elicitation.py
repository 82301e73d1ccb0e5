"""Elicitation: a tool asks the user for information mid-call (MCP client/elicitation).

What a handler's ``ctx.elicit(message, requested_schema)`` does, in order:

1. refuse at once if the client did not declare ``capabilities.elicitation`` (at initialize,
   or in this request's envelope in the 2026-07-28 era) (:class:`ElicitUnsupported`) or
   ``requested_schema`` is outside the spec's flat subset (:class:`ElicitSchemaInvalid`);
   nothing is sent in either case;
2. hand the ``elicitation/create`` input request to the request's exchange
   (:mod:`zemcp.protocol.inputs`): in the handshake era it takes a slot in the correlation table
   (:class:`ElicitTooMany` when a cap is reached), goes out on the request's own reply sink
   (which upgrades the HTTP response to ``text/event-stream``) and waits for the answer; in
   the stateless era it returns the answer recorded in an earlier round, or ends the round
   to ask for it (:mod:`zemcp.eras.modern.mrtr`);
3. turn the answer into content or an exception of this module.

Every outcome other than ``accept`` with valid content is an :class:`ElicitError`, the same
in both eras.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

import jsonschema
from jsonschema.exceptions import best_match

from zemcp.protocol import jsonrpc
from zemcp.protocol.inputs import InputRequest
from zemcp.protocol.validators import SchemaValidator
from zemcp.protocol.versions import ELICITATION_MODES, since

if TYPE_CHECKING:
    from zemcp.protocol.capabilities import ClientView


class ElicitError(Exception):
    """Base of every elicitation outcome other than an accepted answer."""


class ElicitDeclined(ElicitError):
    """The user explicitly refused (action ``decline``). Do not do the work."""

    def __init__(self) -> None:
        super().__init__("the user declined to provide the requested information")


class ElicitCancelled(ElicitError):
    """The user dismissed the request without choosing (action ``cancel``, or an error answer)."""

    def __init__(self, error: dict[str, Any] | None = None) -> None:
        if error is None:
            text = "the user cancelled the request without answering"
        else:
            text = (
                f"the client answered the elicitation with error {error.get('code')}: "
                f"{error.get('message', '')} (counted as cancel)"
            )
        super().__init__(text)


class ElicitMalformed(ElicitError):
    """The answer was unusable: unknown action, content not an object, a content value that is
    not a string, number, boolean or array of strings (under any key), or content that fails
    ``requestedSchema``. The message says which."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"malformed elicitation answer: {detail}")


class ElicitUnsupported(ElicitError):
    """The client did not declare the elicitation capability (or the mode asked for); nothing
    was sent."""

    def __init__(self, mode: str = "form", declared: bool = False) -> None:
        #: The ``ClientCapabilities`` the request would have needed (``error.data.requiredCapabilities``).
        self.required: dict[str, Any] = {"elicitation": {mode: {}}}
        if declared:
            text = (
                f"the client declared elicitation without {mode} mode "
                "(capabilities.elicitation names its modes from 2025-11-25)"
            )
        elif mode == "url":
            text = (
                "the client did not declare URL-mode elicitation (capabilities.elicitation.url, "
                "protocol 2025-11-25); give the user the link in the tool result instead"
            )
        else:
            text = (
                "the client did not declare the elicitation capability (at initialize, or in this "
                "request's clientCapabilities); ask for the value as a tool argument instead"
            )
        super().__init__(text)


class ElicitTooMany(ElicitError):
    """A cap on pending elicitations is reached (per session or per process); nothing was sent."""

    def __init__(self, detail: str, advice: str = "answer or cancel the pending ones first") -> None:
        super().__init__(f"too many pending elicitations: {detail}; {advice}")


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


class AnswerLost(ElicitAborted):
    """The client's answer reached the process running the request after the POST that carried
    it had been told it was not used (that process stalled, or Redis did, during the handover):
    the request can no longer be answered, and ends at once rather than at its timeout."""

    def __init__(self) -> None:
        super().__init__(
            "the answer to this request reached the server process running it too late (the process or Redis "
            "stalled) and was not used; send the request again"
        )


class ServerStopping(ElicitAborted):
    """The server process that runs the request is stopping; the session lives on in the
    other processes that share it (Redis), so the client can send the request again."""

    def __init__(self) -> None:
        super().__init__("the server process running this request is stopping; send the request again")


class ClientDisconnected(ElicitAborted):
    """The client closed the connection that carried the request's stream (and, in a session,
    did not resume the stream in time).

    Args:
        why: what the message says after "the client disconnected".
    """

    def __init__(self, why: str = "while waiting for the answer") -> None:
        super().__init__(f"the client disconnected {why}")


_TEXT: dict[str, Any] = {"title": {"type": "string"}, "description": {"type": "string"}}

_STRING: dict[str, Any] = {
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

_TITLED = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "required": ["const", "title"],
        "properties": {"const": {"type": "string", "minLength": 1}, "title": {"type": "string"}},
        "additionalProperties": False,
    },
}

# 2025-11-25 (SEP-1330): titled single-select through oneOf of const/title.
_STRING_1125 = {**_STRING, "properties": {**_STRING["properties"], "oneOf": _TITLED}}

# 2025-11-25 (SEP-1330): multi-select arrays of untitled (enum) or titled (anyOf) options.
_ARRAY_1125 = {
    "type": "object",
    "required": ["items"],
    "properties": {
        "type": {"const": "array"},
        **_TEXT,
        "minItems": {"type": "integer", "minimum": 0},
        "maxItems": {"type": "integer", "minimum": 0},
        "items": {
            "type": "object",
            "oneOf": [
                {
                    "required": ["type", "enum"],
                    "properties": {"type": {"const": "string"}, "enum": _STRING["properties"]["enum"]},
                    "additionalProperties": False,
                },
                {"required": ["anyOf"], "properties": {"anyOf": _TITLED}, "additionalProperties": False},
            ],
        },
        "default": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}


def _meta_schema(
    types: list[str], kinds: list[tuple[object, dict[str, Any]]], root_extra: dict[str, Any]
) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["type", "properties"],
        "properties": {
            "type": {"const": "object"},
            **_TEXT,
            **root_extra,
            "properties": {
                "type": "object",
                "minProperties": 1,
                "additionalProperties": {
                    "type": "object",
                    "required": ["type"],
                    "properties": {"type": {"enum": types}},
                    "allOf": [{"if": {"properties": {"type": match}}, "then": then} for match, then in kinds],
                },
            },
            "required": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        },
        "additionalProperties": False,
    }


_NUMERIC = {"enum": ["number", "integer"]}

# The 2025-06-18 subset (schema.ts PrimitiveSchemaDefinition): a flat object of primitives.
# Unknown keywords are refused, which also refuses nesting, arrays, $ref, oneOf/anyOf/allOf/not.
REQUESTED_SCHEMA_META = _meta_schema(
    ["string", "number", "integer", "boolean"],
    [({"const": "string"}, _STRING), (_NUMERIC, _NUMBER), ({"const": "boolean"}, _BOOLEAN)],
    {},
)

# The 2025-11-25 subset adds titled single-select, multi-select arrays and a root $schema.
REQUESTED_SCHEMA_META_2025_11_25 = _meta_schema(
    ["string", "number", "integer", "boolean", "array"],
    [
        ({"const": "string"}, _STRING_1125),
        (_NUMERIC, _NUMBER),
        ({"const": "boolean"}, _BOOLEAN),
        ({"const": "array"}, _ARRAY_1125),
    ],
    {"$schema": {"type": "string"}},
)

_META_VALIDATORS = {
    False: jsonschema.Draft202012Validator(REQUESTED_SCHEMA_META),
    True: jsonschema.Draft202012Validator(REQUESTED_SCHEMA_META_2025_11_25),
}
#: Distinct requested schemas whose check and content validator are remembered.
SCHEMA_CACHE_SIZE = 256


def check_requested_schema(schema: Any, protocol_version: str = "2025-06-18") -> None:
    """Check ``schema`` against the spec's flat subset before anything is sent.

    A schema that passed once (handlers pass the same few schemas again and again) is known
    by its JSON text and not checked again.

    Args:
        schema: the ``requestedSchema`` a handler passed to ``elicit``.
        protocol_version: the session's version; 2025-11-25 allows titled and multi-select
            enums and a root ``$schema``, earlier versions keep the 2025-06-18 subset.
    Raises:
        ElicitSchemaInvalid: with the path of the first problem and what is allowed there.
    """
    modes = since(protocol_version, ELICITATION_MODES)
    text = _schema_text(schema)
    if text is None:
        _check_requested_schema(schema, modes)
    else:
        _checked_schema(text, modes)


@functools.lru_cache(maxsize=SCHEMA_CACHE_SIZE)
def _checked_schema(text: str, modes: bool) -> None:
    # Only passing schemas are remembered: lru_cache keeps no result of a call that raised.
    _check_requested_schema(json.loads(text), modes)


def _check_requested_schema(schema: Any, modes: bool) -> None:
    error = best_match(_META_VALIDATORS[modes].iter_errors(schema))
    if error is not None:
        path = ".".join(str(p) for p in error.absolute_path) or "<root>"
        raise ElicitSchemaInvalid(path, error.message)
    if isinstance(schema, dict):
        names = set(schema["properties"])
        for name in schema.get("required", []):
            if name not in names:
                raise ElicitSchemaInvalid("required", f"{name!r} is required but not in properties")
        for name, prop in schema["properties"].items():
            options = _options(prop)
            if "default" in prop and options is not None:
                chosen = prop["default"] if prop["type"] == "array" else [prop["default"]]
                if any(value not in options for value in chosen):
                    raise ElicitSchemaInvalid(f"properties.{name}.default", "the default must be among the options")
            labels = prop.get("enumNames")
            if labels is not None and len(labels) != len(prop.get("enum", ())):
                raise ElicitSchemaInvalid(f"properties.{name}.enumNames", "enumNames needs an enum of the same length")


def _options(prop: dict[str, Any]) -> list[str] | None:
    # The values a select property offers (enum, oneOf, items.enum, items.anyOf), if it is one.
    source = prop.get("items", {}) if prop["type"] == "array" else prop
    if "enum" in source:
        values: list[str] = source["enum"]
        return values
    titled = source.get("oneOf", source.get("anyOf"))
    return None if titled is None else [option["const"] for option in titled]


def interpret_answer(answer: jsonrpc.Response, schema: dict[str, Any], formats: bool = True) -> dict[str, Any]:
    """Turn the client's response to ``elicitation/create`` into content or an exception.

    Args:
        answer: the client's JSON-RPC response.
        schema: the ``requestedSchema`` that was sent; accepted content is validated against it
            (servers SHOULD, MCP client/elicitation, "Form Mode Security").
        formats: assert the fields' ``format`` (``email``, ``uri``, ``date``, ``date-time``,
            the formats a form may ask for); False when a validator of its own checks the
            content afterwards (a pydantic model), whose types decide what they accept.
    Returns:
        the accepted content (a flat dict).
    Raises:
        ElicitDeclined, ElicitCancelled (also for a JSON-RPC error answer), ElicitMalformed
            (also for a content value that is not a string, number, boolean or array of
            strings, whether its key is declared or not; null counts as an empty optional field).
    """
    if answer.error is not None:
        raise ElicitCancelled(answer.error)
    result = answer.result
    assert result is not None  # exactly one of result and error is set
    action = result.get("action")
    if action is None:
        raise ElicitMalformed("the answer has no action; it must be accept, decline or cancel")
    if action == "decline":
        raise ElicitDeclined()
    if action == "cancel":
        raise ElicitCancelled()
    if action != "accept":
        raise ElicitMalformed(f"action must be accept, decline or cancel, got {action!r}")
    content = result.get("content", {})
    if not isinstance(content, dict):
        raise ElicitMalformed(f"content must be a JSON object, got {type(content).__name__}")
    # Some clients send null for a field the user left empty; for an optional field that is absence.
    required = schema.get("required", ())
    content = {key: value for key, value in content.items() if value is not None or key in required}
    for key, value in content.items():
        # schema.ts ElicitResult.content: string | number | boolean | string[], under every key,
        # also those the schema does not declare (which its validation would let through).
        if not _primitive(value):
            raise ElicitMalformed(
                f"content[{key!r}] is {_kind(value)}; an elicitation answer's values must be strings, numbers, "
                "booleans or arrays of strings"
            )
    text = _schema_text(schema)
    validator = _content_validator(text, formats) if text is not None else SchemaValidator(schema, formats)
    if validator.is_valid(content):
        return content
    error = best_match(validator.iter_errors(content))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        raise ElicitMalformed(
            f"content does not match requestedSchema{' at ' + where if where else ''}: {error.message}"
        )
    return content


def _primitive(value: Any) -> bool:
    """True for the values an accepted elicitation's content may hold (MCP client/elicitation)."""
    if isinstance(value, list):
        return all(isinstance(item, str) for item in value)
    return isinstance(value, (str, int, float))  # bool is an int


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "an array with a value that is not a string"
    return "an object" if isinstance(value, dict) else f"a {type(value).__name__}"


def _schema_text(schema: Any) -> str | None:
    """The canonical JSON text of a schema (its cache key), or None when it is not JSON."""
    try:
        return json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None


@functools.lru_cache(maxsize=SCHEMA_CACHE_SIZE)
def _content_validator(text: str, formats: bool) -> SchemaValidator:
    return SchemaValidator(json.loads(text), formats)


def form_request(
    client: ClientView, message: str, requested_schema: dict[str, Any], key: str | None = None
) -> InputRequest:
    """The ``elicitation/create`` input request for a form, checked before anything is sent.

    Raises:
        TypeError: ``message`` is not a non-empty string.
        ElicitUnsupported: the client did not declare form-mode elicitation.
        ElicitSchemaInvalid: ``requested_schema`` is outside the spec's subset.
    """
    check_message(message)
    if not client.client_supports_elicit("form"):
        raise ElicitUnsupported("form", declared=client.client_supports_elicit("url"))
    version = client.protocol_version
    check_requested_schema(requested_schema, version)
    params = {"message": message, "requestedSchema": requested_schema}
    if since(version, ELICITATION_MODES):
        params = {"mode": "form", **params}
    return InputRequest("elicitation/create", params, key)


def check_message(message: object) -> None:
    """Raise TypeError unless ``message`` is a non-empty string (an elicitation's question)."""
    if not isinstance(message, str) or not message:
        raise TypeError("elicit: message must be a non-empty string")
