"""The elicitation API without a server: the per-call timeout of ctx.elicit, the primitive
values of accepted content, and a session's wait for notifications/initialized."""

import logging
import math
import threading
import time

import pytest

import zemcp
from zemcp.core.context import Context
from zemcp.eras.handshake import call as call_module
from zemcp.eras.handshake.call import Call
from zemcp.observe.telemetry import NULL_OPERATION
from zemcp.protocol import jsonrpc
from zemcp.protocol.elicitation import ElicitMalformed, ElicitTimeout, interpret_answer
from zemcp.replies.sinks import ReplySink
from zemcp.state.correlation import CorrelationTable
from zemcp.state.session import Session

ASK = {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array"}}, "required": ["name"]}
FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def accepted(content):
    return interpret_answer(jsonrpc.Response("x", {"action": "accept", "content": content}, None), ASK)


@pytest.mark.parametrize(
    "content, where",
    [
        ({"name": {"first": "Ada"}}, "content['name'] is an object"),
        ({"name": "Ada", "extra": {"nested": 1}}, "content['extra'] is an object"),
        ({"name": "Ada", "extra": [1, 2]}, "content['extra'] is an array with a value that is not a string"),
        ({"name": "Ada", "tags": ["a", None]}, "content['tags'] is an array with a value that is not a string"),
        ({"name": None}, "content['name'] is null"),
    ],
    ids=["nested-declared", "nested-undeclared", "numbers-array-undeclared", "null-in-array", "null-required"],
)
def test_content_values_must_be_primitives_under_every_key(content, where):
    """Objects, arrays of non-strings and null under a required key are malformed, declared or not."""
    with pytest.raises(
        ElicitMalformed,
        match=r"malformed elicitation answer: "
        + where.replace("[", r"\[").replace("]", r"\]")
        + "; an elicitation answer's values must be strings, numbers, booleans",
    ):
        accepted(content)


def test_primitive_content_passes_and_null_means_left_empty():
    """Strings, numbers, booleans and string arrays pass (also undeclared); null on an optional key is absence."""
    content = {"name": "Ada", "tags": ["x"], "extra": 1.5, "flag": True, "other": None}
    assert accepted(content) == {"name": "Ada", "tags": ["x"], "extra": 1.5, "flag": True}


class Recorder:
    """An exchange that records the timeout it is asked with and answers, or times out."""

    session = None
    can_wait = True
    progress_token = None
    request_id = 1
    operation = NULL_OPERATION
    site_request = None

    def __init__(self, timeout=600.0, outcome=None):
        self.client = Session("2025-06-18", {}, {"elicitation": {}})
        self.timeout = timeout
        self.outcome = outcome
        self.asked_with = []

    def ask(self, requests, timeout=None):
        self.asked_with.append(timeout)
        if self.outcome is not None:
            raise self.outcome
        return [jsonrpc.Response("x", {"action": "accept", "content": {"name": "Ada"}}, None) for _ in requests]

    def note_missing(self, required):
        pass


@pytest.mark.parametrize("given, used", [(None, 30.0), (5, 5.0), (0.25, 0.25), (30, 30.0), (3600, 30.0)])
def test_timeout_is_clipped_to_the_process_setting(given, used):
    """The wait is the smaller of timeout= and elicitation_timeout; None means the setting."""
    exchange = Recorder(timeout=30.0)
    assert Context(exchange).elicit("Name?", FORM, timeout=given) == {"name": "Ada"}
    assert exchange.asked_with == [used]


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, True, "5"])
def test_timeout_must_be_a_positive_number(bad):
    """A timeout that is not a positive finite number is a programming error, raised before anything is sent."""
    exchange = Recorder()
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        Context(exchange).elicit("Name?", FORM, timeout=bad)
    assert exchange.asked_with == []


def test_timeout_reports_the_seconds_waited():
    """ElicitTimeout names the per-call timeout, not the process setting."""
    exchange = Recorder(timeout=600.0, outcome=TimeoutError())
    with pytest.raises(ElicitTimeout, match=r"no answer to the elicitation within 2 s"):
        Context(exchange).elicit("Name?", FORM, timeout=2)


def test_call_waits_at_most_the_per_call_timeout():
    """In a session the wait ends after the per-call timeout with ElicitTimeout, and the slot is free again."""
    s = Session("2025-06-18", {}, {"elicitation": {}})
    s.mark_initialized()
    table = CorrelationTable(10, 10)
    call = Call(s, 1, ReplySink(), None, table, timeout=30.0)
    started = time.monotonic()
    with pytest.raises(zemcp.ElicitTimeout, match="within 0.3 s"):
        Context(call).elicit("Name?", FORM, timeout=0.3)
    assert 0.25 <= time.monotonic() - started < 2.0
    assert table.count() == 0


def test_wait_initialized_returns_at_once_after_the_notification():
    """A session whose client sent notifications/initialized does not wait."""
    s = Session("2025-06-18", {}, {})
    assert s.initialized is False
    s.mark_initialized()
    started = time.monotonic()
    assert s.wait_initialized(5.0) is True and s.initialized is True
    assert time.monotonic() - started < 0.1


def test_wait_initialized_wakes_when_the_notification_arrives():
    """A request held for the notification goes on as soon as it arrives."""
    s = Session("2025-06-18", {}, {})
    threading.Timer(0.1, s.mark_initialized).start()
    started = time.monotonic()
    assert s.wait_initialized(5.0) is True
    assert 0.05 <= time.monotonic() - started < 2.0


def test_wait_initialized_gives_up_once_and_warns(caplog):
    """Without the notification the grace runs out once, with a warning; later requests do not wait."""
    s = Session("2025-06-18", {}, {})
    with caplog.at_level(logging.WARNING, logger="zemcp.session"):
        started = time.monotonic()
        assert s.wait_initialized(0.2) is False
        assert 0.15 <= time.monotonic() - started < 2.0
        started = time.monotonic()
        assert s.wait_initialized(5.0) is False
        assert time.monotonic() - started < 0.1
    warnings = [r for r in caplog.records if "sent no notifications/initialized" in r.getMessage()]
    assert len(warnings) == 1, caplog.records


def test_call_holds_its_question_until_initialized(monkeypatch):
    """Call.ask sends nothing before notifications/initialized, and the grace counts in the timeout."""
    monkeypatch.setattr(call_module, "INITIALIZED_GRACE", 5.0)
    s = Session("2025-06-18", {}, {"elicitation": {}})
    sink = ReplySink()
    table = CorrelationTable(10, 10)
    call = Call(s, 1, sink, None, table, timeout=30.0)
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.setdefault("value", Context(call).elicit("Name?", FORM)))
    worker.start()
    time.sleep(0.2)
    assert table.count() == 0, "nothing may be registered or sent before notifications/initialized"
    s.mark_initialized()
    deadline = time.monotonic() + 5
    while table.count() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert table.count() == 1
    pending_id = next(iter(table._entries.values())).id
    assert table.resolve(s.id, jsonrpc.Response(pending_id, {"action": "accept", "content": {"name": "Ada"}}, None))
    worker.join(5)
    assert outcome["value"] == {"name": "Ada"}
