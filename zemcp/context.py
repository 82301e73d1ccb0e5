"""The context a handler gets to talk to the client during its request.

A handler declares a parameter annotated :class:`Context` (or named ``ctx``) to receive it.
Everything the server sends to the client while a request runs goes through here, on the
request's own reply sink: MCP basic/transports says messages related to a request ride that
request's response stream, so the first of them upgrades the response to
``text/event-stream``. Server-to-client requests (elicitation, sampling, roots) are checked
against the capabilities the client declared at initialize before anything is sent.
"""

from __future__ import annotations

import math
import secrets
from typing import TYPE_CHECKING, Any, TypeVar

from zemcp import elicitation, jsonrpc
from zemcp.correlation import CapacityError
from zemcp.elicitation import ElicitAborted

if TYPE_CHECKING:
    from zemcp.correlation import CorrelationTable
    from zemcp.session import Call, Session

T = TypeVar("T")

#: What a handler may raise that the server turns into an error answer. SystemExit is in:
#: argparse, click and sys.exit raise it, and it must not end the worker for every session.
HANDLER_ERRORS = (Exception, SystemExit, KeyboardInterrupt)


class CallFinished(ElicitAborted):
    """The request's handler already returned; its context cannot talk to the client any more."""

    def __init__(self) -> None:
        super().__init__("the request already finished: ctx cannot be used after the handler returned")


#: RFC 5424 severities in increasing order (MCP server/utilities/logging).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class ClientRequestError(Exception):
    """A server-to-client request other than elicitation (sampling, roots) did not succeed."""


class CapabilityMissing(ClientRequestError):
    """The client did not declare the capability the request needs; nothing was sent."""

    def __init__(self, capability: str, method: str) -> None:
        super().__init__(f"the client did not declare the {capability} capability at initialize, so {method} cannot be sent")


class ClientErrorResponse(ClientRequestError):
    """The client answered with a JSON-RPC error (``code``, ``message``)."""

    def __init__(self, method: str, error: dict) -> None:
        self.code = error.get("code")
        self.message = error.get("message", "")
        super().__init__(f"the client refused {method}: error {self.code}: {self.message}")


class ClientTimeout(ClientRequestError):
    """The client did not answer in time; the server sent ``notifications/cancelled``."""

    def __init__(self, method: str, seconds: float) -> None:
        super().__init__(f"no response to {method} within {seconds:g} s")


class URLElicitationRequired(Exception):
    """Raise from a tool to answer the call with error -32042 (MCP 2025-11-25 URL elicitation).

    The client should complete the listed URL-mode elicitations, then retry the call.

    Args:
        elicitations: a list of ``(message, url)`` pairs or of ready ``{"mode": "url",
            "message", "url", "elicitationId"}`` dicts; ids are generated where missing.
    """

    def __init__(self, elicitations: list) -> None:
        if not isinstance(elicitations, list) or not elicitations:
            raise TypeError("URLElicitationRequired needs a non-empty list of (message, url) pairs or URL-mode dicts")
        self.elicitations = [_url_elicitation(item) for item in elicitations]
        super().__init__("this request needs the user to complete a URL-mode elicitation first")


def _url_elicitation(item: Any) -> dict:
    if isinstance(item, dict):
        if item.get("mode") != "url" or not all(isinstance(item.get(k), str) for k in ("message", "url", "elicitationId")):
            raise TypeError(f"a URL-mode elicitation dict needs mode 'url' and string message, url and elicitationId, got {item!r}")
        return item
    if isinstance(item, tuple) and len(item) == 2 and all(isinstance(part, str) for part in item):
        return {"mode": "url", "message": item[0], "url": item[1], "elicitationId": new_elicitation_id()}
    raise TypeError(f"expected a (message, url) pair of strings or a URL-mode dict, got {item!r}")


def new_elicitation_id() -> str:
    """A fresh ``elicitationId`` for URL mode (128 random bits)."""
    return secrets.token_urlsafe(16)


