"""Unit tests of zemcp.state.redis.eventlogs over a real redis-server.

Two "processes" (each with its own Redis clients, Node and RedisReplay, as two gunicorn
workers would have) share one Redis and each has its own RedisStreamLogs of one session: what
one writes, the other replays and follows; taking a stream over, ending a connection and a
writer's death reach across; every key expires. The stream part of the state contract
(tests/support/state_contract.py, whose checks tests/unit/test_state_contracts.py runs on
every backend) runs here too, on one process.
"""

import json
import secrets
import threading
import time
from types import SimpleNamespace

import pytest

from tests.support import state_contract as contract
from zemcp.config import Settings, StreamLimits
from zemcp.state.redis.client import Redis
from zemcp.state.redis.eventlogs import RedisStreamLogs
from zemcp.state.redis.node import HEARTBEAT_TTL, Node
from zemcp.state.redis.replay import EXPIRY_MARGIN, RedisReplay
from zemcp.state.streamlogs import KEEPALIVE, REQUEST, STANDALONE, BadEventId, StreamGone, StreamNotFound
from zemcp.state.unavailable import StateUnavailable

LIMITS = StreamLimits(retry=0.5, window=1.0, max_events=4, max_bytes=10_000)
SESSION = "inst.session"


class Process:
    """One process's side of the shared state: its clients, node, replay and the session's streams."""

    def __init__(self, url: str, name: str, limits: StreamLimits = LIMITS):
        self.redis = Redis(Settings(redis_url=url, instance=name))
        self.node = Node(self.redis, name)
        self.replay = RedisReplay(self.redis, self.node, limits)
        self.streams = RedisStreamLogs(self.replay, SESSION)

    def close(self):
        # The node's threads end within a second and drop their connections then: closing the
        # clients under them would only make them log the failure.
        self.node.close()


@pytest.fixture
def start(redis_server):
    """Factory ``start(name, limits=LIMITS, url=None)`` -> a :class:`Process` (closed at teardown)."""
    made = []

    def process(name, limits=LIMITS, url=None):
        made.append(Process(url or redis_server.url, name, limits))
        return made[-1]

    yield process
    for made_process in made:
        made_process.close()


def payloads(items):
    return [item for item in items if item is not KEEPALIVE]


def pending(log, after):
    """What a new connection to ``log`` reads after ``after`` until the stream goes quiet (or ends)."""
    got = []
    for item in log.read(log.attach(), after, 0.05):
        if item is KEEPALIVE:
            break
        got.append(item)
    return got


class Reader(threading.Thread):
    """Reads ``log`` (after ``after``) on a thread of its own, as a GET's connection does."""

    def __init__(self, log, token, after, tick=0.1):
        super().__init__(daemon=True)
        self.log, self.token, self.after, self.tick = log, token, after, tick
        self.got = []
        self.start()

    def run(self):
        for item in self.log.read(self.token, self.after, self.tick):
            self.got.append(item)

    def finish(self, timeout):
        self.join(timeout)
        assert not self.is_alive(), f"the reader still reads after {timeout} s: {self.got}"
        return payloads(self.got)


def message(log, n, data):
    return f"id: {log.id}-{n}\nevent: message\ndata: {data}\n\n".encode()


def test_events_replay_after_an_id_on_another_process(start):
    a, b = start("a"), start("b")
    log = a.streams.open(REQUEST, request_id=7)
    assert log.prime() == f"id: {log.id}-1\nretry: 500\ndata:\n\n".encode()
    assert log.append(b'{"n":1}') == message(log, 2, '{"n":1}')
    second = log.append(b'{"n":2}')
    assert log.position == 3 and a.streams.find(f"{log.id}-2") == (log, 2)
    found, after = b.streams.find(f"{log.id}-2")
    assert found is not log and found.id == log.id and found.kind == REQUEST and after == 2
    last = log.finish(b'{"n":3}')
    assert log.append(b"late") is None and found.finished
    token = found.attach()
    assert payloads(found.read(token, after, 0.05)) == [second, last]


def test_a_reader_follows_what_another_process_appends(start):
    a, b = start("a"), start("b")
    log = a.streams.open(REQUEST)
    log.prime()
    found, after = b.streams.find(f"{log.id}-1")
    reader = Reader(found, found.attach(), after)
    time.sleep(0.3)
    live = log.append(b'{"live":1}')
    time.sleep(0.2)
    last = log.finish(b'{"done":1}')
    assert reader.finish(2) == [live, last]
    assert KEEPALIVE in reader.got, "a quiet stream yields keep-alives"


