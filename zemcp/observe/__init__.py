"""What a server tells of its work: OpenTelemetry spans and metrics, Prometheus text.

:mod:`zemcp.observe.telemetry` is what the rest of the package uses; the exporters
(:mod:`~zemcp.observe.tracing`, :mod:`~zemcp.observe.otelmetrics`,
:mod:`~zemcp.observe.prometheus`) are imported only when their libraries are installed and
the settings turn them on. docs/observability.md describes what is recorded.
"""
