"""The Redis backend across processes: two servers' states over one real redis-server stand
for two gunicorn workers (each its own node, connections and local objects), and what one
does, the other sees. The contract every backend passes alone is tests/unit/test_state_contracts.py."""

import threading
import time

import pytest

from tests.support.state_contract import Channel, Ended, RunningCall
from zemcp.config import Settings
from zemcp.protocol import jsonrpc
from zemcp.protocol.elicitation import AnswerLost, RequestCancelled, SessionEnded
from zemcp.state import open_state
from zemcp.state.redis.sessions import LOST
from zemcp.state.redis.waiting import HANDOVER_TIMEOUT
from zemcp.state.sessionstore import SessionLimitReached, SessionNotFound
from zemcp.state.streamlogs import STANDALONE
from zemcp.state.waitingcalls import CapacityError, Delivery


class Worker:
    """One process's state over the shared Redis."""

    def __init__(self, url: str, name: str, **settings):
        self.ended = Ended()
        base = dict(instance=name, max_sessions=4, max_pending=8, max_pending_per_session=2, session_ttl=60.0)
        self.state = open_state(Settings(redis_url=url, **{**base, **settings}), self._session_ended)
        self.sessions, self.pending, self.fanout = self.state.sessions, self.state.pending, self.state.fanout

    def _session_ended(self, session, why):
        # As the server does: the session's waits here end with the reason.
        self.ended(session, why)
        self.pending.end_session(session.id, SessionEnded(why))

    def close(self):
        self.sessions.close()


@pytest.fixture
def workers(redis_server):
    made = [Worker(redis_server.url, "a"), Worker(redis_server.url, "b")]
    yield made
    for worker in made:
        worker.close()


def new_session(worker, principal=None):
    return worker.sessions.create("2025-11-25", {"name": "two"}, {"elicitation": {}}, principal)


def ask_in_background(worker, call, timeout=5.0):
    """Run ``ask_all`` of one question on a thread; returns the thread and what it ended with."""
    outcome = []

    def ask():
        try:
            outcome.append(worker.pending.ask_all(call, [("elicitation/create", {})], timeout))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=ask)
    thread.start()
    return thread, outcome


def wait_for(predicate, deadline=3.0):
    end = time.monotonic() + deadline
    while not predicate():
        assert time.monotonic() < end, "the condition did not hold in time"
        time.sleep(0.01)


def test_a_session_made_in_one_process_is_served_by_the_other_with_its_changes(workers):
    a, b = workers
    session = new_session(a, principal="alice")
    there = b.sessions.get(session.id)
    assert (there.principal, there.client_info, there.protocol_version) == ("alice", {"name": "two"}, "2025-11-25")
    there.log_level = "error"
    there.mark_initialized()
    assert there.subscribe("test://x", 8)
    time.sleep(1.1)  # a serves its own object of the session for a second before it asks again (RECHECK)
    here = a.sessions.get(session.id)
    assert here.log_level == "error" and here.initialized and here.subscribed("test://x")


def test_the_session_cap_counts_every_process(workers):
    a, b = workers
    for worker in (a, b, a, b):
        new_session(worker)
    with pytest.raises(SessionLimitReached, match="this deployment holds its maximum of 4 sessions"):
        new_session(b)


def test_an_answer_posted_to_the_other_process_reaches_the_waiting_call_once(workers):
    a, b = workers
    session = new_session(a)
    call = RunningCall(a.sessions.get(session.id))
    answers = []
    waiter = threading.Thread(target=lambda: answers.extend(a.pending.ask_all(call, [("elicitation/create", {})], 5)))
    waiter.start()
    wait_for(lambda: call.sink.sent)
    request_id = call.sink.sent[0]["id"]
    b.sessions.get(session.id)
    assert b.pending.count(session.id) == 1  # the listing is shared
    answer = jsonrpc.Response(request_id, {"action": "accept"}, None)
    assert b.pending.resolve(session.id, answer) is Delivery.TAKEN
    waiter.join(5)
    assert [answer.result for answer in answers] == [{"action": "accept"}]
    # Taken once: the same answer again, or under another session, reaches nothing.
    assert b.pending.resolve(session.id, answer) is Delivery.NOT_WAITING
    assert b.pending.resolve(new_session(b).id, jsonrpc.Response(request_id, {}, None)) is Delivery.NOT_WAITING