def test_attaching_on_one_process_stops_the_reader_on_another(start):
    a, b = start("a"), start("b")
    log = a.streams.open(REQUEST)
    log.prime()
    found, _ = b.streams.find(f"{log.id}-1")
    old = found.attach(holds_place=True)
    assert found.reader_holds_place and log.attached
    assert not log.reader_holds_place, "the place is one of the other process's thread budget"
    reader = Reader(found, old, 1, tick=5)
    time.sleep(0.2)
    started = time.monotonic()
    new = log.attach()
    assert reader.finish(1) == [] and time.monotonic() - started < 0.5
    assert new != old and log.reads(new) and not found.reads(old)


def test_ending_the_connection_reaches_the_reader_on_another_process(start):
    a, b = start("a"), start("b")
    log = a.streams.open(REQUEST)
    log.prime()
    found, _ = b.streams.find(f"{log.id}-1")
    reader = Reader(found, found.attach(), 1, tick=5)
    time.sleep(0.2)
    log.end_connection()
    assert reader.finish(1) == [b"retry: 500\n\n"]
    assert not log.finished and log.append(b"{}") is not None, "the stream lives on for the client to resume"


def test_the_standalone_stream_is_written_by_any_process(start):
    a, b = start("a"), start("b")
    stream = a.streams.open(STANDALONE)
    token = stream.attach(holds_place=True)
    after = int(stream.prime().split(b"-")[-1].split(b"\n")[0])
    reader = Reader(stream, token, after)
    shared = b.streams.standalone
    assert shared is not None and shared.id == stream.id and b.streams.standalone is shared
    time.sleep(0.2)
    assert shared.attached, "the reader on the other process counts"
    note = shared.append(b'{"method":"notifications/tools/list_changed"}')
    time.sleep(0.3)
    assert b.streams.close() == [shared] and reader.finish(2) == [note]
    assert a.streams.standalone is None and len(a.streams) == 0


def test_trimming_by_count_or_bytes_makes_resuming_from_before_gone(start):
    a, b = start("a"), start("b", StreamLimits(window=1.0, max_bytes=300))
    log = a.streams.open(REQUEST)
    log.prime()
    for n in range(LIMITS.max_events + 2):
        log.append(b'{"n":%d}' % n)
    with pytest.raises(StreamGone, match="ZEMCP_STREAM_BUFFER_EVENTS"):
        b.streams.find(f"{log.id}-1")
    found, after = b.streams.find(f"{log.id}-{log.position - 1}")
    assert len(pending(found, after)) == 1
    assert pending(found, 1) == [], "a reader that missed dropped events ends"
    small = b.streams.open(REQUEST)
    small.prime()
    big = small.append(b'"' + b"x" * 500 + b'"')
    assert small.size == len(big), "the newest event is always kept"
    small.append(b'"y"')
    assert small.size < 300
    with pytest.raises(StreamGone):
        a.streams.find(f"{small.id}-1")


def test_unknown_streams_numbers_and_ids_are_refused(start):
    a, b = start("a"), start("b")
    log = a.streams.open(REQUEST)
    log.prime()
    with pytest.raises(BadEventId, match="Last-Event-ID"):
        b.streams.find("garbage")
    with pytest.raises(StreamNotFound, match="another session"):
        b.streams.find("abcdefgh-1")
    with pytest.raises(StreamNotFound):
        b.streams.find(f"{log.id}-2")
    with pytest.raises(StreamNotFound):
        RedisStreamLogs(b.replay, "inst.other").find(f"{log.id}-1")
    b.streams.forget(b.streams.find(f"{log.id}-1")[0])
    with pytest.raises(StreamNotFound):
        a.streams.find(f"{log.id}-1")


def test_a_finished_stream_stays_resumable_for_its_window_then_is_gone(start):
    a, b = start("a"), start("b")
    log = a.streams.open(REQUEST)
    log.finish(b'{"n":1}')
    a.streams.ended(log)
    assert a.replay.held == log.size > 0
    found, _ = b.streams.find(f"{log.id}-1")
    assert not found.expired() and found.expired(time.monotonic() + LIMITS.window + 0.1)
    ttl = a.redis.client.pttl(log.keys[0])
    assert (LIMITS.window + EXPIRY_MARGIN - 1) * 1000 < ttl <= (LIMITS.window + EXPIRY_MARGIN) * 1000
    time.sleep(LIMITS.window + 0.1)
    with pytest.raises(StreamNotFound):
        b.streams.find(f"{log.id}-1")
    assert a.replay.held == 0
    assert b.streams.prune() == [found] and len(a.streams) == 0


