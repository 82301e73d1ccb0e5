"""Unit tests of zemcp.state.eventlogs: event ids, the replay buffer, connections taking over, windows."""

import threading
import time

import pytest

from zemcp.config import StreamLimits
from zemcp.state.eventlogs import EventLog, ReplayBudget, SessionStreams, parse_event_id
from zemcp.state.streamlogs import KEEPALIVE, REQUEST, STANDALONE, BadEventId, StreamGone, StreamNotFound


def payloads(items):
    return [item for item in items if item is not KEEPALIVE]


def test_event_ids_name_the_stream_and_count_up():
    log = EventLog(REQUEST, StreamLimits(retry=0.5))
    priming = log.prime()
    assert priming == f"id: {log.id}-1\nretry: 500\ndata:\n\n".encode()
    first = log.append(b'{"a":1}')
    assert first == f"id: {log.id}-2\nevent: message\n".encode() + b'data: {"a":1}\n\n'
    assert parse_event_id(f"{log.id}-2") == (log.id, 2)
    assert log.position == 2


@pytest.mark.parametrize(
    "value",
    [
        "",
        "abc",
        "abc-",
        "-3",
        "abc-x",
        "a-" + "9" * 19,
        "x" * 70 + "-1",
        "abc-\u00b2",
        "abc-0",
        "abc-01",
        "a-1, a-1",
        "a b-1",
    ],
)
def test_malformed_event_ids_are_refused(value):
    with pytest.raises(BadEventId, match="Last-Event-ID"):
        parse_event_id(value)


def test_reading_replays_from_a_position_then_ends_with_the_stream():
    log = EventLog(REQUEST, StreamLimits())
    log.prime()
    log.append(b"1")
    log.append(b"2")
    token = log.attach()
    log.finish(b"3")
    got = payloads(log.read(token, 2, 0.01))
    assert [g.split(b"data: ")[1] for g in got] == [b"2\n\n", b"3\n\n"]


def test_a_finished_stream_ignores_later_events():
    log = EventLog(REQUEST, StreamLimits())
    assert log.finish(None) is None and log.finished
    assert log.append(b"late") is None and log.finish(b"again") is None


def test_the_buffer_keeps_the_newest_events_within_its_count_and_bytes():
    log = EventLog(REQUEST, StreamLimits(max_events=2, max_bytes=10_000))
    log.prime()
    for n in range(5):
        log.append(str(n).encode())
    with pytest.raises(StreamGone, match="ZEMCP_STREAM_BUFFER_EVENTS"):
        log.check(1)
    log.check(4)
    with pytest.raises(StreamNotFound):
        log.check(7)
    small = EventLog(REQUEST, StreamLimits(max_bytes=100))
    big = small.append(b"x" * 500)
    assert big is not None and small.size == len(big), "the last event is always kept"
    small.append(b"y")
    assert small.size < 100


def test_a_new_connection_takes_the_stream_from_the_old_one():
    log = EventLog(REQUEST, StreamLimits())
    old = log.attach()
    reader = log.read(old, 0, 5)
    new = log.attach()
    assert not log.reads(old) and log.reads(new)
    started = time.monotonic()
    assert list(reader) == []
    assert time.monotonic() - started < 1


def test_end_connection_stops_the_reader_with_a_retry_field():
    log = EventLog(REQUEST, StreamLimits(retry=2))
    token = log.attach()
    threading.Timer(0.05, log.end_connection).start()
    assert payloads(log.read(token, 0, 1)) == [b"retry: 2000\n\n"]
    assert log.reads(token), "ending a connection is up to the reader, which then detaches"


def test_live_events_wake_the_reader():
    log = EventLog(REQUEST, StreamLimits())
    token = log.attach()
    threading.Timer(0.05, log.append, (b"live",)).start()
    threading.Timer(0.1, log.finish, (b"end",)).start()
    got = payloads(log.read(token, 0, 1))
    assert len(got) == 2 and got[0].endswith(b"data: live\n\n")


def test_keepalives_while_nothing_happens():
    log = EventLog(REQUEST, StreamLimits())
    token = log.attach()
    reader = log.read(token, 0, 0.01)
    assert next(reader) is KEEPALIVE


def test_windows_start_when_the_connection_goes():
    log = EventLog(REQUEST, StreamLimits(window=10))
    token = log.attach()
    now = time.monotonic()
    assert not log.abandoned(now + 100), "a read stream is never abandoned"
    log.detach(token)
    assert not log.abandoned(now + 5) and log.abandoned(now + 11)
    assert not log.expired(now + 11), "the request is still running: its response is to come"
    log.finish(b"x")
    assert not log.expired(time.monotonic() + 5) and log.expired(time.monotonic() + 11)


def test_a_request_stream_nobody_reads_is_kept_until_its_handler_ends_it():
    """An abandoned request stream is not forgotten while its request runs (its last response is
    still to come); an abandoned standalone stream is."""
    request, standalone = EventLog(REQUEST, StreamLimits(window=1)), EventLog(STANDALONE, StreamLimits(window=1))
    later = time.monotonic() + 5
    assert request.abandoned(later) and not request.expired(later)
    assert standalone.expired(later)
    request.finish(b"last")
    assert not request.expired(time.monotonic() + 0.5) and request.expired(time.monotonic() + 2)


def test_a_connection_that_holds_a_place_is_known():
    log = EventLog(REQUEST, StreamLimits())
    assert not log.reader_holds_place
    token = log.attach(holds_place=True)
    assert log.reader_holds_place
    log.attach()
    assert not log.reader_holds_place
    log.detach(token)


def test_session_streams_find_and_forget():
    budget = ReplayBudget(10_000)
    streams = SessionStreams(StreamLimits(), budget)
    log = streams.open()
    log.prime()
    assert streams.find(f"{log.id}-1") == (log, 1)
    with pytest.raises(StreamNotFound, match="another session"):
        streams.find(f"{EventLog(REQUEST, StreamLimits()).id}-1")
    with pytest.raises(BadEventId):
        streams.find("garbage")
    streams.forget(log)
    with pytest.raises(StreamNotFound):
        streams.find(f"{log.id}-1")


def test_the_standalone_stream_is_one_per_session_and_ends_with_the_session():
    streams = SessionStreams(StreamLimits(), ReplayBudget(10_000))
    first = streams.open(STANDALONE)
    second = streams.open(STANDALONE)
    assert streams.standalone is second and len(streams) == 1
    request = streams.open()
    streams.close()
    assert second.finished and not request.finished, "a request's stream is ended by its handler"
    assert not first.finished and len(streams) == 0


def test_finished_streams_are_forgotten_beyond_the_process_budget():
    budget = ReplayBudget(300)
    streams = SessionStreams(StreamLimits(), budget)
    logs = []
    for n in range(3):
        log = streams.open()
        log.finish(b"x" * 100 + str(n).encode())
        streams.ended(log)
        logs.append(log)
    assert budget.held <= 300
    with pytest.raises(StreamNotFound):
        streams.find(f"{logs[0].id}-1")
    assert streams.find(f"{logs[2].id}-1")[0] is logs[2]
    streams.forget(logs[2])
    assert budget.held == logs[1].size
