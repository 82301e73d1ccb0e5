"""JSON log lines (zemcp.logformat): the fields, their names and forms, what is left out,
the escaping of crafted strings, exceptions, the event names, the trace of the current span."""

import io
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from zemcp import logformat, logsafe
from zemcp.logformat import JsonFormatter
from zemcp.state.session import fingerprint, new_session_id

TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def record(msg="hello %s", args=("world",), name="zemcp.handshake", level=logging.INFO, exc_info=None, **extra):
    """A record as ``logging.getLogger(name).info(msg, *args, extra=extra)`` makes it."""
    return logging.getLogger(name).makeRecord(name, level, __file__, 1, msg, args, exc_info, extra=extra)


def line(rec) -> dict:
    text = JsonFormatter().format(rec)
    assert "\n" not in text and "\r" not in text
    return json.loads(text)


def test_a_record_becomes_one_object_with_the_fixed_fields():
    rec = record(level=logging.WARNING)
    data = line(rec)
    assert list(data) == ["time", "level", "logger", "event", "message", "pid"]
    assert TIME.fullmatch(data["time"]), data["time"]
    assert (data["level"], data["logger"], data["event"], data["message"]) == (
        "warning",
        "zemcp.handshake",
        "handshake",
        "hello world",
    )
    assert data["pid"] == os.getpid()


def test_the_time_is_utc_with_milliseconds():
    rec = record()
    rec.created, rec.msecs = 1796299200.123456, 123.456  # 2026-12-03 12:00:00.123 UTC
    assert line(rec)["time"] == "2026-12-03T12:00:00.123Z"


def test_the_named_extras_are_carried_with_their_names_and_types():
    session_id = new_session_id("node")
    data = line(
        record(
            name="zemcp.audit",
            event="audit",
            method="tools/call",
            tool="ze_execute",
            arguments=["command", "x" * 100],
            values='{"command": "ls"}',
            duration=2,
            outcome="declined",
            reason="ElicitDeclined",
            session=fingerprint(session_id),
            user="ada",
            subject="alice",
            client="address 127.0.0.1",
            protocol_version="2025-11-25",
            task_id="abcdefgh",
            trace_id="0AF7651916CD43DD8448EB211C80319C",
            span_id=0xB7AD6B7169203331,
        )
    )
    assert data["event"] == "audit"
    assert {name: data[name] for name in logformat.FIELDS} == {
        "method": "tools/call",
        "tool": "ze_execute",
        "arguments": ["command", logsafe.shorten("x" * 100)],
        "values": '{"command": "ls"}',
        "duration": 2.0,
        "outcome": "declined",
        "reason": "ElicitDeclined",
        "session": fingerprint(session_id),
        "user": "ada",
        "subject": "alice",
        "client": "address 127.0.0.1",
        "protocol_version": "2025-11-25",
        "task_id": "abcdefgh",
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "span_id": "b7ad6b7169203331",
    }
    assert isinstance(data["duration"], float)
    assert list(data)[6:] == list(logformat.FIELDS), "the fields follow the fixed ones, in a stable order"


def test_other_extras_are_never_written():
    data = line(record(password="hunter2", authorization="Bearer abc.def", answers={"pin": "1234"}, tool="t"))
    text = json.dumps(data)
    assert "hunter2" not in text and "abc.def" not in text and "1234" not in text
    assert data["tool"] == "t"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("session", "not a fingerprint"),
        ("duration", float("nan")),
        ("duration", float("inf")),
        ("duration", True),
        ("duration", "1.5"),
        ("trace_id", "xyz"),
        ("trace_id", "0af7651916cd43dd"),
        ("trace_id", 0),
        ("span_id", "0af7651916cd43dd8448eb211c80319c"),
        ("span_id", 2**64),
        ("arguments", "command"),
        ("values", {"command": "ls"}),
    ],
)
def test_a_field_of_the_wrong_form_is_left_out(name, value):
    assert name not in line(record(**{name: value}))


def test_a_session_id_given_for_the_fingerprint_is_left_out():
    session_id = new_session_id("node")
    text = JsonFormatter().format(record(session=session_id))
    assert session_id not in text and "session" not in json.loads(text)


def test_long_strings_are_shortened_and_other_values_clipped():
    data = line(record(tool="t" * 1000, method={"nested": ["x"] * 500}, outcome=7))
    assert data["tool"] == logsafe.shorten("t" * 1000) and len(data["tool"]) < 120
    assert data["method"] == logsafe.clip({"nested": ["x"] * 500})
    assert data["outcome"] == "7"


def test_a_crafted_client_string_cannot_forge_a_line_or_a_field():
    """A client name made to close the object and open another (or a second line) stays
    inside the string of its field, in the message as in a field of its own."""
    crafted = 'evil\n{"level": "critical", "event": "forged"}"}, "session": "0123456789ab'
    rec = record("client %s", (logsafe.clip(crafted),), tool=crafted, outcome="x\r\n\u2028\x00")
    text = JsonFormatter().format(rec)
    assert text.count("\n") == 0 and len(text.splitlines()) == 1
    data = json.loads(text)
    assert data["event"] == "handshake" and data["level"] == "info" and "session" not in data
    assert data["message"] == f"client {logsafe.clip(crafted)}"
    assert data["tool"] == logsafe.shorten(crafted)
    assert data["outcome"] == "x\r\n\u2028\x00"


