"""The correlation table of pending server-to-client requests (zemcp.state.correlation)."""

import threading
from types import SimpleNamespace

import pytest

from zemcp.protocol import jsonrpc
from zemcp.replies.sinks import ReplySink
from zemcp.state.correlation import CorrelationTable
from zemcp.state.session import Session
from zemcp.state.waitingcalls import CapacityError


def session():
    return Session("2025-06-18", {}, {"elicitation": {}})


def waiter():
    """What the table needs of a waiting call: a reply sink to tick while it waits."""
    return SimpleNamespace(sink=ReplySink(), client_key=None)


def accept(id_):
    return jsonrpc.Response(id_, {"action": "accept", "content": {}}, None)


def test_ids_are_unique_strings():
    """Every registered request gets a distinct string id."""
    table, s = CorrelationTable(100, 100), session()
    ids = {table.register(s, waiter()).id for _ in range(50)}
    assert len(ids) == 50 and all(isinstance(i, str) for i in ids)


def test_resolve_reaches_only_the_owning_session():
    """An answer under another session's id, or for an unknown id, is dropped."""
    table, a, b = CorrelationTable(10, 10), session(), session()
    pending = table.register(a, waiter())
    assert not table.resolve(b.id, accept(pending.id))
    assert not table.resolve(a.id, accept("zemcp-999"))
    assert not table.resolve(a.id, accept(7))
    assert table.resolve(a.id, accept(pending.id))
    assert table.wait(pending, 1).result["action"] == "accept"
    assert not table.resolve(a.id, accept(pending.id)), "a second answer must be dropped"


def test_wait_blocks_until_resolved_from_another_thread():
    """The waiter wakes when another thread resolves its entry."""
    table, s = CorrelationTable(10, 10), session()
    pending = table.register(s, waiter())
    timer = threading.Timer(0.05, table.resolve, (s.id, accept(pending.id)))
    timer.start()
    assert table.wait(pending, 5).id == pending.id
    timer.join()


def test_wait_times_out_and_late_answer_is_dropped():
    """A wait past its timeout raises TimeoutError; an answer after that resolves nothing."""
    table, s = CorrelationTable(10, 10), session()
    pending = table.register(s, waiter())
    with pytest.raises(TimeoutError):
        table.wait(pending, 0.05)
    assert not table.resolve(s.id, accept(pending.id))


def test_caps_per_session_and_per_process():
    """Registering beyond either cap raises CapacityError naming the cap; discard frees a slot."""
    table, a, b = CorrelationTable(3, 2), session(), session()
    p1 = table.register(a, waiter())
    table.register(a, waiter())
    with pytest.raises(CapacityError, match="per-session cap"):
        table.register(a, waiter())
    table.register(b, waiter())
    with pytest.raises(CapacityError, match="process cap"):
        table.register(b, waiter())
    assert (table.count(), table.count(a.id), table.count(b.id)) == (3, 2, 1)
    table.discard(p1)
    table.discard(p1)
    assert (table.count(), table.count(a.id)) == (2, 1)
    table.register(b, waiter())


def test_ending_a_call_ends_only_its_unresolved_waits():
    """end_call ends the waits of that call with the reason and leaves others alone; ended and resolved entries are not ended again."""
    table, s = CorrelationTable(10, 10), session()
    call_a, call_b = waiter(), waiter()
    pa, pb = table.register(s, call_a), table.register(s, call_b)
    reason = RuntimeError("gone")
    assert table.end_call(call_a, reason) == 1
    with pytest.raises(RuntimeError, match="gone"):
        table.wait(pa, 1)
    assert table.resolve(s.id, accept(pb.id))
    assert table.end_session(s.id, reason) == 0, "resolved and abandoned entries are not ended again"
