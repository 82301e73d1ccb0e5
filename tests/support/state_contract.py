"""The shared-state contract's helpers, and its stream checks, which every StreamLogs passes.

tests/unit/test_state_contracts.py runs the whole contract against every backend of
zemcp.state.BACKENDS; tests/unit/test_redis_state.py uses the sink and call doubles across two
Redis processes, and tests/unit/test_redis_eventlogs.py runs the stream checks against
RedisStreamLogs alone. A stream check takes an object whose ``sessions.create(...)`` returns
something with a ``streams`` attribute (a StreamLogs), and fails with AssertionError.
"""

import threading
import time

import pytest

from zemcp.config import Settings
from zemcp.protocol import jsonrpc
from zemcp.state import open_state
from zemcp.state.streamlogs import KEEPALIVE, REQUEST, STANDALONE, BadEventId, StreamGone, StreamNotFound, retry_field
from zemcp.state.waitingcalls import Delivery

#: The settings of every contract state (small caps, so that a test reaches them).
SETTINGS = dict(
    instance="contract",
    max_sessions=3,
    session_ttl=60.0,
    max_pending=4,
    max_pending_per_session=2,
    max_listen_streams=2,
    stream_buffer_events=4,
    resume_window=5.0,
    max_tasks=3,
    client_share=0.5,
)


class Ended:
    """The on_session_end callback: records (session id, why)."""

    def __init__(self):
        self.calls = []

    def __call__(self, session, why):
        self.calls.append((session.id, why))


class Opened:
    """One backend's state, and what its sessions' ends announced.

    ``backend`` names one of zemcp.state.BACKENDS; ``extra`` are settings beside
    :data:`SETTINGS` (``redis_url`` for Redis). Attributes: ``sessions``, ``pending``,
    ``fanout``, ``limiter``, ``tasks`` (the seams) and ``ended`` (an :class:`Ended`).
    """

    def __init__(self, backend, **extra):
        self.ended = Ended()
        built = open_state(Settings(**SETTINGS, state_backend=backend, **extra), self.ended)
        self.sessions, self.pending, self.fanout = built.sessions, built.pending, built.fanout
        self.limiter = built.limiter
        self.tasks = built.tasks


class Outlet:
    """A reply sink as the waiting-calls table sees it: records what is sent."""

    tick_interval = 0.05

    def __init__(self):
        self.sent = []

    def send(self, message):
        """Record ``message`` (a JSON-RPC message); always delivered (True)."""
        self.sent.append(message)
        return True

    def tick(self):
        """Nothing to keep alive: the waits call it every ``tick_interval`` seconds."""


class Channel(Outlet):
    """A listen stream's sink: records notifications, the final response and close callbacks."""

    def __init__(self):
        super().__init__()
        self.final = None
        self._on_close = []

    def finish(self, response):
        """Record the final response (``final``)."""
        self.final = response

    def on_close(self, callback):
        """Call ``callback`` (no arguments) when the stream closes."""
        self._on_close.append(callback)

    def close(self):
        """Close the stream: every ``on_close`` callback runs."""
        for callback in self._on_close:
            callback()


class RunningCall:
    """A running request of a session, as the seams see it."""

    def __init__(self, session, request_id=1, client_key=None):
        self.session = session
        self.request_id = request_id
        self.client_key = client_key
        self.sink = Outlet()
        self.aborted = None

    def abort(self, reason):
        """Abort the call with ``reason`` (an exception); False when it was aborted already."""
        if self.aborted is None:
            self.aborted = reason
            return True
        return False

    def raise_if_aborted(self):
        """Raise the reason the call was aborted with, if it was."""
        if self.aborted is not None:
            raise self.aborted


def new_session(state, principal=None):
    """A new 2025-11-25 session of ``state`` with the elicitation capability, for ``principal``."""
    return state.sessions.create("2025-11-25", {"name": "contract"}, {"elicitation": {}}, principal)


def answer_when_sent(state, session, call, result, count=1):
    """Answer the first ``count`` requests ``call`` sends, from another thread, as a client would.

    Waits up to 5 s for them; returns the answering thread (join it). Its assertion errors
    (nothing sent in time, an answer not taken) end the thread, so the caller's checks of the
    call then fail.
    """

    def answer():
        deadline = time.monotonic() + 5
        while len([m for m in call.sink.sent if "method" in m and "id" in m]) < count:
            assert time.monotonic() < deadline, "the request was never sent"
            time.sleep(0.01)
        for message in [m for m in call.sink.sent if "id" in m][:count]:
            assert state.pending.resolve(session.id, jsonrpc.Response(message["id"], result, None)) is Delivery.TAKEN

    thread = threading.Thread(target=answer)
    thread.start()
    return thread


# -- the stream checks ---------------------------------------------------------------------


