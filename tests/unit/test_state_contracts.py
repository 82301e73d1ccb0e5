"""The contract of the shared-state seams (zemcp.state.sessionstore, .waitingcalls, .streamlogs,
.fanout, .ratelimits, .tasks), run against every implementation zemcp.state.open_state can
choose (zemcp.state.BACKENDS).

Each test reaches the state only through the seams: sessions (SessionStore), the
server-to-client requests waiting for answers (WaitingCalls), a session's stream logs
(StreamLogs and EventLog), the fan-out of change notifications (FanOut), the token
buckets of the rate limits (RateLimiter) and the task records (TaskStore). A new
implementation joins BACKENDS and passes these tests as they are.
"""

import threading
import time

import pytest

from tests.support import state_contract as contract
from tests.support.state_contract import SETTINGS, Channel, Ended, Opened, RunningCall, answer_when_sent, new_session
from zemcp.config import Settings
from zemcp.config.rates import parse_rate
from zemcp.protocol import jsonrpc
from zemcp.protocol.elicitation import RequestCancelled, SessionEnded
from zemcp.state import BACKENDS, open_state
from zemcp.state.fanout import ListenLimitReached
from zemcp.state.ratelimits import CLIENT_SCOPE, Limit
from zemcp.state.sessionstore import SessionLimitReached, SessionNotFound, SessionRequired
from zemcp.state.streamlogs import STANDALONE
from zemcp.state.tasks import TaskLimitReached, TaskRecord
from zemcp.state.waitingcalls import CapacityError, Delivery


@pytest.fixture(params=BACKENDS)
def state(request):
    # A backend that keeps the state in a service gets a real one of its own (redis-server).
    extra = {"redis_url": request.getfixturevalue("redis_server").url} if request.param == "redis" else {}
    opened = Opened(request.param, **extra)
    yield opened
    opened.sessions.close()


# -- SessionStore ----------------------------------------------------------------------------


def test_a_created_session_is_found_by_its_id(state):
    session = new_session(state, principal="alice")
    assert session.id.startswith("contract.") and session.protocol_version == "2025-11-25"
    found = state.sessions.get(session.id)
    assert found.id == session.id and found.principal == "alice"
    assert session.id in state.sessions and len(state.sessions) == 1


def test_session_ids_are_unguessable_and_distinct(state):
    ids = {new_session(state).id for _ in range(3)}
    assert len(ids) == 3 and all(len(i.partition(".")[2]) >= 32 for i in ids)


def test_a_missing_or_unknown_session_id_is_refused(state):
    with pytest.raises(SessionRequired, match="Mcp-Session-Id header is required"):
        state.sessions.get(None)
    with pytest.raises(SessionNotFound, match="send initialize again"):
        state.sessions.get("contract.unknown")


def test_the_session_cap_refuses_initialize(state):
    for _ in range(3):
        new_session(state)
    with pytest.raises(SessionLimitReached, match="maximum of 3 sessions"):
        new_session(state)


def test_an_ended_session_is_gone_and_its_end_is_announced_once(state):
    session = new_session(state)
    assert state.sessions.end(session.id, "deleted by the client")
    assert state.ended.calls == [(session.id, "deleted by the client")]
    assert not state.sessions.end(session.id, "again")
    with pytest.raises(SessionNotFound):
        state.sessions.get(session.id)
    assert session.id not in state.sessions and len(state.sessions) == 0


def test_sweeping_ends_idle_sessions_but_not_busy_ones(state):
    idle, busy = new_session(state), new_session(state)
    busy.begin(RunningCall(busy))
    later = time.monotonic() + SETTINGS["session_ttl"] + 1
    assert state.sessions.sweep(later) == 1
    assert state.ended.calls == [(idle.id, "expired")]
    assert busy.id in state.sessions


def test_sessions_are_listed_oldest_first(state):
    made = [new_session(state) for _ in range(3)]
    assert [s.id for s in state.sessions.sessions()] == [s.id for s in made]


# -- WaitingCalls ------------------------------------------------------------------------------


def test_an_answer_reaches_the_waiting_call(state):
    session = new_session(state)
    call = RunningCall(session)
    result = {"action": "accept", "content": {"name": "Ada"}}
    thread = answer_when_sent(state, session, call, result)
    (answer,) = state.pending.ask_all(call, [("elicitation/create", {"message": "Name?"})], timeout=5)
    thread.join()
    assert answer.result == result
    (sent,) = call.sink.sent
    assert sent["method"] == "elicitation/create" and sent["params"] == {"message": "Name?"}
    assert state.pending.count() == 0 and state.pending.count(session.id) == 0


