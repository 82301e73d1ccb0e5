"""Telemetry in-process: the spans, metrics and Prometheus text a server makes of its work.

The OpenTelemetry SDK's in-memory exporter and metric reader are this test process's global
providers (set once, before any server of this module is made); each test reads the spans
of its own trace or the difference of the figures it caused. The figures summed over
gunicorn's workers are in tests/integration/test_http_metrics.py.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import zemcp
from tests.support.clients import HandshakeClient, inprocess_modern, inprocess_session
from tests.support.wires import InProcessWire
from zemcp import Settings
from zemcp.cli.stdio import StdioTransport
from zemcp.http.transport import McpApp
from zemcp.logformat import JsonFormatter
from zemcp.state.session import fingerprint

SPANS = InMemorySpanExporter()
READER = InMemoryMetricReader()
if not isinstance(trace.get_tracer_provider(), TracerProvider):
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(SPANS))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


#: initialize as a stdio client sends it.
STDIO_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "loop", "version": "1"}},
}


def session(app) -> HandshakeClient:
    """A 2025-06-18 session of ``app``. notifications/initialized is left to the test: it would
    add a span, a count and a request of its own."""
    return inprocess_session(app, initialized=False)


def make_server(**settings) -> zemcp.Server:
    server = zemcp.Server("observed", "1", settings=Settings(keepalive_interval=0.05, threads=8, **settings))

    @server.tool
    def double(n: int) -> int:
        """Twice n."""
        return 2 * n

    @server.tool
    def fails() -> str:
        """Always fails."""
        raise RuntimeError("no luck")

    @server.tool
    def greet(ctx: zemcp.Context) -> str:
        """Ask for a name."""
        return "Hello, " + ctx.elicit("Name?", NAME, key="user_name")["name"]

    @server.tool
    def two_steps(ctx: zemcp.Context) -> str:
        """Two questions in two rounds."""
        first = ctx.elicit("First?", NAME, key="first")["name"]
        return first + " " + ctx.elicit("Second?", NAME, key="second")["name"]

    return server


def spans_named(name: str) -> list:
    return [s for s in SPANS.get_finished_spans() if s.name == name]


def last_span(name: str):
    found = spans_named(name)
    assert found, [s.name for s in SPANS.get_finished_spans()]
    return found[-1]


def children_of(span) -> list:
    return [s for s in SPANS.get_finished_spans() if s.parent is not None and s.parent.span_id == span.context.span_id]


def histogram_count(name: str, **attributes) -> int:
    """The count of histogram ``name``'s points whose attributes include ``attributes`` (cumulative)."""
    data = READER.get_metrics_data()
    total = 0
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    if all(point.attributes.get(k) == v for k, v in attributes.items()):
                        total += getattr(point, "count", None) or int(getattr(point, "value", 0))
    return total


def test_a_plain_call_is_a_server_span_named_and_attributed_by_the_conventions():
    SPANS.clear()
    peer = session(McpApp(make_server()))
    peer.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    rid, response = peer.call_tool("double", {"n": 21})
    assert response.get_json()["result"]["content"][0]["text"] == "42"
    span = last_span("tools/call double")
    assert span.kind == SpanKind.SERVER
    attributes = dict(span.attributes)
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "double"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["jsonrpc.request.id"] == str(rid)
    assert attributes["mcp.protocol.version"] == "2025-06-18"
    assert attributes["network.transport"] == "tcp"
    # The session is named by its fingerprint: its id grants the use of the session.
    assert attributes["mcp.session.id"] == fingerprint(peer.session_id) != peer.session_id
    assert "error.type" not in attributes and span.status.status_code == StatusCode.UNSET
    # Nothing of the arguments or the result unless the settings opt in.
    assert "gen_ai.tool.call.arguments" not in attributes and "gen_ai.tool.call.result" not in attributes
    assert last_span("initialize").attributes["mcp.method.name"] == "initialize"
    assert last_span("notifications/initialized").kind == SpanKind.SERVER


def test_the_context_in_meta_is_the_parent_and_the_http_context_a_link():
    SPANS.clear()
    peer = session(McpApp(make_server()))
    http_trace = "0af7651916cd43dd8448eb211c80319c"
    message = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {
            "name": "double",
            "arguments": {"n": 1},
            "_meta": {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "rojo=00f067aa0ba902b7"},
        },
    }
    http = {"traceparent": f"00-{http_trace}-b7ad6b7169203331-01"}
    peer.post(message, headers=http)
    span = last_span("tools/call double")
    assert trace.format_trace_id(span.context.trace_id) == TRACE_ID
    assert trace.format_span_id(span.parent.span_id) == PARENT_ID and span.parent.is_remote
    assert [trace.format_trace_id(link.context.trace_id) for link in span.links] == [http_trace]
    # Without context in _meta the HTTP request's context is the parent, and nothing is linked.
    plain = {**message, "id": 6, "params": {"name": "double", "arguments": {"n": 1}}}
    peer.post(plain, headers=http)
    span = last_span("tools/call double")
    assert trace.format_trace_id(span.context.trace_id) == http_trace and not span.links