class Context:
    """What a handler gets to talk to the client during its request.

    Attributes:
        session: the caller's session (``client_info``, ``protocol_version``, ``capabilities`` ...).
        request_id: the JSON-RPC id of the request being handled.
    """

    def __init__(self, call: "Call", table: "CorrelationTable", timeout: float):
        self._call = call
        self._table = table
        self._timeout = timeout
        self._last_progress: float | None = None
        self.session: "Session" = call.session
        self.request_id = call.request_id

    def client_supports_elicit(self, mode: str = "form") -> bool:
        """True when the client declared elicitation in ``mode`` (``form`` or ``url``); check before eliciting."""
        return self.session.client_supports_elicit(mode)

    def elicit(self, message: str, requested_schema: dict | type[T]) -> dict | T:
        """Ask the user for information and wait for the answer (MCP client/elicitation, form mode).

        Ask before doing side effects: the wait can end in decline, cancel, timeout or the
        client going away, and the handler should then leave nothing half done.

        Args:
            message: the question shown to the user.
            requested_schema: a flat ``{"type": "object", "properties": {...}}`` schema, or a
                dataclass or TypedDict of primitive fields (the schema is derived from it).
        Returns:
            the accepted content, validated; an instance of the class when a class was given.
        Raises:
            zemcp.ElicitError: a subclass names the outcome (declined, cancelled, malformed,
                unsupported, too many pending, schema invalid, timeout, request cancelled,
                session ended, client disconnected).
        """
        if isinstance(requested_schema, type):
            # Imported here: zemcp.schemas imports this module to recognise the Context type.
            from zemcp import schemas

            content = elicitation.elicit(self._call, self._table, self._timeout, message,
                                         schemas.elicitation_schema(requested_schema))
            return schemas.from_content(requested_schema, content)
        return elicitation.elicit(self._call, self._table, self._timeout, message, requested_schema)

    def elicit_url(self, message: str, url: str, elicitation_id: str | None = None) -> str:
        """Ask the user to open ``url`` for an interaction outside MCP (2025-11-25 URL mode).

        Use it for what form mode must not ask for: passwords, API keys, payments. Returns
        when the user consented to open the URL; call :meth:`elicitation_complete` when the
        interaction finished.

        Returns:
            the ``elicitationId`` sent (generated when not given).
        Raises:
            zemcp.ElicitError: as :meth:`elicit`; ``ElicitUnsupported`` when the client did not
                declare ``elicitation.url``.
        """
        elicitation_id = elicitation_id or new_elicitation_id()
        elicitation.elicit_url(self._call, self._table, self._timeout, message, url, elicitation_id)
        return elicitation_id

    def elicitation_complete(self, elicitation_id: str) -> None:
        """Tell the client a URL-mode interaction finished (``notifications/elicitation/complete``)."""
        self._notify("notifications/elicitation/complete", {"elicitationId": elicitation_id})

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a log message to the client (``notifications/message``, MCP server/utilities/logging).

        Sent only when ``level`` is at or above the level the client set with
        ``logging/setLevel`` (``info`` until it sets one).

        Args:
            level: one of ``LOG_LEVELS`` (debug ... emergency).
            data: any JSON value (a string or an object); no secrets or personal data.
            logger: optional name of the component that logs.
        Raises:
            ValueError: ``level`` is not an RFC 5424 level.
            the abort reason once the request was cancelled or its client went away.
        """
        if level not in LOG_LEVELS:
            raise ValueError(f"log level {level!r} is not one of {', '.join(LOG_LEVELS)}")
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(self.session.log_level):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self._notify("notifications/message", params)

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress (``notifications/progress``, MCP basic/utilities/progress).

        Does nothing when the request carried no ``_meta.progressToken``.

        Args:
            progress: how far along; must increase with every call (fractions allowed).
            total: the value of ``progress`` at completion, if known.
            message: optional human-readable status.
        Raises:
            ValueError: ``progress`` did not increase, or ``progress`` or ``total`` is not a
                finite number.
            the abort reason once the request was cancelled or its client went away.
        """
        for name, value in (("progress", progress), ("total", total)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if self._last_progress is not None and progress <= self._last_progress:
            raise ValueError(f"progress must increase with every report: {progress} after {self._last_progress}")
        self._last_progress = progress
        if self._call.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self._call.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._notify("notifications/progress", params)

    def sample(self, messages: list[dict] | str, max_tokens: int, **options: Any) -> dict:
        """Ask the client's language model for a completion (``sampling/createMessage``).

        Args:
            messages: ``SamplingMessage`` dicts (``{"role", "content"}``), or one string sent
                as a single user text message.
            max_tokens: the most tokens to generate.
            options: further ``CreateMessageRequest`` params in their spec names
                (``systemPrompt``, ``modelPreferences``, ``temperature``, ``stopSequences``,
                ``includeContext``, ``metadata``).
        Returns:
            the client's ``CreateMessageResult`` (``role``, ``content``, ``model``, ``stopReason``).
        Raises:
            CapabilityMissing, ClientErrorResponse, ClientTimeout; the aborts (request
                cancelled, session ended, client disconnected).
        """
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        return self._request("sampling", "sampling/createMessage", {"messages": messages, "maxTokens": max_tokens, **options})

    def list_roots(self) -> list[dict]:
        """The client's roots (``roots/list``): a list of ``{"uri", "name"?}``.

        Raises:
            CapabilityMissing, ClientErrorResponse, ClientTimeout; the aborts.
        """
        roots = self._request("roots", "roots/list", {}).get("roots", [])
        return roots if isinstance(roots, list) else []

    def _request(self, capability: str, method: str, params: dict) -> dict:
        if not self.session.client_supports(capability):
            raise CapabilityMissing(capability, method)
        try:
            answer = self._table.ask(self._call, method, params, self._timeout)
        except CapacityError as exc:
            raise ClientRequestError(f"cannot send {method}: {exc}") from None
        except TimeoutError:
            raise ClientTimeout(method, self._timeout) from None
        if answer.error is not None:
            raise ClientErrorResponse(method, answer.error)
        return answer.result

    def _notify(self, method: str, params: dict) -> None:
        self._call.raise_if_aborted()
        message = jsonrpc.notification(method, params)
        # Raise in the handler, where the mistake is, rather than drop it from the stream.
        jsonrpc.encode(message)
        self._call.sink.send(message)

