"""Refusals of 2026-07-28 requests before a handler runs.

A request the server has no room for, or that its token may not make, is answered here:
the 403 challenge for a missing scope, 429 for the listen-stream cap or the client's fair
share, 503 for the call budget; each refusal names its reason for the refusal counts of
:mod:`zemcp.observe`.
"""

from __future__ import annotations

from typing import Any

from werkzeug.wrappers import Request

from zemcp.auth.principal import InsufficientScope
from zemcp.core.admission import Busy
from zemcp.observe.telemetry import REFUSAL
from zemcp.protocol import jsonrpc
from zemcp.protocol.jsonrpc import INVALID_REQUEST
from zemcp.replies.responses import WSGIResponse, challenge_response, error_response
from zemcp.state.fanout import ListenLimitReached
from zemcp.state.shares import ShareTaken
from zemcp.state.tasks import TaskLimitReached

#: [seconds] when to try again after the listen-stream cap refused a ``subscriptions/listen``.
LISTEN_RETRY_AFTER = 30


def refusal(
    server: Any,
    request: Request,
    message: jsonrpc.Request,
    exc: InsufficientScope | ListenLimitReached | Busy | ShareTaken | TaskLimitReached,
) -> WSGIResponse:
    """The answer to ``message``, refused with ``exc`` before its handler ran.

    Args:
        server: the :class:`zemcp.core.server.Server` (its authorization makes the challenge).
        request: the HTTP request (its environ gets the refusal's reason).
        message: the refused request.
        exc: why it was refused.
    """
    if isinstance(exc, InsufficientScope):
        assert server.auth is not None  # only authorization raises it
        return challenge_response(server.auth.challenge_for(exc), message.id)
    if isinstance(exc, ListenLimitReached):
        request.environ[REFUSAL] = "listen"
        return error_response(
            429,
            INVALID_REQUEST,
            f"Too Many Requests: {exc}",
            id=message.id,
            headers={"Retry-After": str(LISTEN_RETRY_AFTER)},
        )
    request.environ[REFUSAL] = exc.reason
    return error_response(
        exc.status, jsonrpc.INTERNAL_ERROR, str(exc), id=message.id, headers={"Retry-After": str(exc.retry_after)}
    )