def test_a_failing_tool_is_a_tool_error_and_a_bad_request_its_json_rpc_code():
    SPANS.clear()
    peer = session(McpApp(make_server()))
    peer.call_tool("fails", {})
    span = last_span("tools/call fails")
    assert span.attributes["error.type"] == "tool_error" and span.status.status_code == StatusCode.ERROR
    unknown = {"error.type": "-32602", "mcp.method.name": "tools/call"}
    before = histogram_count("mcp.server.operation.duration", **unknown)
    peer.call_tool("no_such_tool", {})
    span = last_span("tools/call")  # an unknown name is no target: the span is named by the method
    assert span.attributes["error.type"] == "-32602" and "Unknown tool" in span.status.description
    # The metric counts it, but never under a name the client made up.
    assert histogram_count("mcp.server.operation.duration", **unknown) == before + 1
    assert histogram_count("mcp.server.operation.duration", **{"gen_ai.tool.name": "no_such_tool"}) == 0
    other = histogram_count("mcp.server.operation.duration", **{"mcp.method.name": "_OTHER"})
    peer.post({"jsonrpc": "2.0", "id": 99, "method": "made/up", "params": {}})
    span = last_span("_OTHER")  # a made-up method names no span
    assert span.attributes["mcp.method.name"] == "made/up" and span.attributes["error.type"] == "-32601"
    assert histogram_count("mcp.server.operation.duration", **{"mcp.method.name": "_OTHER"}) == other + 1


def test_an_elicitation_is_a_client_span_with_its_outcome_in_the_handshake_era():
    SPANS.clear()
    before = histogram_count("zemcp.client_requests", **{"zemcp.outcome": "accept"})
    peer = session(McpApp(make_server()))
    rid, response, stream = peer.open_call("greet", {})
    ask = stream.next_message()
    assert peer.answer(ask["id"], {"action": "accept", "content": {"name": "Ada"}}).status_code == 202
    final = stream.rest()
    assert final[0]["result"]["content"][0]["text"] == "Hello, Ada"
    call = last_span("tools/call greet")
    (asked,) = children_of(call)
    assert asked.name == "elicitation/create" and asked.kind == SpanKind.CLIENT
    assert asked.attributes["zemcp.outcome"] == "accept"
    assert "zemcp.elicitation.content" not in asked.attributes
    assert histogram_count("zemcp.client_requests", **{"zemcp.outcome": "accept"}) == before + 1


def test_the_rounds_of_a_2026_call_are_marked_input_required_and_share_a_call_id():
    SPANS.clear()
    modern = inprocess_modern(McpApp(make_server()))
    first = modern.result(modern.call_tool("two_steps")[1])
    assert first["resultType"] == "input_required"
    second = modern.result(
        modern.call_tool(
            "two_steps",
            input_responses={"first": {"action": "accept", "content": {"name": "Ada"}}},
            request_state=first["requestState"],
        )[1]
    )
    third = modern.result(
        modern.call_tool(
            "two_steps",
            input_responses={"second": {"action": "accept", "content": {"name": "Lovelace"}}},
            request_state=second["requestState"],
        )[1]
    )
    assert third["content"][0]["text"] == "Ada Lovelace"
    rounds = spans_named("tools/call two_steps")[-3:]
    assert [s.attributes.get("zemcp.result_type") for s in rounds] == ["input_required", "input_required", None]
    assert [s.attributes["zemcp.mrtr.round"] for s in rounds] == [1, 2, 3]
    assert len({s.attributes["zemcp.mrtr.call"] for s in rounds}) == 1
    assert all(
        s.attributes["mcp.protocol.version"] == "2026-07-28" and "mcp.session.id" not in s.attributes for s in rounds
    )
    outcomes = [[c.attributes["zemcp.outcome"] for c in children_of(s)] for s in rounds]
    # A replayed answer is not an outcome again: its round counted it.
    assert outcomes == [["input_required"], ["accept", "input_required"], ["replayed", "accept"]]


def test_a_stdio_call_is_a_span_over_a_pipe():
    SPANS.clear()
    lines = [
        STDIO_INIT,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "double", "arguments": {"n": 4}}},
    ]
    out = io.BytesIO()
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    StdioTransport(make_server(), io.BufferedReader(io.BytesIO(data)), out).serve()
    assert json.loads(out.getvalue().splitlines()[-1])["result"]["content"][0]["text"] == "8"
    span = last_span("tools/call double")
    assert span.attributes["network.transport"] == "pipe"
    assert last_span("initialize").attributes["network.transport"] == "pipe"


