"""What a server tells of its work: a span, a duration and a log record per served message.

One :class:`Telemetry` per server. The telemetry layer of the request pipeline
(:mod:`zemcp.pipeline.telemetry`) opens an :class:`Operation` for each request or notification
a client sends (:meth:`Telemetry.begin`) and finishes it with the JSON-RPC response it got; a handler's
questions to the client (elicitation, sampling, roots) are :meth:`Operation.asking`
blocks. Each operation becomes what the deployment turned on: a SERVER span with CLIENT
children (:mod:`zemcp.observe.tracing`, with ``opentelemetry-api`` installed), the
``mcp.server.operation.duration`` histogram and zemcp's counters
(:mod:`zemcp.observe.otelmetrics`, :mod:`zemcp.observe.prometheus`), and a ``zemcp.request``
log record (``log_requests``). With none of them on, :meth:`Telemetry.begin` returns a
shared operation that does nothing.

Arguments, results and elicited content are recorded only with ``otel_capture_content``.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import time
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from zemcp import logsafe
from zemcp.config import Settings
from zemcp.observe.figures import PROCESS, Source
from zemcp.protocol.jsonrpc import ProtocolError

if TYPE_CHECKING:
    from zemcp.observe.otelmetrics import OtelMetrics
    from zemcp.observe.prometheus import PrometheusMetrics
    from zemcp.observe.tracing import Tracing

request_log = logging.getLogger("zemcp.request")

#: A 2026-07-28 round's ``resultType`` when it ended asking the client (MCP basic/patterns/mrtr):
#: its span's ``zemcp.result_type``, its request record's ``outcome``, its questions' outcome.
INPUT_REQUIRED = "input_required"
#: The server-to-client requests whose outcome is counted (``zemcp.client_requests``).
ASKED_METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
#: [characters] the most of a client-chosen target (tool name, resource URI) a span shows.
TARGET_CHARS = 200
#: What an ask's exception means, by the name of its class or of a base class.
_ASK_OUTCOMES = {
    "InputRequired": INPUT_REQUIRED,
    "TimeoutError": "timeout",
    "CapacityError": "refused",
    "RequestCancelled": "cancelled",
    "ClientDisconnected": "disconnect",
    "CancelledError": "withdrawn",
    "ElicitAborted": "ended",
}


def installed(package: str) -> bool:
    """True when ``package`` can be imported (looked up without importing it)."""
    try:
        return importlib.util.find_spec(package) is not None
    except ValueError:  # a module set to None in sys.modules: blocked on purpose
        return False


class Telemetry:
    """Spans, metrics and request records of one server, as its settings turn them on.

    Args:
        settings: ``otel`` (``auto``: traces and OpenTelemetry metrics when the API is
            installed; ``off``), ``metrics_path`` (Prometheus on when set),
            ``otel_capture_content``, ``log_requests``.
        figures: reads the server's live figures (:data:`zemcp.observe.instruments.GAUGES`),
            None once the server is gone.
        shared_sessions: the sessions live in a store every process sees (Redis).

    Raises:
        RuntimeError: ``metrics_path`` is set and ``prometheus_client`` is not installed (the
            message says what to install).
    """

    def __init__(self, settings: Settings, figures: Source, shared_sessions: bool):
        self.tracing: Tracing | None = None
        self._sinks: list[OtelMetrics | PrometheusMetrics] = []
        if settings.otel == "auto" and installed("opentelemetry"):
            from zemcp.observe import otelmetrics
            from zemcp.observe.tracing import Tracing

            self.tracing = Tracing()
            self._sinks.append(otelmetrics.process_metrics())
        self.prometheus: PrometheusMetrics | None = None
        if settings.metrics_path:
            if not installed("prometheus_client"):
                raise RuntimeError(
                    f"ZEMCP_METRICS_PATH={settings.metrics_path} serves Prometheus metrics, which need the "
                    "prometheus_client package: pip install prometheus_client (or '.[prometheus]' in a zemcp "
                    "checkout), or unset ZEMCP_METRICS_PATH"
                )
            from zemcp.observe.prometheus import process_metrics

            self.prometheus = process_metrics(shared_sessions)
            self._sinks.append(self.prometheus)
        if self._sinks:
            PROCESS.watch(figures)
        self.capture = settings.otel_capture_content
        self.log_requests = settings.log_requests
        #: Whether anything is recorded at all; when not, every operation is :data:`NULL_OPERATION`.
        self.active = self.tracing is not None or bool(self._sinks) or self.log_requests

    def begin(
        self,
        method: str,
        request_id: Any,
        transport: str,
        *,
        target: str | None = None,
        known_method: bool = True,
        known_target: bool = True,
        version: str | None = None,
        session: str | None = None,
        meta: Any = None,
        trace: Mapping[str, str] | None = None,
    ) -> Operation:
        """Open the operation of one message a client sent.

        Args:
            method: the JSON-RPC method.
            request_id: its id; None for a notification.
            transport: ``tcp`` (HTTP) or ``pipe`` (stdio), the ``network.transport``.
            target: the tool or prompt name, or the resource URI, when the method has one.
            known_method, known_target: whether ``method`` and ``target`` name what this
                server has: client-chosen names never become metric labels (a flood of made-up
                names would grow them without end).
            version: the MCP protocol version of the message.
            session: the session's fingerprint (:func:`zemcp.state.session.fingerprint`), the
                span's ``mcp.session.id`` and the log record's ``session``; never the id
                itself, which grants the use of the session. None outside a session.
            meta: the message's ``params._meta`` (trace context).
            trace: the trace context the transport carried (HTTP's ``traceparent`` header),
                the parent when ``meta`` has none.
        Returns:
            the operation; :data:`NULL_OPERATION` when nothing is recorded.
        """
        if not self.active:
            return NULL_OPERATION
        return Operation(
            self, method, request_id, transport, target, known_method, known_target, version, session, meta, trace
        )

    def refused(self, reason: str, status: int) -> None:
        """Count a request refused before any handler ran (reasons: :data:`zemcp.observe.instruments.REFUSALS`)."""
        for sink in self._sinks:
            sink.refusal(reason, status)

    def session_ended(self, created: float, version: str, transport: str) -> None:
        """Record the duration of a session that ended (none ends in error: expiry, DELETE and a
        stop are its ordinary ends, so ``error.type`` stays empty).

        Args:
            created: [seconds, ``time.time()``] when it was created.
            version: its protocol version; transport: ``tcp`` or ``pipe``.
        """
        if self._sinks:
            seconds = max(0.0, time.time() - created)
            for sink in self._sinks:
                sink.session(seconds, ("", version, transport))

    def _outcome(self, method: str, outcome: str) -> None:
        for sink in self._sinks:
            sink.outcome(method, outcome)


class Operation:
    """One message a client sent, from its arrival to its response (see :meth:`Telemetry.begin`)."""

    __slots__ = (
        "_attributes",
        "_labels",
        "_method",
        "_session",
        "_span",
        "_started",
        "_target",
        "_telemetry",
    )

    def __init__(
        self,
        telemetry: Telemetry | None,
        method: str,
        request_id: Any,
        transport: str,
        target: str | None,
        known_method: bool,
        known_target: bool,
        version: str | None,
        session: str | None,
        meta: Any,
        trace: Mapping[str, str] | None = None,
    ):
        self._telemetry = telemetry
        self._started = time.perf_counter()
        self._method = method
        self._target = target
        self._session = session
        self._attributes: dict[str, Any] = {}
        self._span: Any = None
        if telemetry is None:
            return
        tool = target if known_target and method == "tools/call" else ""
        prompt = target if known_target and method == "prompts/get" else ""
        self._labels = [method if known_method else "_OTHER", tool or "", prompt or "", "", version or "", transport]
        if telemetry.tracing is None:
            return
        attributes: dict[str, Any] = {"mcp.method.name": method[:TARGET_CHARS], "network.transport": transport}
        clipped = target[:TARGET_CHARS] if isinstance(target, str) else None
        if method == "tools/call" and clipped:
            attributes["gen_ai.tool.name"] = clipped
            attributes["gen_ai.operation.name"] = "execute_tool"
        elif method == "prompts/get" and clipped:
            attributes["gen_ai.prompt.name"] = clipped
        elif clipped and method.startswith("resources/"):
            attributes["mcp.resource.uri"] = clipped
        if request_id is not None:
            attributes["jsonrpc.request.id"] = str(request_id)
        if version:
            attributes["mcp.protocol.version"] = version
        if session:
            attributes["mcp.session.id"] = session
        # Span names stay few: a method the client made up is named _OTHER (its attribute tells it).
        name = f"{method} {clipped}" if (tool or prompt) and clipped else method if known_method else "_OTHER"
        self._span = telemetry.tracing.server_span(name, attributes, meta, trace)

    def annotate(self, attributes: dict[str, Any]) -> None:
        """Add attributes to the operation's span (zemcp's own, such as a round's call id)."""
        self._attributes.update(attributes)

    def negotiated(self, version: str, session: str) -> None:
        """Name what ``initialize`` settled: the protocol version and the new session's fingerprint."""
        if self._telemetry is None:
            return
        self._labels[4] = version
        self._session = session
        self._attributes["mcp.protocol.version"] = version
        self._attributes["mcp.session.id"] = session

    def capture_arguments(self, arguments: Any) -> None:
        """Record a tool call's arguments (``gen_ai.tool.call.arguments``), if the settings opt in."""
        if self._span is not None and self._telemetry is not None and self._telemetry.capture:
            self._attributes["gen_ai.tool.call.arguments"] = json.dumps(arguments, default=str)

    def trace_ids(self) -> tuple[str, str] | None:
        """``(trace id, span id)`` of the operation's recording span, else None."""
        if self._span is None or self._telemetry is None or self._telemetry.tracing is None:
            return None
        return self._telemetry.tracing.ids(self._span)

    def activate(self) -> Active:
        """A ``with`` block during which the operation's span is current on this thread, so
        that the spans a handler makes are its children."""
        return Active(self)

    def asking(self, methods: list[str]) -> Asking:
        """A ``with`` block around a handler's questions (one per method in ``methods``), each
        a CLIENT span child of this operation; :meth:`Asking.answered` records the answers."""
        return Asking(self, methods)

    def finish(self, response: dict[str, Any] | None, error_type: str | None = None) -> None:
        """End the operation with the response the client got.

        Args:
            response: the JSON-RPC response (a result or an error); None when there is none
                (a cancelled request, a notification).
            error_type: the failure when no response tells it (a refusal's class name).

        Never raises: a failing exporter or instrument is logged, and the response still goes out.
        """
        if self._telemetry is None:
            return
        try:
            self._finish(response, error_type)
        except Exception:
            request_log.warning(
                "telemetry of %s failed; the request was served", logsafe.clip(self._method), exc_info=True
            )

    def _finish(self, response: dict[str, Any] | None, error_type: str | None) -> None:
        telemetry = self._telemetry
        assert telemetry is not None
        seconds = time.perf_counter() - self._started
        description = None
        if error_type is None and response is not None:
            error = response.get("error")
            if isinstance(error, dict):
                error_type, description = str(error.get("code")), error.get("message")
            else:
                result = response.get("result")
                if isinstance(result, dict):
                    if result.get("isError") is True:
                        error_type = "tool_error"
                    elif result.get("resultType") == INPUT_REQUIRED:
                        self._attributes["zemcp.result_type"] = INPUT_REQUIRED
                    if telemetry.capture and self._method == "tools/call" and self._span is not None:
                        # The requestState is a credential for the next round, not content.
                        shown = {k: v for k, v in result.items() if k != "requestState"}
                        self._attributes["gen_ai.tool.call.result"] = json.dumps(shown, default=str)
        # Read while the span records: an ended span is recording no more.
        ids = self.trace_ids() if telemetry.log_requests else None
        if self._span is not None:
            assert telemetry.tracing is not None
            telemetry.tracing.end(self._span, error_type, description, self._attributes)
        labels = self._labels
        labels[3] = error_type or ""
        for sink in telemetry._sinks:
            sink.operation(seconds, tuple(labels))
        if telemetry.log_requests:
            _log_request(self, seconds, error_type, ids)


def failure_type(exc: BaseException) -> str:
    """The ``error.type`` of a message that failed with ``exc``: its JSON-RPC code, or its class name."""
    return str(exc.code) if isinstance(exc, ProtocolError) else type(exc).__name__


def _log_request(operation: Operation, seconds: float, error_type: str | None, ids: tuple[str, str] | None) -> None:
    # A 2026-07-28 round that ended asking the client is no failure and no answer yet: its
    # record says so with the word its span carries (zemcp.result_type).
    asked = operation._attributes.get("zemcp.result_type") == INPUT_REQUIRED
    extra: dict[str, Any] = {
        "event": "request",
        "method": operation._method,
        "duration": round(seconds, 6),
        "outcome": error_type or (INPUT_REQUIRED if asked else "ok"),
    }
    if operation._target is not None:
        # The JSON format cuts fields itself; the text line shows the name clipped and quoted.
        extra["tool"] = operation._target
    if operation._session is not None:
        extra["session"] = operation._session
    if ids is not None:
        extra["trace_id"], extra["span_id"] = ids
    request_log.info(
        "%s %s: %s in %.3f s",
        logsafe.clip(operation._method),
        logsafe.clip(operation._target) if operation._target is not None else "-",
        extra["outcome"],
        seconds,
        extra=extra,
    )


class Active:
    """The ``with`` block of :meth:`Operation.activate`."""

    __slots__ = ("_operation", "_token")

    def __init__(self, operation: Operation):
        self._operation = operation
        self._token: object = None

    def __enter__(self) -> None:
        operation = self._operation
        if operation._span is not None and operation._telemetry is not None and operation._telemetry.tracing:
            self._token = operation._telemetry.tracing.activate(operation._span)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            tracing = self._operation._telemetry.tracing  # type: ignore[union-attr]
            assert tracing is not None
            tracing.deactivate(self._token)


class Asking:
    """The ``with`` block of :meth:`Operation.asking`: a CLIENT span per question, ended with
    its outcome (see :data:`zemcp.observe.instruments.OUTCOMES`)."""

    __slots__ = ("_methods", "_operation", "_outcomes", "_spans")

    def __init__(self, operation: Operation, methods: list[str]):
        self._operation = operation
        self._methods = methods
        self._spans: list[Any] = []
        self._outcomes: list[str] | None = None

    def __enter__(self) -> Asking:
        operation = self._operation
        telemetry = operation._telemetry
        if telemetry is not None and telemetry.tracing is not None and operation._span is not None:
            self._spans = [
                telemetry.tracing.client_span(method, operation._span, {"mcp.method.name": method})
                for method in self._methods
            ]
        return self

    def answered(self, answers: list[Any]) -> None:
        """Record the client's answers (:class:`zemcp.protocol.jsonrpc.Response`, in question order).

        An answer without an id is one a 2026-07-28 round replays from its ``requestState``:
        its outcome was counted in the round it arrived in.
        """
        outcomes = []
        for answer in answers:
            result = answer.result
            if answer.id is None:
                outcomes.append("")
            elif not isinstance(result, dict):
                outcomes.append("error")
            elif result.get("action") in ("accept", "decline", "cancel"):
                outcomes.append(result["action"])
            else:
                outcomes.append("result")
        self._outcomes = outcomes
        telemetry = self._operation._telemetry
        if telemetry is not None and telemetry.capture:
            for span, answer in zip(self._spans, answers):
                if isinstance(answer.result, dict) and "content" in answer.result:
                    span.set_attribute("zemcp.elicitation.content", json.dumps(answer.result["content"], default=str))

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        telemetry = self._operation._telemetry
        if telemetry is None:
            return
        if kind is not None:
            names = [base.__name__ for base in kind.__mro__]
            outcome = next((_ASK_OUTCOMES[n] for n in names if n in _ASK_OUTCOMES), "error")
            outcomes = [outcome] * len(self._methods)
        else:
            outcomes = self._outcomes or ["result"] * len(self._methods)
        failed = {"error", "timeout", "refused", "disconnect", "cancelled", "ended", "withdrawn"}
        for index, (method, outcome) in enumerate(zip(self._methods, outcomes)):
            if index < len(self._spans):
                span = self._spans[index]
                span.set_attribute("zemcp.outcome", outcome or "replayed")
                assert telemetry.tracing is not None
                telemetry.tracing.end(span, outcome if outcome in failed else None, None, {})
            if outcome and method in ASKED_METHODS:
                telemetry._outcome(method, outcome)


#: The operation of a server that records nothing: every method does nothing.
NULL_OPERATION = Operation(None, "", None, "", None, True, True, None, None, None)