def test_the_per_session_cap_counts_the_waits_of_every_process(workers):
    a, b = workers
    session = new_session(a)
    calls = [RunningCall(a.sessions.get(session.id), 1), RunningCall(b.sessions.get(session.id), 2)]
    threads = [ask_in_background(w, c)[0] for w, c in zip((a, b), calls)]
    wait_for(lambda: all(c.sink.sent for c in calls))
    with pytest.raises(CapacityError, match="per-session cap, across every process"):
        b.pending.ask_all(RunningCall(b.sessions.get(session.id), 3), [("x", {})], 1)
    a.sessions.end(session.id, "deleted by the client")
    for thread in threads:
        thread.join(5)


def test_a_cancel_and_an_end_reach_the_process_that_runs_the_call(workers):
    a, b = workers
    session = new_session(a)
    here = a.sessions.get(session.id)
    call = here.begin(RunningCall(here, 7))
    outcome = []

    def wait():
        try:
            a.pending.ask_all(call, [("elicitation/create", {})], 5)
        except BaseException as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    wait_for(lambda: call.sink.sent)
    b.sessions.get(session.id).relay_cancel(7, "not now")
    waiter.join(5)
    assert isinstance(outcome[0], RequestCancelled) and "not now" in str(outcome[0])

    other = here.begin(RunningCall(here, 8))
    assert b.sessions.end(session.id, "deleted by the client")
    wait_for(lambda: isinstance(other.aborted, SessionEnded) or a.ended.calls)
    assert a.ended.calls == [(session.id, "deleted by the client")]
    with pytest.raises(SessionNotFound):
        a.sessions.get(session.id)


def test_idle_sessions_are_ended_by_any_process_and_busy_ones_kept(redis_server):
    # A short TTL and real time: each process sweeps on its own (every second, its heartbeat),
    # and the process running a request keeps its session alive for the others.
    a, b = Worker(redis_server.url, "a", session_ttl=3.0), Worker(redis_server.url, "b", session_ttl=3.0)
    try:
        idle, busy = new_session(a), new_session(a)
        busy_here = a.sessions.get(busy.id)
        busy_here.begin(RunningCall(busy_here))
        wait_for(lambda: (idle.id, "expired") in a.ended.calls, deadline=8.0)
        assert busy.id in b.sessions and b.sessions.get(busy.id).id == busy.id
        assert idle.id not in b.sessions
    finally:
        a.close()
        b.close()


def test_a_redis_that_lost_its_data_means_unknown_sessions(workers, redis_server):
    a, b = workers
    session = new_session(a)
    redis_server.flush()
    time.sleep(1.1)  # a process asks Redis again a second after it last did (RECHECK)
    with pytest.raises(SessionNotFound, match="send initialize again"):
        b.sessions.get(session.id)
    with pytest.raises(SessionNotFound):
        a.sessions.get(session.id)


def test_every_key_expires(workers, redis_server):
    import redis

    a, b = workers
    session = new_session(a)
    here = a.sessions.get(session.id)
    here.subscribe("test://x", 8)
    call = RunningCall(here)
    waiter, _ = ask_in_background(a, call)
    wait_for(lambda: call.sink.sent)
    client = redis.Redis.from_url(redis_server.url)
    try:
        keys = client.keys("zemcp:*")
        assert keys, "nothing was written under the prefix"
        assert all(client.pttl(key) > 0 for key in keys if client.type(key) != b"none"), {
            key: client.pttl(key) for key in keys
        }
    finally:
        client.close()
        a.sessions.end(session.id, "deleted by the client")
        waiter.join(5)


