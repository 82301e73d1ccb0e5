"""Sessions: ids, capability bit, registry caps, lookup errors and idle expiry (zemcp.state.session)."""

import os

import pytest

from zemcp.eras.handshake.call import Call
from zemcp.replies.sinks import ReplySink
from zemcp.state import workers
from zemcp.state.registry import SessionRegistry
from zemcp.state.session import Session, fingerprint
from zemcp.state.sessionstore import SessionLimitReached, SessionNotFound, SessionRequired


def registry(max_sessions=10, ttl=60, ended=None):
    return SessionRegistry(max_sessions, ttl, lambda s, why: (ended if ended is not None else []).append((s.id, why)))


def test_ids_are_instance_worker_and_random_visible_ascii():
    """Ids are '<instance>.<worker tag>.' plus 32 base64url characters (192 bits), visible ASCII, distinct."""
    ids = {Session("2025-06-18", {}, {}, "node-a").id for _ in range(200)}
    assert len(ids) == 200
    for i in ids:
        instance, worker, token = i.split(".")
        assert (instance, worker, len(token)) == ("node-a", workers.tag(os.getpid()), 32)
        assert all(0x21 <= ord(c) <= 0x7E for c in i)


def test_foreign_instance_is_not_found_and_logged(caplog):
    """An id minted by another instance is a 404 for the client and a warning naming both instances."""
    reg = SessionRegistry(10, 60, lambda s, why: None, instance="b")
    with pytest.raises(SessionNotFound):
        reg.get("a.abcdef")
    (record,) = [r for r in caplog.records if r.name == "zemcp.session"]
    assert record.levelname == "WARNING"
    assert "instance 'a' reached instance 'b'" in record.getMessage() and "Mcp-Session-Id" in record.getMessage()
    caplog.clear()
    with pytest.raises(SessionNotFound):
        reg.get("b.gone")
    assert not [r for r in caplog.records if r.name == "zemcp.session"], "own ended sessions are not routing mistakes"


@pytest.mark.parametrize(
    "capabilities, supported",
    [
        ({"elicitation": {}}, True),
        ({"elicitation": {"form": {}}}, True),
        ({}, False),
        ({"elicitation": None}, False),
        ({"elicitation": True}, False),
        ({"elicitation": []}, False),
    ],
)
def test_elicitation_bit_needs_an_object(capabilities, supported):
    """Only a JSON object under capabilities.elicitation declares the capability."""
    assert Session("2025-06-18", {}, capabilities).client_supports_elicit() is supported


def test_lookup_errors_say_what_to_do():
    """A missing id and an unknown id raise different errors that tell the client to initialize."""
    reg = registry()
    with pytest.raises(SessionRequired, match="send initialize first"):
        reg.get(None)
    with pytest.raises(SessionNotFound, match="send initialize again"):
        reg.get("nope")


def test_cap_and_end():
    """The cap refuses new sessions; ending one frees its slot and reports why."""
    ended = []
    reg = registry(max_sessions=2, ended=ended)
    a = reg.create("2025-06-18", {}, {})
    reg.create("2025-06-18", {}, {})
    with pytest.raises(SessionLimitReached, match="maximum of 2 sessions"):
        reg.create("2025-06-18", {}, {})
    assert reg.end(a.id, "deleted by the client") and not reg.end(a.id, "again")
    assert ended == [(a.id, "deleted by the client")] and a.ended == "deleted by the client"
    assert a.id not in reg
    reg.create("2025-06-18", {}, {})


def test_sweep_ends_idle_sessions_but_not_busy_ones():
    """Sessions idle past the TTL end; one with a running request does not."""
    ended = []
    reg = registry(ttl=10, ended=ended)
    idle, busy = reg.create("2025-06-18", {}, {}), reg.create("2025-06-18", {}, {})
    call = busy.begin(Call(busy, 1, ReplySink()))
    far = idle._last_seen + 11
    assert reg.sweep(far) == 1
    assert ended == [(idle.id, "expired")] and busy.id in reg
    busy.finish(call)
    assert reg.sweep(busy._last_seen + 11) == 1


def test_request_ids_cannot_be_reused_while_running():
    """A second running request with the same id is refused."""
    s = Session("2025-06-18", {}, {})
    call = s.begin(Call(s, 5, ReplySink()))
    with pytest.raises(ValueError, match="already in use"):
        s.begin(Call(s, 5, ReplySink()))
    s.finish(call)
    s.begin(Call(s, 5, ReplySink()))


def test_fingerprint_is_short_and_stable():
    """A fingerprint is 12 hex characters, the same for the same id, and does not contain it."""
    assert fingerprint("abc") == fingerprint("abc") != fingerprint("abd")
    assert len(fingerprint("abc")) == 12 and "abc" not in fingerprint("abc")


@pytest.mark.parametrize(
    "version, declared, form, url",
    [
        ("2025-06-18", {}, True, False),
        ("2025-06-18", {"url": {}}, True, False),
        ("2025-11-25", {}, True, False),
        ("2025-11-25", {"form": {}}, True, False),
        ("2025-11-25", {"url": {}}, False, True),
        ("2025-11-25", {"form": {}, "url": {}}, True, True),
        ("2025-11-25", None, False, False),
    ],
)
def test_elicitation_modes_follow_the_version(version, declared, form, url):
    """From 2025-11-25 the capability names its modes and {} means form only; before, any object means form."""
    caps = {} if declared is None else {"elicitation": declared}
    s = Session(version, {}, caps)
    assert (s.client_supports_elicit("form"), s.client_supports_elicit("url")) == (form, url)


def test_client_supports_needs_an_object():
    """sampling and roots count as declared only as JSON objects."""
    s = Session("2025-11-25", {}, {"sampling": {}, "roots": True})
    assert s.client_supports("sampling") and not s.client_supports("roots") and not s.client_supports("x")


def test_no_request_begins_in_an_ended_session():
    """A request that looked the session up just before it ended cannot begin in it."""
    reg = registry()
    s = reg.create("2025-06-18", {}, {})
    reg.end(s.id, "deleted by the client")
    with pytest.raises(SessionNotFound, match="ended while this request arrived"):
        s.begin(Call(s, 1, ReplySink()))


def test_sweep_spares_a_session_that_became_busy():
    """A session listed as idle that starts a request before it is ended stays live."""
    reg = registry(ttl=10)
    s = reg.create("2025-06-18", {}, {})
    s.begin(Call(s, 1, ReplySink()))
    assert reg.sweep(s._last_seen + 11) == 0 and s.id in reg