def test_content_is_recorded_only_when_the_settings_opt_in():
    SPANS.clear()
    peer = session(McpApp(make_server(otel_capture_content=True)))
    peer.call_tool("double", {"n": 3})
    attributes = last_span("tools/call double").attributes
    assert json.loads(attributes["gen_ai.tool.call.arguments"]) == {"n": 3}
    assert json.loads(attributes["gen_ai.tool.call.result"])["content"][0]["text"] == "6"


def test_prometheus_text_is_served_to_allowed_addresses_only():
    app = McpApp(make_server(metrics_path="/metrics"))
    peer = session(app)
    for n in range(3):
        peer.call_tool("double", {"n": n})
    scrape = InProcessWire(app).raw("GET", "/metrics", environ_overrides={"REMOTE_ADDR": "127.0.0.1"})
    assert scrape.status_code == 200 and scrape.mimetype == "text/plain"
    text = scrape.get_data(as_text=True)
    line = next(
        row
        for row in text.splitlines()
        if row.startswith("mcp_server_operation_duration_seconds_count")
        and 'mcp_method_name="tools/call"' in row
        and 'gen_ai_tool_name="double"' in row
    )
    assert float(line.rsplit(" ", 1)[1]) >= 3
    assert "zemcp_calls_budget" in text and 'zemcp_streams_open{zemcp_stream_kind="listen"}' in text
    refused = InProcessWire(app).raw("GET", "/metrics", environ_overrides={"REMOTE_ADDR": "10.1.2.3"})
    assert refused.status_code == 403 and "ZEMCP_METRICS_ALLOW" in refused.get_data(as_text=True)


def test_without_opentelemetry_nothing_is_recorded_and_nothing_imported():
    script = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import zemcp\n"
        "from zemcp.observe.telemetry import NULL_OPERATION\n"
        "server = zemcp.Server('x')\n"
        "print(server.telemetry.active, server.telemetry.begin('ping', 1, {}) is NULL_OPERATION)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.', 'prometheus_client'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split("\n")[:2] == ["False True", "[]"], done.stderr


@pytest.mark.parametrize("value", ["sometimes", ""])
def test_bad_telemetry_settings_say_what_is_expected(value):
    if value:
        with pytest.raises(ValueError, match="otel .ZEMCP_OTEL. must be auto or off"):
            Settings(otel=value)
    with pytest.raises(ValueError, match="metrics_path .ZEMCP_METRICS_PATH. must be a URL path"):
        Settings(metrics_path="/mcp")
    with pytest.raises(ValueError, match="ZEMCP_METRICS_ALLOW"):
        Settings(metrics_allow=("not-a-network",))


def test_an_ended_session_records_its_duration():
    peer = session(McpApp(make_server()))
    before = histogram_count("mcp.server.session.duration", **{"network.transport": "tcp"})
    ended = peer.delete()
    assert ended.status_code == 204
    assert histogram_count("mcp.server.session.duration", **{"network.transport": "tcp"}) == before + 1


def refusals(reason: str) -> int:
    return histogram_count("zemcp.refusals", **{"zemcp.refusal.reason": reason})


def test_refusals_are_counted_by_reason():
    app = McpApp(make_server(max_sessions=1))
    peer = session(app)
    protocol, sessions = refusals("protocol"), refusals("sessions")
    unknown = peer.post(
        {"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Mcp-Session-Id": peer.session_id + "x"}
    )
    assert unknown.status_code == 404
    assert refusals("protocol") == protocol + 1
    with pytest.raises(AssertionError):
        session(app)  # the one session allowed is taken: initialize gets 429
    assert refusals("sessions") == sessions + 1
    limited = McpApp(make_server(rate_limit="2/hour"))
    rate = refusals("rate")
    session(limited).call_tool("double", {"n": 1})  # initialize and the call take the two tokens
    with pytest.raises(AssertionError):
        session(limited)
    assert refusals("rate") == rate + 1


