"""zemcp's metrics through the OpenTelemetry metrics API (``zemcp[otel]``).

Recorded on the global meter provider: with an SDK configured (a ``MeterProvider`` with a
reader and exporter), they leave with the application's other metrics; without one the
API drops them for next to nothing. Imported only when ``opentelemetry-api`` is installed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from zemcp.observe import figures, instruments
from zemcp.version import __version__


def _attributes(keys: tuple[str, ...], values: tuple[str, ...]) -> dict[str, str]:
    # An attribute without a value is left out, as the conventions want.
    return {key: value for key, value in zip(keys, values) if value}


class OtelMetrics:
    """The instruments of :mod:`zemcp.observe.instruments` on the global meter; one per
    process (:func:`process_metrics`), fed by every server in it."""

    def __init__(self) -> None:
        meter = metrics.get_meter("zemcp", __version__)
        self._operations = meter.create_histogram(
            instruments.OPERATION_DURATION,
            unit="s",
            description="MCP request or notification duration as observed on the receiver",
            explicit_bucket_boundaries_advisory=list(instruments.BUCKETS),
        )
        self._sessions = meter.create_histogram(
            instruments.SESSION_DURATION,
            unit="s",
            description="The duration of the MCP session as observed on the MCP server",
            explicit_bucket_boundaries_advisory=list(instruments.BUCKETS),
        )
        self._refusals = meter.create_counter(
            instruments.REFUSALS, unit="{request}", description="Requests refused before a handler ran"
        )
        self._outcomes = meter.create_counter(
            instruments.OUTCOMES, unit="{request}", description="Outcomes of the requests handlers sent the client"
        )
        self._attribute_sets: dict[tuple[str, ...], dict[str, str]] = {}
        for name, (description, unit) in instruments.GAUGES.items():
            meter.create_observable_gauge(name, [self._observer(name)], unit=unit, description=description)

    def _observer(self, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            value = figures.PROCESS.read()[name]
            if isinstance(value, dict):
                return [Observation(n, {"zemcp.stream.kind": kind}) for kind, n in value.items()]
            return [Observation(value)]

        return observe

    def operation(self, seconds: float, labels: tuple[str, ...]) -> None:
        """Record one served request or notification ([seconds]; labels in ``OPERATION_KEYS`` order)."""
        attributes = self._attribute_sets.get(labels)
        if attributes is None:
            # Few distinct label sets (client-chosen names never become labels): build each once.
            attributes = self._attribute_sets[labels] = _attributes(instruments.OPERATION_KEYS, labels)
        self._operations.record(seconds, attributes)

    def session(self, seconds: float, labels: tuple[str, ...]) -> None:
        """Record one ended session ([seconds]; labels in ``SESSION_KEYS`` order)."""
        self._sessions.record(seconds, _attributes(instruments.SESSION_KEYS, labels))

    def refusal(self, reason: str, status: int) -> None:
        """Count one refused request (``reason`` of :data:`instruments.REFUSALS`, HTTP ``status``)."""
        self._refusals.add(1, {"zemcp.refusal.reason": reason, "http.response.status_code": status})

    def outcome(self, method: str, outcome: str) -> None:
        """Count one outcome of a request a handler sent the client."""
        self._outcomes.add(1, {"mcp.method.name": method, "zemcp.outcome": outcome})


_process_metrics: OtelMetrics | None = None
_process_lock = threading.Lock()


def process_metrics() -> OtelMetrics:
    """This process's :class:`OtelMetrics` (made at the first call: an instrument is made once)."""
    global _process_metrics
    with _process_lock:
        if _process_metrics is None:
            _process_metrics = OtelMetrics()
        return _process_metrics
