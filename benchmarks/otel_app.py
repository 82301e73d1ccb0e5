"""The reference server with an OpenTelemetry SDK whose exporters drop everything.

What benchmarks/telemetry.py measures: spans and metrics recorded in full (batch span
processor, periodic metric reader) and sent nowhere, so the figure is zemcp's and the
SDK's work, not a collector's. gunicorn loads it in each worker (no preload), after the
fork, which is where an SDK's threads must start.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class DropSpans(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class DropMetrics(MetricExporter):
    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs) -> MetricExportResult:
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        pass


provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(DropSpans()))
trace.set_tracer_provider(provider)
metrics.set_meter_provider(
    MeterProvider(metric_readers=[PeriodicExportingMetricReader(DropMetrics(), export_interval_millis=5_000)])
)

from wsgi import app  # noqa: E402  (the providers must exist before the server is made)

__all__ = ["app"]
