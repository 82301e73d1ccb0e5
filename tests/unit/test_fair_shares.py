"""Fair shares per client (zemcp.state.shares), the budgets that use them, and client addresses."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

import pytest

from zemcp.auth.principal import Principal
from zemcp.config import Settings
from zemcp.core.admission import Admission, Busy
from zemcp.http.forwarded import ClientAddresses, trusted_networks
from zemcp.replies.sinks import ReplySink
from zemcp.state.correlation import CorrelationTable
from zemcp.state.shares import Shares, ShareTaken, client_key, share_of
from zemcp.state.streamlogs import STANDALONE
from zemcp.state.subscriptions import SubscriptionHub
from zemcp.state.waitingcalls import CapacityError


@pytest.mark.parametrize(
    ("budget", "share", "places"), [(24, 0.75, 18), (16, 0.75, 12), (4, 0.75, 3), (2, 0.75, 1), (1, 0.5, 1), (6, 1, 6)]
)
def test_a_share_is_the_floor_of_its_fraction_and_at_least_one(budget, share, places):
    assert share_of(budget, share) == places


def test_shares_count_per_client_and_refuse_beyond_the_share():
    shares = Shares(4, 0.5, "things")
    for _ in range(2):
        shares.check("a")
        shares.take("a")
    with pytest.raises(ShareTaken) as refused:
        shares.check("a")
    assert refused.value.status == 429 and refused.value.retry_after == 2
    assert "this client (a) already holds 2 of this process's 4 things" in str(refused.value)
    shares.check("b")  # another client is not held back
    shares.check(None)  # no client (stdio): no share
    shares.give("a")
    shares.check("a")
    assert shares.held("a") == 1 and shares.clients() == 1


def test_a_share_of_the_whole_budget_never_refuses():
    shares = Shares(2, 1.0, "things")
    for _ in range(5):
        shares.check("a")
        shares.take("a")


def test_the_client_key_is_the_principal_else_the_address():
    assert client_key("issuer|alice", "10.0.0.1") == "principal issuer|alice"
    assert client_key(None, "10.0.0.1") == "address 10.0.0.1"
    assert client_key(None, "") == "address unknown"


def test_a_user_has_one_share_whichever_oauth_client_its_token_names():
    one = Principal(subject="alice", client_id="c1", issuer="https://as.example")
    other_client = Principal(subject="alice", client_id="c2", issuer="https://as.example")
    assert one.key != other_client.key, "sessions stay bound to the client too"
    assert one.user == other_client.user
    assert Principal(subject="alice", issuer="https://other.example").user != one.user
    assert Principal(subject="bob", issuer="https://as.example").user != one.user


def _admission(**settings) -> Admission:
    values = Settings(**settings)
    return Admission(values, SubscriptionHub(values.listen_budget))


def test_running_calls_count_against_their_client_and_free_their_place_when_done():
    admission = _admission(threads=8)  # a call budget of 6: a client may hold 4
    releases = [admission.enter("address 10.0.0.1") for _ in range(4)]
    with pytest.raises(ShareTaken):
        admission.enter("address 10.0.0.1")
    other = admission.enter("address 10.0.0.2")
    releases[0]()
    admission.enter("address 10.0.0.1")
    assert admission.running == 5
    other()
    assert admission.running == 4
    # The process's budget still holds whoever asks.
    admission.enter("address 10.0.0.3")
    admission.enter("address 10.0.0.3")
    with pytest.raises(Busy) as busy:
        admission.enter("address 10.0.0.4")
    assert type(busy.value) is Busy and busy.value.status == 503


def test_an_admitted_job_runs_on_a_direct_sink_or_the_handler_pool():
    admission = _admission(threads=8)
    ran = threading.Event()
    job = ran.set
    direct = SimpleNamespace(direct=True, job=None)
    admission.run(job, direct)
    assert direct.job is job and not ran.is_set(), "a direct sink's job waits for the request's thread"
    admission.run(job, SimpleNamespace())
    assert ran.wait(5), "any other sink's job runs on the handler pool"


def test_streams_count_in_their_clients_share_of_the_budget_and_of_standalone_streams():
    admission = _admission(threads=32)  # 4 standalone streams: a client may hold 3
    releases = [admission.hold_thread(STANDALONE, client="address a") for _ in range(3)]
    with pytest.raises(ShareTaken) as refused:
        admission.hold_thread(STANDALONE, client="address a")
    assert "standalone GET streams" in str(refused.value)
    admission.hold_thread(STANDALONE, client="address b")
    releases[0]()
    admission.hold_thread(STANDALONE, client="address a")
    # A takeover passes a place on without a check.
    admission.hold_thread(STANDALONE, force=True, client="address a")
    assert admission.standalone == 5


def test_listen_streams_give_their_clients_place_back_when_they_close():
    admission = _admission(threads=32)  # 4 listen streams: a client may hold 3
    hub = admission._fanout
    sinks = []
    for n in range(3):
        sink = ReplySink()
        admission.open_stream(lambda sink=sink, n=n: hub.open(n, {}, frozenset(), frozenset(), sink), "address a")
        sinks.append(sink)
    with pytest.raises(ShareTaken):
        admission.open_stream(lambda: hub.open(9, {}, frozenset(), frozenset(), ReplySink()), "address a")
    sinks[0].close()
    admission.open_stream(lambda: hub.open(10, {}, frozenset(), frozenset(), ReplySink()), "address a")


def _call(client):
    return SimpleNamespace(sink=ReplySink(), client_key=client)


def test_pending_elicitations_are_shared_out_per_client_across_its_sessions():
    table = CorrelationTable(4, 4, client_share=0.5)
    sessions = [SimpleNamespace(id=f"s{n}") for n in range(3)]
    first = table.register(sessions[0], _call("address a"))
    table.register(sessions[1], _call("address a"))
    with pytest.raises(CapacityError) as refused:
        table.register(sessions[2], _call("address a"))
    assert "this client (address a) already has 2 of the process's 4, its fair share (ZEMCP_CLIENT_SHARE)" in str(
        refused.value
    )
    table.register(sessions[2], _call("address b"))
    table.discard(first)
    table.register(sessions[2], _call("address a"))
    table.register(sessions[2], _call(None))  # no client: only the process's and session's caps
    assert table.count() == 4


def test_client_share_and_forwarded_allow_ips_settings_are_checked():
    assert Settings().client_share == 0.75 and Settings().forwarded_allow_ips == ()
    parsed = Settings.from_env({"ZEMCP_CLIENT_SHARE": "0.5", "ZEMCP_FORWARDED_ALLOW_IPS": "127.0.0.1, 10.0.0.0/8"})
    assert parsed.client_share == 0.5 and parsed.forwarded_allow_ips == ("127.0.0.1", "10.0.0.0/8")
    assert Settings(forwarded_allow_ips="*, ::1").forwarded_allow_ips == ("*", "::1")
    for bad in (0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="client_share .ZEMCP_CLIENT_SHARE. must be above 0 and at most 1"):
            Settings(client_share=bad)
    with pytest.raises(ValueError, match="ZEMCP_CLIENT_SHARE='half' is not a number$"):
        Settings.from_env({"ZEMCP_CLIENT_SHARE": "half"})
    with pytest.raises(ValueError, match="ZEMCP_FORWARDED_ALLOW_IPS.*got 'proxy.local'"):
        Settings(forwarded_allow_ips=("proxy.local",))


def test_forwarded_addresses_are_believed_only_from_trusted_proxies(caplog):
    trusted = ClientAddresses(trusted_networks(["127.0.0.1", "10.0.0.0/8"]))
    through = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "198.51.100.7, 203.0.113.9, 10.1.2.3"}
    # Read from the right: 10.1.2.3 is a trusted proxy, 203.0.113.9 the client; the rest is the client's word.
    assert trusted.of(through) == "203.0.113.9"
    assert trusted.of({"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "10.0.0.5"}) == "10.0.0.5"
    assert trusted.of({"REMOTE_ADDR": "127.0.0.1"}) == "127.0.0.1"
    assert trusted.of({"REMOTE_ADDR": "192.0.2.1", "HTTP_X_FORWARDED_FOR": "203.0.113.9"}) == "192.0.2.1"
    anyone = ClientAddresses(trusted_networks(["*"]))
    assert anyone.of({"REMOTE_ADDR": "192.0.2.1", "HTTP_X_FORWARDED_FOR": "203.0.113.9"}) == "203.0.113.9"
    # "*" trusts the peer for one hop: what the client wrote to the left is not believed.
    forged = {"REMOTE_ADDR": "192.0.2.1", "HTTP_X_FORWARDED_FOR": "10.9.9.1, 203.0.113.9"}
    assert anyone.of(forged) == "203.0.113.9"
    # Every hop trusted: the walk ends at the leftmost address a trusted proxy wrote.
    chain = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "10.0.0.7, 10.0.0.5"}
    assert trusted.of(chain) == "10.0.0.7"
    # An entry that is no address was written by the hop to its right, which is the client.
    garbage = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "garbage-1, 10.0.0.5"}
    assert trusted.of(garbage) == "10.0.0.5"
    assert trusted.of({"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "garbage"}) == "127.0.0.1"
    assert trusted.of({"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "[::1]"}) == "[::1]"
    nobody = ClientAddresses(trusted_networks([]))
    with caplog.at_level(logging.WARNING, logger="zemcp.http"):
        for _ in range(3):
            assert nobody.of({"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.9"}) == "127.0.0.1"
    warnings = [r.getMessage() for r in caplog.records if "ZEMCP_FORWARDED_ALLOW_IPS" in r.getMessage()]
    assert len(warnings) == 1 and "from 127.0.0.1" in warnings[0], warnings
