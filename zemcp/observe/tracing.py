"""OpenTelemetry spans of MCP messages, by the semantic conventions for MCP.

The conventions (OpenTelemetry semantic conventions for generative AI, ``docs/gen-ai/mcp.md``,
status development): a SERVER span per request or notification the client sends, named
``{mcp.method.name} {target}``; a CLIENT span per request the server sends (elicitation,
sampling, roots); the caller's trace context travels in ``params._meta`` (``traceparent``,
``tracestate``, ``baggage``) and is the server span's parent, while the transport's own
context (the HTTP request's) is linked. Imported only when ``opentelemetry-api`` is
installed (``zemcp[otel]``): :mod:`zemcp.observe.telemetry` decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context, propagate, trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from zemcp.version import __version__

#: The keys of ``params._meta`` that carry trace context (unprefixed, as SEP-414 says).
CONTEXT_KEYS = ("traceparent", "tracestate", "baggage")
#: [characters] the longest context value taken from a client; W3C bounds are far below.
MAX_CONTEXT_CHARS = 8192
_META_KEYS = {key: key for key in CONTEXT_KEYS}


def _carrier(source: Mapping[str, Any], keys: Mapping[str, str]) -> dict[str, str]:
    """The context values of ``source`` that are strings of a sane length (clients send anything)."""
    carrier = {}
    for key, source_key in keys.items():
        value = source.get(source_key)
        if isinstance(value, str) and len(value) <= MAX_CONTEXT_CHARS:
            carrier[key] = value
    return carrier


class Tracing:
    """Starts and ends the spans of one server, through the global tracer provider.

    Without an OpenTelemetry SDK configured the API's tracer records nothing and costs
    little; with one, the application (or ``opentelemetry-instrument``) chose the exporter.
    """

    def __init__(self) -> None:
        self.tracer = trace.get_tracer("zemcp", __version__)

    def server_span(
        self, name: str, attributes: dict[str, Any], meta: Any, transport: Mapping[str, str] | None = None
    ) -> Span:
        """Start the SERVER span of one client message.

        Args:
            name: ``{mcp.method.name} {target}``.
            attributes: the span's attributes at its start.
            meta: the message's ``params._meta`` (any JSON value; only string context keys count).
            transport: the trace context the transport carried (the HTTP request's
                ``traceparent``, ``tracestate`` and ``baggage`` headers), the transport's
                context when no HTTP instrumentation made a span; None without one.
        Returns:
            the started span (end it with :meth:`end`).
        """
        ambient = trace.get_current_span().get_span_context()
        transport_context = None
        if not ambient.is_valid and transport and "traceparent" in transport:
            transport_context = propagate.extract(_carrier(transport, _META_KEYS))
            ambient = trace.get_current_span(transport_context).get_span_context()
        carried = _carrier(meta, _META_KEYS) if isinstance(meta, dict) else {}
        if "traceparent" in carried:
            parent = propagate.extract(carried)
            links = [Link(ambient)] if ambient.is_valid else None
            return self.tracer.start_span(name, parent, SpanKind.SERVER, attributes, links)
        # No context in _meta: the transport's context is the nearest parent there is.
        return self.tracer.start_span(name, transport_context, SpanKind.SERVER, attributes)

    def client_span(self, name: str, parent: Span, attributes: dict[str, Any]) -> Span:
        """Start the CLIENT span of a request the server sends while serving ``parent``'s message."""
        return self.tracer.start_span(name, trace.set_span_in_context(parent), SpanKind.CLIENT, attributes)

    @staticmethod
    def activate(span: Span) -> object:
        """Make ``span`` current on this thread (a handler's own spans become its children).

        Returns:
            the token for :meth:`deactivate`.
        """
        return otel_context.attach(trace.set_span_in_context(span))

    @staticmethod
    def deactivate(token: object) -> None:
        """Undo :meth:`activate` with its token."""
        otel_context.detach(token)  # type: ignore[arg-type]

    @staticmethod
    def end(span: Span, error_type: str | None, description: str | None, attributes: dict[str, Any]) -> None:
        """End ``span``: ``error.type`` and status ERROR when it failed, plus ``attributes``."""
        if attributes:
            span.set_attributes(attributes)
        if error_type is not None:
            span.set_attribute("error.type", error_type)
            span.set_status(Status(StatusCode.ERROR, description))
        span.end()

    @staticmethod
    def ids(span: Span) -> tuple[str, str] | None:
        """``(trace id, span id)`` of a recording span in hex, or None."""
        context = span.get_span_context()
        # A span that is not recorded (no SDK, or sampled out) names a trace nobody keeps.
        if not span.is_recording() or not context.is_valid:
            return None
        return trace.format_trace_id(context.trace_id), trace.format_span_id(context.span_id)