def a_stream_replays_what_follows_an_event_id(state):
    """A stream read from an event id replays the events after it, the finishing one included."""
    streams = new_session(state).streams
    log = streams.open(REQUEST)
    assert log.kind == REQUEST
    log.prime()
    log.append(b'{"n":1}')
    second = log.append(b'{"n":2}')
    assert second.startswith(f"id: {log.id}-3\n".encode())
    found, number = streams.find(f"{log.id}-2")
    assert found is log and number == 2
    log.finish(b'{"n":3}')
    token = log.attach(holds_place=True)
    assert log.reads(token) and log.attached and log.reader_holds_place
    replayed = [item for item in log.read(token, number, 0.05) if item is not KEEPALIVE]
    assert replayed == [second, f"id: {log.id}-4\nevent: message\n".encode() + b'data: {"n":3}\n\n']
    assert log.finished


def a_bad_or_unknown_event_id_is_refused(state):
    """An id this server never made is BadEventId; one of no known stream is StreamNotFound."""
    streams = new_session(state).streams
    streams.open(REQUEST)
    with pytest.raises(BadEventId, match="is not an event id of this server"):
        streams.find("not an id")
    with pytest.raises(StreamNotFound):
        streams.find("abcdefgh-1")


def resuming_from_before_the_replay_buffer_is_gone(state):
    """Resuming from an event the replay buffer no longer holds is StreamGone."""
    log = new_session(state).streams.open(REQUEST)
    for n in range(SETTINGS["stream_buffer_events"] + 2):
        log.append(b'{"n":%d}' % n)
    with pytest.raises(StreamGone):
        log.check(1)
    log.check(log.position - 1)


def a_new_standalone_stream_replaces_the_earlier_one(state):
    """A session has one standalone stream: a new one replaces it."""
    streams = new_session(state).streams
    first = streams.open(STANDALONE)
    second = streams.open(STANDALONE)
    assert streams.standalone is second and first is not second


def closing_a_sessions_streams_ends_the_standalone_one_and_forgets_them_all(state):
    """Closing a session's streams ends its standalone stream and forgets every stream."""
    streams = new_session(state).streams
    log, standalone = streams.open(REQUEST), streams.open(STANDALONE)
    log.append(b"{}")
    closed = streams.close()
    assert log in closed and standalone in closed
    assert standalone.finished and not log.finished, "a request's stream is ended by its handler"
    with pytest.raises(StreamNotFound):
        streams.find(f"{log.id}-1")
    assert len(streams) == 0 and streams.standalone is None


def an_unread_stream_is_abandoned_after_its_window(state):
    """A stream nobody reads is abandoned once the resume window passed."""
    log = new_session(state).streams.open(REQUEST)
    token = log.attach()
    assert not log.abandoned()
    log.detach(token)
    assert not log.abandoned(time.monotonic())
    assert log.abandoned(time.monotonic() + SETTINGS["resume_window"] + 1)


def a_finished_stream_stays_resumable_for_its_window_then_is_forgotten(state):
    """A finished stream can be resumed within the resume window, then is pruned."""
    streams = new_session(state).streams
    log = streams.open(REQUEST)
    log.append(b'{"n":1}')
    log.finish(b'{"n":2}')
    streams.ended(log)
    assert log.finished and log.size > 0
    assert streams.find(f"{log.id}-1")[0] is log, "a finished stream is kept for a client that lost its connection"
    assert not log.expired(time.monotonic())
    later = time.monotonic() + SETTINGS["resume_window"] + 1
    assert log.expired(later)
    assert log in streams.prune(later)
    with pytest.raises(StreamNotFound):
        streams.find(f"{log.id}-1")


def a_forgotten_stream_cannot_be_resumed(state):
    """A stream forgotten on purpose is StreamNotFound."""
    streams = new_session(state).streams
    log = streams.open(REQUEST)
    log.append(b"{}")
    streams.forget(log)
    with pytest.raises(StreamNotFound):
        streams.find(f"{log.id}-1")


def ending_a_connection_on_purpose_stops_its_reader_but_not_the_stream(state):
    """Ending the connection on purpose ends the read with a retry field; the stream lives on."""
    log = new_session(state).streams.open(REQUEST)
    token = log.attach()
    log.append(b'{"n":1}')
    log.end_connection()
    read = list(log.read(token, 0, 0.05))
    assert read[-1] == retry_field(log.limits), "the reader ends after telling the client when to come back"
    assert not log.finished, "the stream lives on for the client to resume"
    assert log.append(b'{"n":2}') is not None


#: Every stream check, in the order above.
STREAM_CHECKS = (
    a_stream_replays_what_follows_an_event_id,
    a_bad_or_unknown_event_id_is_refused,
    resuming_from_before_the_replay_buffer_is_gone,
    a_new_standalone_stream_replaces_the_earlier_one,
    closing_a_sessions_streams_ends_the_standalone_one_and_forgets_them_all,
    an_unread_stream_is_abandoned_after_its_window,
    a_finished_stream_stays_resumable_for_its_window_then_is_forgotten,
    a_forgotten_stream_cannot_be_resumed,
    ending_a_connection_on_purpose_stops_its_reader_but_not_the_stream,
)
