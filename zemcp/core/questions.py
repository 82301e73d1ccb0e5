"""The questions a handler asks the client (MCP client/elicitation, client/sampling,
client/roots): :class:`Ask` and its kinds :class:`Elicit`, :class:`ElicitURL`,
:class:`Sample` and :class:`ListRoots`.

Each question builds its input request (:class:`zemcp.protocol.inputs.InputRequest`), after
checking that the client declared what it needs, and turns the client's answer into the
value the handler gets, or into the outcome's exception. The handler asks them through its
:class:`zemcp.core.context.Context`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zemcp.core import forms, pydantic_types
from zemcp.core.errors import CapabilityMissing, ClientErrorResponse, ClientRequestError, ClientTimeout
from zemcp.protocol import elicitation, jsonrpc, versions
from zemcp.protocol.inputs import InputRequest
from zemcp.state.waitingcalls import CapacityError

if TYPE_CHECKING:
    from zemcp.protocol.capabilities import ClientView


class Ask:
    """A question for the client that :meth:`zemcp.Context.ask_all` can send together with others.

    Subclasses: :class:`Elicit`, :class:`ElicitURL`, :class:`Sample`, :class:`ListRoots`.
    Each builds its input request (checking the client's capabilities first) and turns the
    client's answer into the value the matching ``ctx`` method returns.

    Attributes:
        key: the ``inputRequests`` key in the 2026-07-28 era; None names it by position.
    """

    key: str | None = None

    def request(self, client: ClientView) -> InputRequest:
        """The input request; raises before anything is sent when the client cannot take it."""
        raise NotImplementedError

    def interpret(self, answer: jsonrpc.Response) -> Any:
        """The handler's value from the client's answer; raises the outcome's exception."""
        raise NotImplementedError

    def refusal(self, exc: CapacityError | TimeoutError) -> Exception:
        """What a handler sees when a pending cap is reached or the answer times out."""
        raise NotImplementedError


class Elicit(Ask):
    """Form-mode elicitation: the value is the accepted content (see :meth:`zemcp.Context.elicit`).

    Args:
        message: the question shown to the user.
        requested_schema: a flat object schema, or a dataclass, TypedDict or pydantic model
            of primitive fields.
        key: the ``inputRequests`` key in the 2026-07-28 era.
    """

    def __init__(self, message: str, requested_schema: dict[str, Any] | type, key: str | None = None):
        self.message = message
        self.cls = requested_schema if isinstance(requested_schema, type) else None
        if isinstance(requested_schema, type):
            requested_schema = forms.elicitation_schema(requested_schema)
        self.schema: dict[str, Any] = requested_schema
        self.key = key

    def request(self, client: ClientView) -> InputRequest:
        return elicitation.form_request(client, self.message, self.schema, self.key)

    def interpret(self, answer: jsonrpc.Response) -> Any:
        # A model validates the content itself: its types, not a format checker, decide.
        content = elicitation.interpret_answer(answer, self.schema, formats=not pydantic_types.is_model(self.cls))
        if self.cls is None:
            return content
        return forms.from_content(self.cls, content)

    def refusal(self, exc: CapacityError | TimeoutError) -> Exception:
        return _elicit_refusal(exc)


class ElicitURL(Ask):
    """URL-mode elicitation (2025-11-25 on): the value is None once the user consented.

    Args:
        message: why the user should open the URL.
        url: the page for the interaction (passwords, API keys, payments ...).
        elicitation_id: sent as ``elicitationId`` in the handshake era (2026-07-28 retired it).
        key: the ``inputRequests`` key in the 2026-07-28 era.
    """

    def __init__(self, message: str, url: str, elicitation_id: str | None = None, key: str | None = None):
        self.message, self.url, self.elicitation_id, self.key = message, url, elicitation_id, key

    def request(self, client: ClientView) -> InputRequest:
        elicitation.check_message(self.message)
        if not client.client_supports_elicit("url"):
            raise elicitation.ElicitUnsupported("url")
        params = {"mode": "url", "message": self.message, "url": self.url}
        if self.elicitation_id is not None and not versions.since(client.protocol_version, versions.STATELESS):
            params["elicitationId"] = self.elicitation_id
        return InputRequest("elicitation/create", params, self.key)

    def interpret(self, answer: jsonrpc.Response) -> None:
        result = answer.result
        if answer.error is None and result is not None and result.get("action") == "accept" and "content" in result:
            raise elicitation.ElicitMalformed("a URL-mode accept carries no content")
        elicitation.interpret_answer(answer, {"type": "object"})

    def refusal(self, exc: CapacityError | TimeoutError) -> Exception:
        return _elicit_refusal(exc)


class _ClientRequest(Ask):
    """Sampling and roots: the capability is checked, an error answer raises."""

    capability = ""
    method = ""

    def __init__(self, params: dict[str, Any], key: str | None):
        self.params, self.key = params, key

    def request(self, client: ClientView) -> InputRequest:
        if not client.client_supports(self.capability):
            raise CapabilityMissing(self.capability, self.method)
        return InputRequest(self.method, self.params, self.key)

    def interpret(self, answer: jsonrpc.Response) -> Any:
        if answer.error is not None:
            raise ClientErrorResponse(self.method, answer.error)
        return answer.result

    def refusal(self, exc: CapacityError | TimeoutError) -> Exception:
        if isinstance(exc, TimeoutError):
            return ClientTimeout(self.method, exc.args[0] if exc.args else 0)
        return ClientRequestError(f"cannot send {self.method}: {exc}")


class Sample(_ClientRequest):
    """``sampling/createMessage``: the value is the client's ``CreateMessageResult`` dict.

    Args:
        messages: ``SamplingMessage`` dicts (``{"role", "content"}``), or one string sent as
            a single user text message.
        max_tokens: the most tokens to generate.
        key: the ``inputRequests`` key in the 2026-07-28 era.
        options: further ``CreateMessageRequest`` params in their spec names
            (``systemPrompt``, ``modelPreferences``, ``temperature``, ``stopSequences``,
            ``includeContext``, ``metadata``).
    """

    capability, method = "sampling", "sampling/createMessage"

    def __init__(self, messages: list[dict[str, Any]] | str, max_tokens: int, key: str | None = None, **options: Any):
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        super().__init__({"messages": messages, "maxTokens": max_tokens, **options}, key)


class ListRoots(_ClientRequest):
    """``roots/list``: the value is the list of ``{"uri", "name"?}`` roots.

    Args:
        key: the ``inputRequests`` key in the 2026-07-28 era.
    """

    capability, method = "roots", "roots/list"

    def __init__(self, key: str | None = None):
        super().__init__({}, key)

    def interpret(self, answer: jsonrpc.Response) -> list[dict[str, Any]]:
        roots = super().interpret(answer).get("roots", [])
        return roots if isinstance(roots, list) else []


def _elicit_refusal(exc: CapacityError | TimeoutError) -> Exception:
    if isinstance(exc, TimeoutError):
        return elicitation.ElicitTimeout(exc.args[0] if exc.args else 0)
    return elicitation.ElicitTooMany(str(exc), exc.advice)