def test_several_questions_wait_together_and_answer_in_order(state):
    session = new_session(state)
    call = RunningCall(session)
    thread = answer_when_sent(state, session, call, {"roots": []}, count=2)
    answers = state.pending.ask_all(call, [("roots/list", {}), ("roots/list", {})], timeout=5)
    thread.join()
    assert [a.result for a in answers] == [{"roots": []}, {"roots": []}]
    assert len({m["id"] for m in call.sink.sent}) == 2


def test_an_answer_from_another_session_does_not_reach_the_call(state):
    session, other = new_session(state), new_session(state)
    call = RunningCall(session)
    seen = []

    def answer_as_other():
        while not call.sink.sent:
            time.sleep(0.01)
        seen.append(state.pending.resolve(other.id, jsonrpc.Response(call.sink.sent[0]["id"], {}, None)))
        seen.append(state.pending.resolve(session.id, jsonrpc.Response("zemcp-unknown", {}, None)))

    thread = threading.Thread(target=answer_as_other)
    thread.start()
    with pytest.raises(TimeoutError):
        state.pending.ask_all(call, [("elicitation/create", {})], timeout=0.5)
    thread.join()
    # Alike, so that a session cannot tell another session's ids from unknown ones.
    assert seen == [Delivery.NOT_WAITING, Delivery.NOT_WAITING] and not any(seen)
    cancelled = call.sink.sent[-1]
    assert cancelled["method"] == "notifications/cancelled"
    assert cancelled["params"]["requestId"] == call.sink.sent[0]["id"]
    assert state.pending.count() == 0


def test_an_answer_for_a_wait_that_ended_is_not_waiting(state):
    session = new_session(state)
    answered, late = RunningCall(session, 1), RunningCall(session, 2)
    thread = answer_when_sent(state, session, answered, {"action": "accept"})
    state.pending.ask_all(answered, [("elicitation/create", {})], timeout=5)
    thread.join()
    with pytest.raises(TimeoutError):
        state.pending.ask_all(late, [("elicitation/create", {})], timeout=0.2)
    for call in (answered, late):
        again = jsonrpc.Response(call.sink.sent[0]["id"], {"action": "accept"}, None)
        assert state.pending.resolve(session.id, again) is Delivery.NOT_WAITING
    assert state.pending.count() == 0


def test_the_per_session_cap_sends_nothing(state):
    session = new_session(state)
    call = RunningCall(session)
    with pytest.raises(CapacityError, match="per-session cap"):
        state.pending.ask_all(call, [("roots/list", {})] * 3, timeout=1)
    assert call.sink.sent == [] and state.pending.count() == 0


def test_the_process_cap_sends_nothing(state):
    sessions = [new_session(state) for _ in range(3)]
    woke = []

    def wait(call):
        try:
            state.pending.ask_all(call, [("roots/list", {})] * 2, timeout=5)
        except SessionEnded:
            woke.append(call.session.id)

    threads = [threading.Thread(target=wait, args=(RunningCall(s),)) for s in sessions[:2]]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5
    while state.pending.count() < 4:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    third = RunningCall(sessions[2])
    with pytest.raises(CapacityError, match="process cap"):
        state.pending.ask_all(third, [("roots/list", {})], timeout=1)
    assert third.sink.sent == []
    for s in sessions[:2]:
        assert state.pending.end_session(s.id, SessionEnded("over")) == 2
    for thread in threads:
        thread.join(5)
    assert sorted(woke) == sorted(s.id for s in sessions[:2])


def test_ending_a_session_wakes_its_waits_with_the_reason(state):
    session = new_session(state)
    call = RunningCall(session)
    woke = []

    def wait():
        try:
            state.pending.ask_all(call, [("elicitation/create", {})], timeout=5)
        except SessionEnded as exc:
            woke.append(str(exc))

    thread = threading.Thread(target=wait)
    thread.start()
    deadline = time.monotonic() + 5
    while state.pending.count(session.id) == 0:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert state.pending.end_session(session.id, SessionEnded("deleted by the client")) == 1
    thread.join(5)
    assert woke and "deleted by the client" in woke[0]
    assert state.pending.count() == 0


