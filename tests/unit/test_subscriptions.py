"""The listen-stream hub (zemcp.state.subscriptions): filters, fan-out, caps and graceful ends."""

import pytest

from zemcp.config import StreamLimits
from zemcp.replies.sinks import ReplySink
from zemcp.state.eventlogs import EventLog
from zemcp.state.fanout import ListenLimitReached
from zemcp.state.streamlogs import STANDALONE
from zemcp.state.subscriptions import SubscriptionHub

ALL = {
    "toolsListChanged": True,
    "promptsListChanged": True,
    "resourcesListChanged": True,
    "resourceSubscriptions": True,
}


def frames(sink, n):
    it = sink.frames(0.01)
    return [next(it) for _ in range(n)]


def test_the_acknowledgement_holds_only_what_is_honoured():
    """Flags the server cannot announce, and unknown ones, are left out of the acknowledged filter."""
    hub = SubscriptionHub(4)
    ack, kinds, uris = hub.honoured(
        {"toolsListChanged": True, "promptsListChanged": True, "x": True, "resourceSubscriptions": ["a://1", "a://1"]},
        {"toolsListChanged": True, "resourceSubscriptions": True},
    )
    assert ack == {"toolsListChanged": True, "resourceSubscriptions": ["a://1"]}
    assert kinds == {"notifications/tools/list_changed"} and uris == {"a://1"}


@pytest.mark.parametrize(
    "requested",
    ["x", {"toolsListChanged": 1}, {"resourceSubscriptions": "a://1"}, {"resourceSubscriptions": ["a"] * 257}],
)
def test_a_bad_filter_is_refused(requested):
    """A filter that is not an object of booleans and a URI list is a ValueError."""
    with pytest.raises(ValueError):
        SubscriptionHub(4).honoured(requested, ALL)


def test_notifications_reach_only_the_streams_that_asked():
    """list_changed and resource_updated go to matching streams, tagged with their subscription id."""
    hub = SubscriptionHub(4)
    tools = hub.open(
        7, {"toolsListChanged": True}, frozenset({"notifications/tools/list_changed"}), frozenset(), ReplySink()
    )
    res = hub.open("s", {}, frozenset(), frozenset({"a://1"}), ReplySink())
    assert hub.list_changed("toolsListChanged") == 1
    assert hub.resource_updated("a://1") == 1 and hub.resource_updated("a://2") == 0
    ack, change = frames(tools, 2)
    assert ack["method"] == "notifications/subscriptions/acknowledged" and ack["params"]["_meta"] == {
        "io.modelcontextprotocol/subscriptionId": 7
    }
    assert change == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 7}},
    }
    assert frames(res, 2)[1]["params"]["uri"] == "a://1"


def test_the_cap_counts_open_streams():
    """Beyond max_streams open fails; closing a stream frees its slot."""
    hub = SubscriptionHub(1)
    sink = hub.open(1, {}, frozenset(), frozenset(), ReplySink())
    with pytest.raises(ListenLimitReached, match="ZEMCP_MAX_LISTEN_STREAMS"):
        hub.open(2, {}, frozenset(), frozenset(), ReplySink())
    sink.close()
    assert hub.count() == 0
    hub.open(3, {}, frozenset(), frozenset(), ReplySink())


def test_close_all_answers_each_listen_request():
    """A server-side end finishes each stream with a result for its request id."""
    hub = SubscriptionHub(2)
    sink = hub.open(9, {}, frozenset(), frozenset(), ReplySink())
    assert hub.close_all({"resultType": "complete"}) == 1
    assert list(sink.frames(0.01))[-1] == {
        "jsonrpc": "2.0",
        "id": 9,
        "result": {"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": 9}},
    }


def test_session_streams_get_every_list_change_and_their_subscriptions_untagged():
    """A session's standalone stream hears every list change and the updates of the URIs the
    session subscribed to, without a subscription id; it takes no listen-stream place."""
    hub = SubscriptionHub(0)
    log = EventLog(STANDALONE, StreamLimits())
    hub.open_session("s1", log, lambda uri: uri == "a://watched")
    assert hub.count() == 0
    assert hub.list_changed("promptsListChanged") == 1
    assert hub.resource_updated("a://watched") == 1
    assert hub.resource_updated("a://other") == 0
    token = log.attach()
    log.finish(None)
    events = [e for e in log.read(token, 0, 0.01) if isinstance(e, bytes)]
    assert [e.split(b"data: ")[1].strip() for e in events] == [
        b'{"jsonrpc":"2.0","method":"notifications/prompts/list_changed","params":{}}',
        b'{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://watched"}}',
    ]
    # An ended stream leaves the hub at the next fan-out.
    assert hub.list_changed("toolsListChanged") == 0


def test_a_session_has_one_standalone_stream_in_the_hub():
    """Registering a session's stream again replaces the earlier one; the session's end drops it."""
    hub = SubscriptionHub(0)
    first, second = EventLog(STANDALONE, StreamLimits()), EventLog(STANDALONE, StreamLimits())
    hub.open_session("s1", first, lambda uri: False)
    hub.open_session("s1", second, lambda uri: False)
    assert hub.list_changed("toolsListChanged") == 1
    assert first.position == 0 and second.position == 1
    hub.drop_session("s1")
    assert hub.list_changed("toolsListChanged") == 0