def test_an_exception_gives_its_type_and_traceback_as_one_string():
    try:
        raise KeyError("missing")
    except KeyError:
        rec = record("handling %s failed", ("'tools/call'",), level=logging.ERROR, exc_info=sys.exc_info())
    data = line(rec)
    assert data["exc_type"] == "KeyError"
    assert data["exc_text"].startswith("Traceback (most recent call last):")
    assert "KeyError: 'missing'" in data["exc_text"] and "\n" in data["exc_text"]
    assert data["message"] == "handling 'tools/call' failed"


def test_a_record_without_an_exception_has_no_exception_fields():
    data = line(record(exc_info=(None, None, None)))
    assert "exc_type" not in data and "exc_text" not in data


@pytest.mark.parametrize(
    ("logger", "event"),
    [
        ("zemcp.handshake", "handshake"),
        ("zemcp.session", "session"),
        ("zemcp", "zemcp"),
        ("gunicorn.error", "gunicorn"),
        ("gunicorn.access", "access"),
        ("myapp.DB-pool", "myapp_db_pool"),
        ("root", "root"),
    ],
)
def test_the_event_comes_from_the_logger_name(logger, event):
    assert logformat.logger_event(logger) == event
    assert line(record(name=logger))["event"] == event


@pytest.mark.parametrize("given", ["Request", "two words", "", "x" * 65, "forged\n", 3])
def test_an_event_that_is_no_snake_case_name_gives_way_to_the_logger_name(given):
    assert line(record(event=given))["event"] == "handshake"


def test_install_puts_json_on_a_handler_and_leaves_text_as_it_was():
    handler = logging.StreamHandler(io.StringIO())
    text = logging.Formatter("%(levelname)s %(message)s")
    handler.setFormatter(text)
    logformat.install(handler, "text")
    assert handler.formatter is text
    logformat.install(handler, "json")
    assert isinstance(handler.formatter, JsonFormatter)
    with pytest.raises(ValueError, match="must be text or json, got 'xml'"):
        logformat.install(handler, "xml")


def test_a_logger_writes_one_json_line_a_record():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logformat.install(handler, "json")
    log = logging.getLogger("zemcp.tests.logformat")
    log.addHandler(handler)
    log.propagate = False
    log.setLevel(logging.INFO)
    try:
        log.warning("first")
        log.info("second", extra={"event": "second_one", "tool": "a\nb"})
    finally:
        log.removeHandler(handler)
        log.setLevel(logging.NOTSET)
    lines = stream.getvalue().splitlines()
    assert [json.loads(text)["event"] for text in lines] == ["tests_logformat", "second_one"]


def test_without_opentelemetry_a_record_has_no_trace(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)  # import fails: not installed
    data = line(record())
    assert "trace_id" not in data and "span_id" not in data


def test_opentelemetry_is_imported_only_when_a_json_line_needs_it():
    code = """
import io, logging, sys
from zemcp import logformat
handler = logging.StreamHandler(io.StringIO())
logformat.install(handler, "text")
handler.emit(logging.makeLogRecord({"msg": "text"}))
before = "opentelemetry" in sys.modules
logformat.install(handler, "json")
handler.emit(logging.makeLogRecord({"msg": "json", "trace_id": "0af7651916cd43dd8448eb211c80319c"}))
print(before, "opentelemetry" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_a_record_in_a_recording_span_carries_its_trace():
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace", reason="the opentelemetry SDK is not installed")
    from opentelemetry import trace

    tracer = sdk_trace.TracerProvider().get_tracer("zemcp-tests")
    formatter = JsonFormatter()
    with tracer.start_as_current_span("tools/call ze_execute") as span:
        context = span.get_span_context()
        inside = json.loads(formatter.format(record()))
        given = json.loads(formatter.format(record(trace_id="0af7651916cd43dd8448eb211c80319c")))
    outside = json.loads(formatter.format(record()))
    assert (inside["trace_id"], inside["span_id"]) == (f"{context.trace_id:032x}", f"{context.span_id:016x}")
    assert given["trace_id"] == "0af7651916cd43dd8448eb211c80319c" and "span_id" not in given
    assert "trace_id" not in outside

    # A span that is not recording (sampled out, or only propagated) gives no trace.
    quiet = trace.NonRecordingSpan(context)
    with trace.use_span(quiet):
        assert "trace_id" not in json.loads(formatter.format(record()))


def test_the_documented_lines_have_the_formatters_shape():
    """docs/observability.md's example lines: the fixed fields first, in order, then only the
    named ones, in order, as JsonFormatter writes them."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text()
    examples = [json.loads(block) for block in re.findall(r"```json\n(.*?)\n```", page, flags=re.S)]
    assert len(examples) >= 4
    order = ["time", "level", "logger", "event", "message", "pid", *logformat.FIELDS, "exc_type", "exc_text"]
    for example in examples:
        assert list(example)[:6] == order[:6], example
        assert list(example) == [name for name in order if name in example], example
        assert TIME.fullmatch(example["time"]) and re.fullmatch(r"[a-z][a-z0-9_]*", example["event"]), example