@pytest.mark.slow
def test_a_request_whose_writer_died_ends_with_an_error_for_it(start):
    a, b = start("a"), start("b")
    followed, unread = a.streams.open(REQUEST, request_id="call-1"), a.streams.open(REQUEST, request_id=9)
    followed.prime(), unread.prime()
    followed.append(b'{"n":1}')
    found, after = b.streams.find(f"{followed.id}-2")
    reader = Reader(found, found.attach(), after)
    time.sleep(0.2)
    started = time.monotonic()
    a.node.close()
    (last,) = reader.finish(HEARTBEAT_TTL + 4)
    assert time.monotonic() - started < HEARTBEAT_TTL + 3
    error = json.loads(last.split(b"data: ")[1])
    assert error["id"] == "call-1" and error["error"]["code"] == -32603
    assert "stopped before it answered" in error["error"]["message"]
    again, after = b.streams.find(f"{followed.id}-2")
    assert payloads(again.read(again.attach(), after, 0.05)) == [last], "the same last event, once"
    resumed, after = b.streams.find(f"{unread.id}-1")
    (ended,) = payloads(resumed.read(resumed.attach(), after, 0.05))
    assert json.loads(ended.split(b"data: ")[1])["id"] == 9 and resumed.finished


def test_every_key_has_an_expiry(start):
    a, b = start("a"), start("b")
    log = a.streams.open(REQUEST, request_id=1)
    token = log.attach()
    log.prime()
    log.append(b"{}")
    log.end_connection()
    found, _ = b.streams.find(f"{log.id}-2")
    pending(found, 2)
    log.detach(token)
    log.finish(b"{}")
    standalone = b.streams.open(STANDALONE)
    standalone.detach(standalone.attach())
    keys = list(a.redis.client.scan_iter(match=a.redis.prefix + "*"))
    assert len(keys) >= 8
    ttls = {key: a.redis.client.pttl(key) for key in keys}
    assert all(ttl > 0 for ttl in ttls.values()), ttls


def test_the_writers_heartbeat_keeps_the_streams_it_writes(start):
    """A handler that sends nothing for longer than the keys live keeps its stream; a finished one lapses."""
    a = start("a", StreamLimits(window=0.1))
    silent, finished = a.streams.open(REQUEST), a.streams.open(REQUEST)
    silent.append(b"{}")
    finished.finish(None)
    lowest = a.redis.client.pttl(silent.keys[0])
    deadline = time.monotonic() + a.replay.ttl / 3000 + 3
    while (ttl := a.redis.client.pttl(silent.keys[0])) < lowest + 500:
        assert time.monotonic() < deadline, "the unfinished stream was never renewed"
        lowest = min(lowest, ttl)
        time.sleep(0.2)
    assert all(a.redis.client.pttl(key) > lowest + 500 for key in silent.keys)
    assert a.redis.client.pttl(finished.keys[0]) <= lowest


def test_redis_trouble_is_state_unavailable_and_ends_a_read_quietly(start, start_redis):
    server = start_redis()
    a = start("a", url=server.url)
    log = a.streams.open(REQUEST)
    token = log.attach()
    server.stop()
    for attempt in (lambda: a.streams.open(REQUEST), lambda: log.append(b"{}"), lambda: a.streams.find(f"{log.id}-1")):
        with pytest.raises(StateUnavailable, match="ZEMCP_REDIS_URL"):
            attempt()
    assert list(log.read(token, 0, 0.05)) == []


CONTRACT = contract.STREAM_CHECKS


@pytest.mark.parametrize("case", CONTRACT, ids=[case.__name__ for case in CONTRACT])
def test_the_state_contract_for_streams(start, case):
    process = start("a", Settings(**contract.SETTINGS).stream_limits)

    def create(*args):
        return SimpleNamespace(streams=RedisStreamLogs(process.replay, f"contract.{secrets.token_urlsafe(8)}"))

    case(SimpleNamespace(sessions=SimpleNamespace(create=create)))
