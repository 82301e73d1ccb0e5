"""The canned-JSON app with one OpenTelemetry SDK span per request: the floor of tracing's cost.

What benchmarks/telemetry.py sets beside the canned-JSON app (``benchmarks.calls:canned_app``)
to tell the SDK's own cost of one span from zemcp's: the same SDK as benchmarks/otel_app.py
(batch span processor, exporters that drop everything), one SERVER span with one attribute
around each request, nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry import trace

import benchmarks.otel_app  # noqa: F401  (configures the SDK before the tracer is used)
from benchmarks.calls import canned_app

tracer = trace.get_tracer("zemcp-benchmark-floor")


def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    """``canned_app`` inside one span."""
    span = tracer.start_span("tools/call", kind=trace.SpanKind.SERVER, attributes={"mcp.method.name": "tools/call"})
    try:
        return canned_app(environ, start_response)
    finally:
        span.end()