def test_a_request_record_is_logged_when_the_settings_ask(caplog):
    caplog.set_level("INFO", logger="zemcp.request")
    peer = session(McpApp(make_server(log_requests=True)))
    peer.call_tool("fails", {})
    found = [r for r in caplog.records if r.name == "zemcp.request" and getattr(r, "method", "") == "tools/call"]
    assert len(found) == 1, [(r.name, r.getMessage()) for r in caplog.records]
    (record,) = found
    assert record.event == "request" and record.tool == "fails" and record.outcome == "tool_error"
    assert record.session == fingerprint(peer.session_id) and isinstance(record.duration, float)
    assert len(record.trace_id) == 32 and len(record.span_id) == 16
    # In the JSON format the record is one line with the fields the format names.
    line = json.loads(JsonFormatter().format(record))
    assert {k: line[k] for k in ("event", "method", "tool", "outcome", "session", "trace_id")} == {
        "event": "request",
        "method": "tools/call",
        "tool": "fails",
        "outcome": "tool_error",
        "session": fingerprint(peer.session_id),
        "trace_id": record.trace_id,
    }
    caplog.clear()
    session(McpApp(make_server())).call_tool("fails", {})
    assert not [r for r in caplog.records if r.name == "zemcp.request"]


class Tokens:
    """A verifier that knows one token."""

    def verify(self, token):
        if token != "good":
            raise zemcp.auth.InvalidToken("unknown token")
        return zemcp.auth.Principal("ops")


def test_metrics_are_served_to_a_valid_token_from_anywhere_when_authorization_is_on():
    auth = zemcp.auth.Authorization(
        Tokens(), resource="https://mcp.example.com/mcp", authorization_servers=["https://as.example.com"]
    )
    server = zemcp.Server("observed", "1", settings=Settings(metrics_path="/metrics"), auth=auth)
    app = McpApp(server)
    far = {"REMOTE_ADDR": "10.1.2.3"}
    assert InProcessWire(app).raw("GET", "/metrics", environ_overrides=far).status_code == 401
    assert (
        InProcessWire(app)
        .raw("GET", "/metrics", environ_overrides=far, headers={"Authorization": "Bearer bad"})
        .status_code
        == 401
    )
    good = InProcessWire(app).raw("GET", "/metrics", environ_overrides=far, headers={"Authorization": "Bearer good"})
    assert good.status_code == 200 and "mcp_server_operation_duration_seconds" in good.get_data(as_text=True)


def test_initialize_is_counted_under_the_version_it_settled():
    labels = {"mcp.method.name": "initialize", "mcp.protocol.version": "2025-06-18"}
    before = histogram_count("mcp.server.operation.duration", **labels)
    peer = session(McpApp(make_server()))
    assert histogram_count("mcp.server.operation.duration", **labels) == before + 1
    assert last_span("initialize").attributes["mcp.session.id"] == fingerprint(peer.session_id)


def test_a_2026_error_answered_with_an_http_error_is_an_operation_not_a_refusal():
    modern = inprocess_modern(McpApp(make_server()))
    protocol = refusals("protocol")
    unknown = {"error.type": "-32602", "mcp.protocol.version": "2026-07-28"}
    before = histogram_count("mcp.server.operation.duration", **unknown)
    response = modern.call_tool("no_such_tool")[1]
    assert response.status_code >= 400
    assert histogram_count("mcp.server.operation.duration", **unknown) == before + 1
    assert refusals("protocol") == protocol


def test_a_sampled_out_call_logs_no_trace_id(caplog):
    caplog.set_level("INFO", logger="zemcp.request")
    peer = session(McpApp(make_server(log_requests=True)))
    # The caller's context says "not sampled": the SDK's default sampler follows it.
    meta = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-00"}
    peer.post(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "double", "arguments": {"n": 2}, "_meta": meta},
        }
    )
    (record,) = [r for r in caplog.records if getattr(r, "method", "") == "tools/call"]
    assert not hasattr(record, "trace_id") and not hasattr(record, "span_id")


def test_a_captured_result_leaves_out_the_request_state():
    SPANS.clear()
    modern = inprocess_modern(McpApp(make_server(otel_capture_content=True)))
    first = modern.result(modern.call_tool("two_steps")[1])
    assert "requestState" in first
    captured = json.loads(last_span("tools/call two_steps").attributes["gen_ai.tool.call.result"])
    assert captured["resultType"] == "input_required" and "requestState" not in captured


def test_telemetry_modes_are_read_in_any_case_and_metrics_paths_must_be_plain():
    assert Settings(otel="OFF").otel == "off" and Settings(log_format="JSON").log_format == "json"
    for path in ("/metrics?x", "/a b", "/m%20"):
        with pytest.raises(ValueError, match="ZEMCP_METRICS_PATH"):
            Settings(metrics_path=path)


def test_a_failing_exporter_never_costs_the_client_its_answer(caplog, monkeypatch):
    server = make_server()
    sink = server.telemetry._sinks[0]

    def broken(*args):
        raise RuntimeError("exporter down")

    monkeypatch.setattr(sink, "operation", broken)
    rid, response = session(McpApp(server)).call_tool("double", {"n": 5})
    assert response.get_json()["result"]["content"][0]["text"] == "10"
    assert any("telemetry of 'tools/call' failed" in r.getMessage() for r in caplog.records)
