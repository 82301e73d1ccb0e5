"""Multi-round-trip requests (MCP 2026-07-28 basic/patterns/mrtr, SEP-2322) by replay.

In the stateless era the server never waits for the client. A handler still calls
``ctx.elicit(...)``; here that goes to a :class:`Round`, the request's
:class:`zemcp.core.exchange.Exchange`. The handler runs from the top on every round:

- a question answered in an earlier round returns its recorded answer at once;
- a question asked in the previous round and answered by this request's
  ``inputResponses`` is recorded and returns that answer (a request without
  ``requestState`` has no previous round: its responses are taken by key, so a client may
  answer a question it knows in advance);
- the first question without an answer ends the round: :class:`InputRequired` unwinds the
  handler and the request is answered with an ``InputRequiredResult`` whose
  ``inputRequests`` hold the open questions and whose ``requestState`` records the answers.

A question is matched by its position in the run, its key and a digest of its method and
params, so an answer can never be handed to a different question: a handler that asks
something else where a recorded answer stands breaks the replay contract, and the round
ends with :class:`ReplayMismatch` (reported, never mixed up). The state is plain data here;
:mod:`zemcp.eras.modern.era` seals it (:mod:`zemcp.eras.modern.request_state`) before it leaves the server.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zemcp import logsafe
from zemcp.core.exchange import Abortable, RoundEnded
from zemcp.protocol import jsonrpc
from zemcp.protocol.capabilities import ClientView
from zemcp.protocol.inputs import InputRequest, fallback_key
from zemcp.protocol.jsonrpc import INVALID_PARAMS, ProtocolError
from zemcp.replies.sinks import ReplySink

if TYPE_CHECKING:
    from zemcp.replies.direct import DirectSink
    from zemcp.state.waitingcalls import Withdrawal

log = logging.getLogger("zemcp.mrtr")

#: Version of the plain state layout; a state of another version is refused.
STATE_VERSION = 1
#: ``inputResponses`` keys a log line names at most (a client chooses how many it sends).
LISTED_KEYS = 5


class InputRequired(RoundEnded):
    """The handler asked questions the client has not answered yet.

    Attributes:
        requests: ``[(key, digest, InputRequest)]`` of the open questions, in order.
    """

    def __init__(self, requests: list[tuple[str, str, InputRequest]]):
        super().__init__(f"input required: {', '.join(key for key, _, _ in requests)}")
        self.requests = requests


class ReplayMismatch(RoundEnded):
    """On replay the handler asked a different question than the one recorded or asked before
    at that place (MCP multi-round-trip replay contract broken)."""

    def __init__(self, position: int, key: str, recorded_key: str, what: str = "answered in an earlier round"):
        other = "" if recorded_key == key else f" (there: key {recorded_key!r})"
        super().__init__(
            f"question {position + 1} (key {key!r}) is not the question {what}{other}: a handler must ask "
            f"the same questions in the same order for the same arguments (docs/elicitation.md, 'Replay'); "
            f"start the request again without requestState"
        )


def _kept(method: str, result: dict[str, Any]) -> dict[str, Any]:
    # An elicitation's answer is its action and content; anything else the client put in it
    # would only make the requestState bigger.
    if method == "elicitation/create":
        return {k: result[k] for k in ("action", "content") if k in result}
    return result


def _listed(keys: list[str]) -> str:
    """Keys for a log line: each clipped, at most :data:`LISTED_KEYS` of them, the rest counted."""
    shown = ", ".join(logsafe.clip(key) for key in keys[:LISTED_KEYS])
    return shown if len(keys) <= LISTED_KEYS else f"{shown} and {len(keys) - LISTED_KEYS} more"


def question_digest(request: InputRequest) -> str:
    """A short digest of a question's method and params (canonical JSON, SHA-256, 96 bits, hex)."""
    text = json.dumps([request.method, request.params], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def parse_state(state: Any) -> tuple[list[list[Any]], list[list[Any]] | None, dict[str, list[Any]]]:
    """The recorded answers, last round's questions and held answers of an opened (plain) state.

    Args:
        state: the plain state of :meth:`Round.input_required` from an earlier round (after
            sealing and opening), or None for a first round.
    Returns:
        ``(answers, asked, held)``: ``[[key, digest, result], ...]`` in question order,
        ``[[key, digest], ...]`` (None for a first round: nothing was asked yet), and
        ``{key: [digest, result]}`` for answers that arrived while an earlier question of
        the same batch was still open.
    Raises:
        ProtocolError: -32602 for a state of another layout (made by another version).
    """
    if state is None:
        return [], None, {}
    ok = (
        isinstance(state, dict)
        and state.get("v") == STATE_VERSION
        and isinstance(state.get("answers"), list)
        and isinstance(state.get("asked"), list)
        and isinstance(state.get("held"), dict)
        and all(isinstance(a, list) and len(a) == 3 and isinstance(a[2], dict) for a in state["answers"])
        and all(isinstance(a, list) and len(a) == 2 for a in state["asked"])
        and all(isinstance(h, list) and len(h) == 2 and isinstance(h[1], dict) for h in state["held"].values())
    )
    if not ok:
        raise ProtocolError(
            INVALID_PARAMS,
            "Invalid params: requestState was made by another server version; "
            "start the request again without requestState and inputResponses",
            data={"reason": "invalid_request_state"},
        )
    return state["answers"], state["asked"], state["held"]


@dataclass(frozen=True)
class Lineage:
    """Which call a round belongs to, and which round of it it is (telemetry joins rounds by it).

    Attributes:
        call: a random id made at the call's first round and carried in its ``requestState``.
        round: 1 for the first round, one more for each retry that answers questions.
    """

    call: str
    round: int

    @classmethod
    def of(cls, state: Any) -> Lineage:
        """The lineage of the round an opened state (or None, a first round) continues."""
        if isinstance(state, dict) and isinstance(state.get("call"), str) and isinstance(state.get("round"), int):
            return cls(state["call"][:32], state["round"] + 1)
        return cls(secrets.token_hex(8), 1)

    def next(self) -> dict[str, Any]:
        """The fields the state this round seals carries for the next one."""
        return {"call": self.call, "round": self.round}


def check_responses(responses: Any, asked: list[list[Any]] | None) -> dict[str, Any]:
    """``params.inputResponses`` checked: an object whose answers to last round's questions are objects.

    Keys that answer nothing asked are ignored, as the spec asks.

    Args:
        responses: the request's ``inputResponses`` (None or absent counts as ``{}``).
        asked: last round's questions, from :func:`parse_state`; None (a first round)
            checks every response, as any key may be used.
    Returns:
        the responses to use.
    Raises:
        ProtocolError: -32602 naming the malformed part.
    """
    if responses is None:
        return {}
    if not isinstance(responses, dict):
        raise ProtocolError(
            INVALID_PARAMS,
            "Invalid params: inputResponses must be an object mapping each "
            "inputRequests key to the client's result for it",
        )
    keys = responses if asked is None else [key for key, _ in asked]
    for key in keys:
        if key in responses and not isinstance(responses[key], dict):
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: inputResponses[{key!r}] must be a result object (an ElicitResult, "
                f"CreateMessageResult or ListRootsResult), got {type(responses[key]).__name__}",
            )
    return responses


class Round(Abortable):
    """One round of a stateless request: the :class:`zemcp.core.exchange.Exchange` that replays answers.

    Args:
        client: what this request declared in its envelope.
        request_id: this round's JSON-RPC id.
        sink: where its notifications (progress, log) and final response go.
        progress_token: the request's ``_meta.progressToken``, or None.
        answers, asked, held: from :func:`parse_state`.
        responses: this request's checked ``inputResponses`` (:func:`check_responses`).
        timeout: [seconds] how long the state of this round stays valid.

    Attributes:
        ended: the :class:`RoundEnded` raised in this round, or None.
        missing_capabilities: the ``ClientCapabilities`` the handler needed and the request
            did not declare (``{"sampling": {}}`` ...).
        aborted: why the request can no longer be answered (the client closed the stream), or None.
    """

    session = None
    # A round never waits for the client, whatever the WSGI server.
    can_wait = True

    def __init__(
        self,
        client: ClientView,
        request_id: jsonrpc.RequestId,
        sink: ReplySink | DirectSink,
        progress_token: jsonrpc.RequestId | None,
        answers: list[list[Any]],
        asked: list[list[Any]] | None,
        held: dict[str, list[Any]],
        responses: dict[str, Any],
        timeout: float,
    ):
        super().__init__()
        self.client = client
        self.request_id = request_id
        self.sink = sink
        self.progress_token = progress_token
        self.timeout = timeout
        self._answers = [list(a) for a in answers]
        self._asked = None if asked is None else {key: digest for key, digest in asked}
        self._held = {key: list(value) for key, value in held.items()}
        self._responses = responses
        self._position = 0
        # Each response answers one question: a key asked again later in the run needs a new answer.
        self._used: set[str] = set()
        self.ended: RoundEnded | None = None
        self.missing_capabilities: dict[str, dict[str, Any]] = {}

    def ask(
        self, requests: list[InputRequest], timeout: float | None = None, withdrawal: Withdrawal | None = None
    ) -> list[jsonrpc.Response]:
        """The answers to ``requests``, recorded or from this request's ``inputResponses``.

        ``timeout`` and ``withdrawal`` are ignored: a round never waits for the client; how
        late an answer may come is the lifetime of the ``requestState`` (:attr:`timeout`,
        process-wide).

        Raises:
            InputRequired: some have no answer yet (the round ends and asks for them).
            ReplayMismatch: a question differs from the recorded one at its position.
            the abort reason once the request can no longer be answered.
        """
        self.raise_if_aborted()
        if self.ended is not None:
            # A handler that swallowed the end of the round and asks again: end it again.
            raise self.ended
        answers: list[jsonrpc.Response] = []
        missing: list[tuple[str, str, InputRequest]] = []
        for request in requests:
            position = self._position
            self._position += 1
            key = request.key if request.key is not None else fallback_key(request.method, position + 1)
            digest = question_digest(request)
            if position < len(self._answers):
                recorded_key, recorded_digest, result = self._answers[position]
                if (recorded_key, recorded_digest) != (key, digest):
                    self.ended = ReplayMismatch(position, key, recorded_key)
                    raise self.ended
                answers.append(jsonrpc.Response(None, result, None))
                continue
            if key in self._used:
                missing.append((key, digest, request))
                continue
            if self._asked is not None and key in self._asked and self._asked[key] != digest and key in self._responses:
                # The answer is for the question asked last round under this key, not for this one.
                self.ended = ReplayMismatch(position, key, key, "asked in the previous round under this key")
                raise self.ended
            if key in self._responses and (self._asked is None or key in self._asked):
                result = _kept(request.method, self._responses[key])
            elif key in self._held and self._held[key][0] == digest:
                result = self._held[key][1]
            else:
                missing.append((key, digest, request))
                continue
            self._used.add(key)
            if missing:
                # Answers are recorded in question order: keep this one until the earlier is answered.
                self._held[key] = [digest, result]
            else:
                self._held.pop(key, None)
                self._answers.append([key, digest, result])
                # The key as id tells an answer new in this round from a replayed one (id None).
                answers.append(jsonrpc.Response(key, result, None))
        if missing:
            self.ended = InputRequired(missing)
            raise self.ended
        return answers

    def notify(self, message: dict[str, Any]) -> None:
        """Queue a notification on the request's stream (raises the abort reason once aborted)."""
        self.raise_if_aborted()
        self.sink.send(message)

    def end_stream(self) -> None:
        """Nothing to do: 2026-07-28 streams are not resumable, and a round ends with its stream."""

    def show_status(self, message: str) -> None:
        """Nothing to do: a call that is not a task has no status to show."""

    def note_missing(self, required: dict[str, Any]) -> None:
        """Record capabilities the handler needed and the request did not declare."""
        for capability, settings in required.items():
            self.missing_capabilities.setdefault(capability, {}).update(settings)

    @property
    def ignored_keys(self) -> list[str]:
        """The keys of this request's ``inputResponses`` that answered no question of this
        round, in the client's order: ignored, as the spec asks (basic/patterns/mrtr). A key
        whose answer an earlier round recorded is not among them: the client sent it again.
        """
        recorded = {answer[0] for answer in self._answers}
        return [key for key in self._responses if key not in self._used and key not in recorded]

    def report_ignored(self, call: str) -> None:
        """Log a warning when this round asks again and ignored answers under keys that
        answered nothing: the spec has them ignored, so only the log can tell the client's
        author why the question comes back.

        Args:
            call: the request as the log names it (``tools/call 'greet'``).
        """
        ignored = self.ignored_keys
        if ignored and isinstance(self.ended, InputRequired):
            log.warning(
                "%s: the inputResponses under %s answered no question of this round and were ignored; the round "
                "asks again under %s (an answer goes under the key of its inputRequests entry)",
                call,
                _listed(ignored),
                _listed([key for key, _, _ in self.ended.requests]),
            )

    @property
    def unused_answers(self) -> int:
        """Recorded answers the handler did not ask for again before it returned."""
        return max(0, len(self._answers) - self._position)

    def input_required(self) -> tuple[dict[str, Any], Any]:
        """The ``InputRequiredResult`` body (without ``requestState``) and the plain state to seal.

        Call only after :class:`InputRequired` ended the round.

        Returns:
            ``({"resultType": "input_required", "inputRequests": {...}}, state)``.
        """
        assert isinstance(self.ended, InputRequired)
        requests = {key: {"method": r.method, "params": r.params} for key, _, r in self.ended.requests}
        state = {
            "v": STATE_VERSION,
            "answers": self._answers,
            "asked": [[key, digest] for key, digest, _ in self.ended.requests],
            "held": self._held,
        }
        return {"resultType": "input_required", "inputRequests": requests}, state