def test_a_list_change_in_one_process_reaches_a_listen_stream_of_the_other(workers):
    a, b = workers
    channel = Channel()
    acknowledged, kinds, uris = a.fanout.honoured({"toolsListChanged": True}, {"toolsListChanged": True})
    a.fanout.open("sub-1", acknowledged, kinds, uris, channel)
    new_session(b)  # b serves a request, so its announcements go to the deployment
    time.sleep(0.3)  # a's bus subscription is in place
    b.fanout.list_changed("toolsListChanged")
    wait_for(lambda: len(channel.sent) == 2)
    assert channel.sent[1]["method"] == "notifications/tools/list_changed"
    assert channel.sent[1]["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "sub-1"}


def test_a_process_announces_to_the_others_from_its_first_request_whatever_it_served(workers):
    """b's announcements before it serves (its app's registrations) stay in b; once it serves a
    request that needs nothing else of Redis (a 2026-07-28 call), they reach a's standalone
    stream and a's listen stream."""
    a, b = workers
    session = new_session(a)
    log = session.streams.open(STANDALONE)
    a.fanout.open_session(session.id, log, session.subscribed)
    channel = Channel()
    acknowledged, kinds, uris = a.fanout.honoured({"toolsListChanged": True}, {"toolsListChanged": True})
    a.fanout.open("sub-1", acknowledged, kinds, uris, channel)
    before = log.position
    assert b.fanout.list_changed("toolsListChanged") == 0
    time.sleep(0.3)
    assert len(channel.sent) == 1 and log.position == before
    b.state.serving()
    assert b.fanout.list_changed("toolsListChanged") == 1  # a's standalone stream, from b
    assert log.position == before + 1
    wait_for(lambda: len(channel.sent) == 2)
    assert channel.sent[1]["method"] == "notifications/tools/list_changed"


def test_a_listen_stream_hears_what_is_announced_right_after_its_acknowledgement(workers):
    """a's node starts with its first listen stream, whose acknowledgement waits until a hears
    the bus: an announcement b makes at once reaches the stream."""
    a, b = workers
    b.state.serving()
    channel = Channel()
    acknowledged, kinds, uris = a.fanout.honoured({"toolsListChanged": True}, {"toolsListChanged": True})
    a.fanout.open("sub-1", acknowledged, kinds, uris, channel)
    b.fanout.list_changed("toolsListChanged")
    wait_for(lambda: len(channel.sent) == 2)
    assert channel.sent[1]["method"] == "notifications/tools/list_changed"


def test_an_answer_claimed_as_the_wait_runs_out_is_still_taken(workers):
    a, b = workers
    session = new_session(a)
    call = RunningCall(a.sessions.get(session.id))
    deliver = a.pending.node._inbox["answer"]
    # The waiting process reads its inbox late: the claim lands before the wait runs out,
    # the answer after.
    a.pending.node._inbox["answer"] = lambda message: (time.sleep(0.6), deliver(message))
    waiter, outcome = ask_in_background(a, call, timeout=0.4)
    wait_for(lambda: call.sink.sent)
    b.sessions.get(session.id)
    answer = jsonrpc.Response(call.sink.sent[0]["id"], {"action": "accept"}, None)
    assert b.pending.resolve(session.id, answer) is Delivery.TAKEN
    waiter.join(5)
    assert [answer.result for answer in outcome[0]] == [{"action": "accept"}], outcome
    assert b.pending.count(session.id) == 0


def test_an_answer_the_waiting_process_does_not_take_in_time_is_unconfirmed_and_not_used(workers):
    """The waiting process lives on (its heartbeat too) but does not read its inbox in time, as
    one stalled a moment: the POST is not told the answer was taken, and the late process does
    not take it either, but ends the call's wait at once (no answer can reach it any more)."""
    a, b = workers
    session = new_session(a)
    call = RunningCall(a.sessions.get(session.id))
    deliver = a.pending.node._inbox["answer"]
    late = HANDOVER_TIMEOUT + 0.5
    a.pending.node._inbox["answer"] = lambda message: (time.sleep(late), deliver(message))
    waiter, outcome = ask_in_background(a, call, timeout=late + 0.5)
    wait_for(lambda: call.sink.sent)
    b.sessions.get(session.id)
    started = time.monotonic()
    answer = jsonrpc.Response(call.sink.sent[0]["id"], {"action": "accept"}, None)
    assert b.pending.resolve(session.id, answer) is Delivery.UNCONFIRMED
    assert HANDOVER_TIMEOUT <= time.monotonic() - started < 2 * HANDOVER_TIMEOUT
    # The claim stands: the same answer again finds nothing waiting.
    assert b.pending.resolve(session.id, answer) is Delivery.NOT_WAITING
    waiter.join(late + 2 * HANDOVER_TIMEOUT)
    assert not waiter.is_alive() and isinstance(outcome[0], AnswerLost), outcome
    assert a.pending.count() == 0


def wait_begun(worker, session_id, request_id, timeout=30.0):
    """A call begun in the session (as the eras begin theirs) that asks one question, on a
    thread: the call, the thread and what ``ask_all`` ended with."""
    here = worker.sessions.get(session_id)
    call = here.begin(RunningCall(here, request_id))
    waiter, outcome = ask_in_background(worker, call, timeout)
    wait_for(lambda: call.sink.sent)
    return call, waiter, outcome


def test_calls_of_sessions_redis_lost_end_within_seconds(workers, redis_server):
    a, b = workers
    sessions = [new_session(a), new_session(b)]
    waits = [wait_begun(a, sessions[0].id, 1), wait_begun(a, sessions[1].id, 2)]
    redis_server.flush()
    started = time.monotonic()
    for call, waiter, outcome in waits:
        waiter.join(5)
        assert isinstance(outcome[0], SessionEnded) and LOST in str(outcome[0]), outcome
        # Told on its stream that its question is withdrawn.
        assert call.sink.sent[-1]["method"] == "notifications/cancelled"
    assert time.monotonic() - started < 3.0, "the calls waited more than 3 s after Redis lost their sessions"
    assert a.pending.count() == 0
    assert sorted(a.ended.calls) == sorted((s.id, LOST) for s in sessions)


def test_redis_out_of_reach_ends_no_call_and_back_without_its_data_ends_them(start_redis):
    server = start_redis()
    worker = Worker(server.url, "a", redis_timeout=0.5)
    try:
        session = new_session(worker)
        _, waiter, outcome = wait_begun(worker, session.id, 1)
        server.stop()
        time.sleep(3.0)  # three heartbeats that cannot reach Redis
        assert waiter.is_alive() and not outcome and worker.ended.calls == []
        server.start()  # without persistence: its data is gone
        waiter.join(5)
        assert isinstance(outcome[0], SessionEnded) and LOST in str(outcome[0]), outcome
    finally:
        worker.close()
        server.stop()


# -- the token buckets of the rate limits ---------------------------------------------------


def _limit(text, scope="client"):
    from zemcp.config.rates import parse_rate
    from zemcp.state.ratelimits import Limit

    return Limit(scope, parse_rate(text, "test"), "ZEMCP_RATE_LIMIT")


def test_both_processes_take_from_one_bucket(workers):
    a, b = workers
    per_hour = _limit("4/hour")
    taken = [worker.state.limiter.take("address 198.51.100.7", [per_hour]) for worker in (a, b, a, b)]
    assert taken == [None] * 4
    assert a.state.limiter.take("address 198.51.100.7", [per_hour]) is not None
    assert b.state.limiter.take("address 198.51.100.7", [per_hour]) is not None


def test_a_bucket_is_a_key_under_the_prefix_that_names_no_client_and_expires_when_full(workers, redis_server):
    import redis

    a, _ = workers
    a.state.limiter.take("address 198.51.100.7", [_limit("1/hour"), _limit("2/minute", "tool report")])
    client = redis.Redis.from_url(redis_server.url)
    try:
        keys = sorted(key.decode() for key in client.keys("zemcp:rate:*"))
        assert [key.rsplit(":", 1)[0] for key in keys] == ["zemcp:rate:client", "zemcp:rate:tool:report"], keys
        assert all("198.51.100.7" not in key and len(key.rsplit(":", 1)[1]) == 32 for key in keys), keys
        ttls = {key: client.pttl(key) for key in keys}
        # Empty after one take of 1/hour: full again in 3600 s; half full of 2/minute: in 30 s
        # (plus the margin; the script rounds up to the next millisecond, hence the + 1).
        assert 3599_000 < ttls[keys[0]] <= 3601_000 + 1, ttls
        assert 29_000 < ttls[keys[1]] <= 31_000 + 1, ttls
    finally:
        client.close()


def test_redis_trouble_in_the_limiter_is_state_unavailable(start_redis):
    import redis

    from zemcp.state.unavailable import StateUnavailable

    server = start_redis()
    worker = Worker(server.url, "a", redis_timeout=0.5)
    try:
        per_hour = _limit("4/hour")
        # A key of another type where the bucket goes: an error reply, not a 500.
        client = redis.Redis.from_url(server.url)
        client.set(worker.state.limiter.key("client", "address a"), "not a hash")
        client.close()
        with pytest.raises(StateUnavailable, match="ZEMCP_REDIS_URL"):
            worker.state.limiter.take("address a", [per_hour])
        server.stop()
        started = time.monotonic()
        with pytest.raises(StateUnavailable, match="cannot be reached"):
            worker.state.limiter.take("address b", [per_hour])
        assert time.monotonic() - started < 2.0
    finally:
        worker.close()