def test_ending_a_call_wakes_only_that_call(state):
    session = new_session(state)
    first, second = RunningCall(session, 1), RunningCall(session, 2)
    outcomes = {}

    def wait(call):
        try:
            outcomes[call.request_id] = state.pending.ask_all(call, [("roots/list", {})], timeout=5)[0].result
        except RequestCancelled:
            outcomes[call.request_id] = "cancelled"

    threads = [threading.Thread(target=wait, args=(c,)) for c in (first, second)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5
    while state.pending.count(session.id) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert state.pending.end_call(first, RequestCancelled("the client cancelled")) == 1
    threads[0].join(5)
    assert outcomes == {1: "cancelled"}
    # A request is counted when registered, a moment before it is sent.
    while not second.sink.sent:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert state.pending.resolve(session.id, jsonrpc.Response(second.sink.sent[0]["id"], {"roots": []}, None))
    threads[1].join(5)
    assert outcomes == {1: "cancelled", 2: {"roots": []}}


def test_a_call_aborted_before_it_asks_sends_nothing(state):
    session = new_session(state)
    call = RunningCall(session)
    call.abort(RequestCancelled("the client cancelled"))
    with pytest.raises(RequestCancelled):
        state.pending.ask_all(call, [("roots/list", {})], timeout=1)
    assert call.sink.sent == [] and state.pending.count() == 0


# -- StreamLogs and EventLog -------------------------------------------------------------------


def test_a_stream_replays_what_follows_an_event_id(state):
    contract.a_stream_replays_what_follows_an_event_id(state)


def test_a_bad_or_unknown_event_id_is_refused(state):
    contract.a_bad_or_unknown_event_id_is_refused(state)


def test_resuming_from_before_the_replay_buffer_is_gone(state):
    contract.resuming_from_before_the_replay_buffer_is_gone(state)


def test_a_new_standalone_stream_replaces_the_earlier_one(state):
    contract.a_new_standalone_stream_replaces_the_earlier_one(state)


def test_closing_a_sessions_streams_ends_the_standalone_one_and_forgets_them_all(state):
    contract.closing_a_sessions_streams_ends_the_standalone_one_and_forgets_them_all(state)


def test_an_unread_stream_is_abandoned_after_its_window(state):
    contract.an_unread_stream_is_abandoned_after_its_window(state)


# -- FanOut ------------------------------------------------------------------------------------


def listen(state, request_id, flags, uris=()):
    channel = Channel()
    supported = {"toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": True}
    acknowledged, kinds, wanted = state.fanout.honoured({**flags, "resourceSubscriptions": list(uris)}, supported)
    assert state.fanout.open(request_id, acknowledged, kinds, wanted, channel) is channel
    return channel


def test_a_listen_stream_is_acknowledged_then_hears_only_what_it_asked_for(state):
    tools = listen(state, 1, {"toolsListChanged": True})
    prompts = listen(state, 2, {"promptsListChanged": True})
    assert tools.sent[0]["method"] == "notifications/subscriptions/acknowledged"
    assert tools.sent[0]["params"]["notifications"] == {"toolsListChanged": True}
    assert tools.sent[0]["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": 1}
    assert state.fanout.list_changed("toolsListChanged") == 1
    assert [m["method"] for m in tools.sent[1:]] == ["notifications/tools/list_changed"]
    assert len(prompts.sent) == 1
    assert state.fanout.count() == 2


def test_resource_updates_reach_listen_streams_and_subscribed_sessions(state):
    channel = listen(state, "r", {}, uris=["file:///a"])
    session = new_session(state)
    assert session.subscribe("file:///a", 8)
    log = session.streams.open(STANDALONE)
    state.fanout.open_session(session.id, log, session.subscribed)
    assert state.fanout.resource_updated("file:///a") == 2
    assert state.fanout.resource_updated("file:///b") == 0
    assert channel.sent[-1]["method"] == "notifications/resources/updated"
    assert channel.sent[-1]["params"]["uri"] == "file:///a"
    assert log.position == 1, "the standalone stream got the notification as an event"
    state.fanout.drop_session(session.id)
    assert state.fanout.resource_updated("file:///a") == 1


def test_the_listen_cap_is_enforced_and_a_closed_stream_frees_its_place(state):
    first = listen(state, 1, {})
    listen(state, 2, {})
    with pytest.raises(ListenLimitReached, match="maximum of 2"):
        listen(state, 3, {})
    first.close()
    assert state.fanout.count() == 1
    listen(state, 3, {})


def test_closing_all_listen_streams_answers_each_request(state):
    channels = [listen(state, n, {}) for n in (7, 8)]
    assert state.fanout.close_all({"resultType": "complete"}) == 2
    for n, channel in zip((7, 8), channels):
        assert channel.final["id"] == n
        assert channel.final["result"]["resultType"] == "complete"
        assert channel.final["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == n
    assert state.fanout.count() == 0


def test_a_malformed_filter_is_refused(state):
    with pytest.raises(ValueError, match="must be an object"):
        state.fanout.honoured("tools", {})


def test_an_unknown_backend_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="ZEMCP_STATE_BACKEND='nowhere' names no state backend; choose one of: memory"):
        open_state(Settings(**SETTINGS, state_backend="nowhere"), Ended())


def test_the_backend_is_read_from_the_environment():
    assert Settings.from_env({"ZEMCP_STATE_BACKEND": "memory"}).state_backend == "memory"
    with pytest.raises(ValueError, match=r"state_backend \(ZEMCP_STATE_BACKEND\) must name a state backend"):
        Settings.from_env({"ZEMCP_STATE_BACKEND": "Redis://x"})


# -- what the contract asks beyond the basics -------------------------------------------------


def test_the_caps_are_the_settings(state):
    assert state.sessions.max_sessions == SETTINGS["max_sessions"]
    assert state.sessions.ttl == SETTINGS["session_ttl"]
    assert state.sessions.instance == SETTINGS["instance"]
    assert state.pending.max_pending == SETTINGS["max_pending"]
    assert state.pending.max_per_session == SETTINGS["max_pending_per_session"]
    assert state.fanout.max_streams == SETTINGS["max_listen_streams"]


def test_a_finished_stream_stays_resumable_for_its_window_then_is_forgotten(state):
    contract.a_finished_stream_stays_resumable_for_its_window_then_is_forgotten(state)


def test_a_forgotten_stream_cannot_be_resumed(state):
    contract.a_forgotten_stream_cannot_be_resumed(state)


def test_ending_a_connection_on_purpose_stops_its_reader_but_not_the_stream(state):
    contract.ending_a_connection_on_purpose_stops_its_reader_but_not_the_stream(state)


# -- the token buckets of the rate limits -------------------------------------------------


def rate_limit(text, scope=CLIENT_SCOPE):
    return Limit(scope, parse_rate(text, "contract"), "ZEMCP_RATE_LIMIT")


def test_a_bucket_gives_its_burst_then_tells_how_long_until_a_token(state):
    per_hour = rate_limit("3/hour")
    assert [state.limiter.take("address a", [per_hour]) for _ in range(3)] == [None, None, None]
    refused = state.limiter.take("address a", [per_hour])
    assert refused is not None and refused.limit == per_hour
    assert 1190 < refused.wait <= 1200, refused  # one token every 1200 s


def test_a_request_takes_from_every_bucket_or_from_none(state):
    client, tool = rate_limit("3/hour"), rate_limit("1/hour", "tool report")
    assert state.limiter.take("address a", [client, tool]) is None
    refused = state.limiter.take("address a", [client, tool])
    assert refused is not None and refused.limit == tool and 3590 < refused.wait <= 3600, refused
    # The refused call took nothing from the client's bucket: two tokens are left there.
    assert [state.limiter.take("address a", [client]) for _ in range(2)] == [None, None]
    assert state.limiter.take("address a", [client]).limit == client


def test_each_client_and_each_scope_has_a_bucket_of_its_own(state):
    one = rate_limit("1/hour")
    assert state.limiter.take("address a", [one]) is None
    assert state.limiter.take("address a", [one]) is not None
    assert state.limiter.take("address b", [one]) is None
    assert state.limiter.take("principal issuer alice", [one]) is None
    assert state.limiter.take("address a", [rate_limit("1/hour", "tool report")]) is None


def test_a_bucket_fills_again_at_its_rate(state):
    quick = rate_limit("20/second burst 1")
    assert state.limiter.take("address a", [quick]) is None
    refused = state.limiter.take("address a", [quick])
    assert refused is not None and 0 < refused.wait <= 0.05, refused
    time.sleep(refused.wait + 0.02)
    assert state.limiter.take("address a", [quick]) is None


def test_concurrent_takes_get_exactly_the_burst(state):
    per_hour = rate_limit("30/hour")
    granted = []
    start = threading.Barrier(4)

    def run():
        start.wait()
        granted.append(sum(state.limiter.take("address a", [per_hour]) is None for _ in range(20)))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(granted) == 4 and sum(granted) == 30, granted


# -- TaskStore -------------------------------------------------------------------------------


def task(task_id, *, client="c1", session=None, owner=None, ttl=60.0, created=None, poll=1.0):
    return TaskRecord(
        id=task_id,
        owner=owner,
        session=session,
        client=client,
        modern=session is None,
        tool="report",
        created=time.time() if created is None else created,
        ttl=ttl,
        poll=poll,
    )


def finish(record):
    record.status = "completed"
    record.result = {"content": [{"type": "text", "text": "done"}]}
    return True


def test_a_created_task_is_found_at_once_and_changes_apply_for_every_reader(state):
    state.tasks.create(task("t-1"))
    found = state.tasks.get("t-1")
    assert found is not None and found.status == "working" and found.tool == "report"
    found.status = "failed"
    assert state.tasks.get("t-1").status == "working", "a read is a copy"
    after = state.tasks.update("t-1", finish)
    assert after.status == "completed" and after.version == found.version + 1
    again = state.tasks.get("t-1")
    assert again.status == "completed" and again.result == {"content": [{"type": "text", "text": "done"}]}
    assert state.tasks.update("t-1", lambda record: False).version == after.version, "no change, no new version"
    assert state.tasks.get("t-unknown") is None and state.tasks.update("t-unknown", finish) is None


def test_the_task_caps_refuse_beyond_the_total_and_the_client_share(state):
    state.tasks.create(task("t-a", client="one"))
    with pytest.raises(TaskLimitReached, match="share of 1 tasks"):
        state.tasks.create(task("t-b", client="one"))
    state.tasks.create(task("t-c", client="two"))
    state.tasks.create(task("t-d", client=None))
    with pytest.raises(TaskLimitReached, match="maximum of 3 tasks"):
        state.tasks.create(task("t-e", client="three"))
    assert len(state.tasks) == 3


def test_a_session_lists_its_own_tasks_oldest_first(state):
    now = time.time()
    state.tasks.create(task("t-late", client=None, session="s1", created=now))
    state.tasks.create(task("t-early", client=None, session="s1", created=now - 5))
    state.tasks.create(task("t-other", client=None, session="s2"))
    assert [t.id for t in state.tasks.owned(None, "s1")] == ["t-early", "t-late"]
    assert state.tasks.owned("someone", "s1") == [], "another principal sees none of them"


def test_a_waiter_and_a_watcher_hear_of_a_change(state):
    state.tasks.create(task("t-w"))
    heard = []
    stop = state.tasks.watch("t-w", lambda record: heard.append(record.status))
    seen = state.tasks.get("t-w").version
    # Past a heartbeat (1 s), when a shared store looks at its watched records again: the
    # record as it was when watched is no change.
    threading.Timer(1.2, lambda: state.tasks.update("t-w", finish)).start()
    started = time.monotonic()
    changed = state.tasks.wait("t-w", seen, 5.0)
    assert changed.status == "completed" and time.monotonic() - started < 4.0
    deadline = time.monotonic() + 3
    while not heard and time.monotonic() < deadline:
        time.sleep(0.02)
    assert heard == ["completed"]
    stop()
    assert state.tasks.wait("t-w", changed.version, 0.1).version == changed.version


def test_a_finished_task_is_gone_after_its_ttl_and_a_running_one_stays(state):
    # A finished task is kept at least 1 s (three poll intervals) after its end, past a shorter ttl.
    state.tasks.create(task("t-done", ttl=0.3, client=None, poll=0.05))
    state.tasks.create(task("t-running", ttl=0.3, client=None, poll=0.05))
    state.tasks.update("t-done", finish)
    time.sleep(0.5)
    assert state.tasks.get("t-done") is not None, "a task just finished is still readable"
    time.sleep(0.8)
    state.tasks.sweep()
    assert state.tasks.get("t-done") is None
    assert state.tasks.get("t-running") is not None
