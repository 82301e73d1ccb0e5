"""HAProxy and nginx as configured in deploy/, in front of instances a, b and c.

Each test runs once per proxy (the ``stack`` fixture). A request reached its owner when the
proxy's log says the instance named by its session id served it, when no instance logged a
routing warning, and when an elicitation's answer, posted on another connection, reached the
handler: its result is ``server status`` of the owner's process.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import requests

from tests.support.clients import HandshakeClient
from tests.support.proxies import parse_pid

#: Sessions of the routing test, and how many run at once.
SESSIONS = 100
CONCURRENCY = 10
#: POSTs and DELETEs one :func:`full_session` sends: initialize, notifications/initialized,
#: tools/list, a plain tools/call, an eliciting tools/call, its answer, DELETE.
REQUESTS_PER_SESSION = 7
#: [seconds] longest time from sending an eliciting tools/call to reading elicitation/create.
ELICITATION_LATENCY_LIMIT = 1.0


def owner(client: HandshakeClient) -> str:
    """The instance named by the client's session id."""
    return client.session_id.partition(".")[0]


def initialized(stack) -> HandshakeClient:
    """A client with a session created through the proxy (declares elicitation)."""
    client = HandshakeClient(stack.proxy.url)
    response = client.initialize()
    assert response.status_code == 200, (response.status_code, response.text)
    return client


def elicit_round_trip(client: HandshakeClient) -> int:
    """An eliciting ze_execute answered with ``server status``; returns the pid in the result."""
    call, _, stream, ask = client.start_elicitation()
    answer = client.accept(ask["id"], {"command": "server status"})
    assert answer.status_code == 202, (answer.status_code, answer.text)
    result = stream.next_message()
    assert result is not None and result.get("id") == call["id"], result
    assert result["result"]["isError"] is False, result
    stream.close()
    return parse_pid(result["result"]["content"][0]["text"])


def plain_calls(client: HandshakeClient) -> None:
    """tools/list and ``session show``, both answered by the session's owner."""
    tools = client.rpc("tools/list")["tools"]
    assert [t["name"] for t in tools] == ["ze_execute"], tools
    assert "elicitation: yes" in client.command_text("session show")


@dataclass(frozen=True)
class SessionOutcome:
    """What one session learned: its owner by id, and the pid that ran its elicitation."""

    owner: str
    elicit_pid: int


def full_session(stack) -> SessionOutcome:
    """initialize, tools/list, a plain call, an eliciting call answered on another connection, DELETE."""
    client = initialized(stack)
    try:
        plain_calls(client)
        pid = elicit_round_trip(client)
        deleted = client.delete()
        assert deleted.status_code == 204, (deleted.status_code, deleted.text)
        return SessionOutcome(owner(client), pid)
    finally:
        client.close()


def test_every_request_of_every_session_reaches_its_owner(stack):
    """100 sessions, 10 at a time: no request strays, every elicitation completes on its owner."""
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        outcomes = list(pool.map(lambda _: full_session(stack), range(SESSIONS)))

    owners = Counter(o.owner for o in outcomes)
    assert set(owners) == set(stack.instances), owners
    # initialize goes round robin, so every instance gets a fair share.
    assert min(owners.values()) >= SESSIONS // 5, owners
    wrong_pid = [o for o in outcomes if stack.owner_of(o.elicit_pid) != o.owner]
    assert not wrong_pid, f"elicitations that ran outside their owner: {wrong_pid[:5]}"

    routed = stack.proxy.wait_routed(SESSIONS * REQUESTS_PER_SESSION)
    assert len(routed) + stack.proxy.unlogged() == SESSIONS * REQUESTS_PER_SESSION
    assert all(r.status in (200, 202, 204) for r in routed), Counter(r.status for r in routed)
    strays = [r for r in routed if r.owner is not None and r.served_by != r.owner]
    assert not strays, f"{len(strays)} requests served by another instance than their owner: {strays[:5]}"
    # Each instance answered as many initializes as it owns sessions (less any unlogged).
    initializes = Counter(r.served_by for r in routed if r.owner is None)
    missing = {name: owners[name] - initializes[name] for name in owners}
    assert min(missing.values()) >= 0 and sum(missing.values()) <= stack.proxy.unlogged(), (initializes, owners)
    for instance in stack.instances.values():
        assert instance.routing_warnings() == [], instance.name


def test_sessions_of_a_stopped_instance_get_404_and_move(stack):
    """After c stops, its sessions get 404 and re-initialize on a or b; a's and b's go on."""
    clients: list[HandshakeClient] = []
    try:
        while min(Counter(owner(c) for c in clients).get(n, 0) for n in stack.instances) < 3:
            assert len(clients) < 60, Counter(owner(c) for c in clients)
            client = initialized(stack)
            clients.append(client)
            plain_calls(client)
        routed_before = len(stack.proxy.wait_routed(len(clients) * 4))

        stack.instances["c"].stop()

        survivors = [c for c in clients if owner(c) != "c"]
        orphans = [c for c in clients if owner(c) == "c"]
        for client in orphans:
            response = client.request("tools/list")
            assert response.status_code == 404, (response.status_code, response.text)
            client.session_id = None
            again = client.initialize()
            assert again.status_code == 200, (again.status_code, again.text)
            assert owner(client) in ("a", "b"), client.session_id
        for client in survivors + orphans:
            plain_calls(client)
            assert stack.owner_of(elicit_round_trip(client)) == owner(client)

        after = stack.proxy.wait_routed(routed_before + 1)[routed_before:]
        assert "c" not in {r.served_by for r in after}, after
        assert not [r for r in after if r.owner in ("a", "b") and r.served_by != r.owner], after
        for name in ("a", "b"):
            # Only requests of c's dead sessions may have reached a live instance.
            assert {owner_name for owner_name, _ in stack.instances[name].routing_warnings()} <= {"c"}, name
    finally:
        for client in clients:
            client.close()


def test_elicitation_reaches_the_client_within_one_second(stack):
    """From sending an eliciting tools/call to reading elicitation/create takes under 1 s, on every instance."""
    latencies: dict[str, list[float]] = {name: [] for name in stack.instances}
    sessions = 0
    while min(len(v) for v in latencies.values()) < 2:
        sessions += 1
        assert sessions <= 30, latencies
        client = initialized(stack)
        try:
            started = time.monotonic()
            call, _, stream, ask = client.start_elicitation()
            latencies[owner(client)].append(time.monotonic() - started)
            assert client.accept(ask["id"], {"command": "help"}).status_code == 202
            assert stream.next_message()["id"] == call["id"]
        finally:
            client.close()
    slowest = max(max(v) for v in latencies.values())
    assert slowest < ELICITATION_LATENCY_LIMIT, latencies


def test_a_resuming_get_reaches_the_owner_of_its_stream(stack):
    """Drop an eliciting call's stream, resume it with GET and Last-Event-ID through the proxy,
    answer: every instance's sessions get their result on the resumed stream, from their owner."""
    resumed: Counter[str] = Counter()
    sessions = 0
    while min(resumed.get(name, 0) for name in stack.instances) < 2:
        sessions += 1
        assert sessions <= 30, resumed
        client = initialized(stack)
        try:
            call, _, stream, ask = client.start_elicitation()
            last = stream.last_event_id
            assert last, "the stream's events carry no id"
            stream.close()
            response, again = client.get_stream(last)
            assert response.status_code == 200 and again is not None, (response.status_code, response.text)
            assert client.accept(ask["id"], {"command": "server status"}).status_code == 202
            final = again.next_message()
            assert final is not None and final.get("id") == call["id"], final
            assert stack.owner_of(parse_pid(final["result"]["content"][0]["text"])) == owner(client)
            resumed[owner(client)] += 1
        finally:
            client.close()
    routed = stack.proxy.wait_routed(sessions * 5)
    strays = [r for r in routed if r.owner is not None and r.served_by != r.owner]
    assert not strays, strays[:5]
    for instance in stack.instances.values():
        assert instance.routing_warnings() == [], instance.name


#: Eliciting 2026-07-28 calls of the stateless routing test.
MODERN_CALLS = 30


def modern_post(url: str, request_id: int, arguments: dict, extra: dict | None = None) -> dict:
    """One stateless ``tools/call`` of ``ze_execute`` on a fresh connection; returns its result."""
    params = {
        "name": "ze_execute",
        "arguments": arguments,
        **(extra or {}),
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            "io.modelcontextprotocol/clientInfo": {"name": f"stateless-{request_id}", "version": "1"},
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "ze_execute",
        "Connection": "close",
    }
    response = requests.post(
        url,
        json={"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params},
        headers=headers,
        timeout=10,
    )
    assert response.status_code == 200 and "Mcp-Session-Id" not in response.headers, (
        response.status_code,
        response.text,
    )
    return response.json()["result"]


def modern_call(url: str, n: int) -> int:
    """Round 1 asks for the command, round 2 answers ``server status``; returns the pid that ran round 2."""
    first = modern_post(url, 2 * n, {})
    assert first["resultType"] == "input_required" and "command" in first["inputRequests"], first
    done = modern_post(
        url,
        2 * n + 1,
        {},
        {
            "requestState": first["requestState"],
            "inputResponses": {"command": {"action": "accept", "content": {"command": "server status"}}},
        },
    )
    assert done["resultType"] == "complete" and done["isError"] is False, done
    return parse_pid(done["content"][0]["text"])


def test_stateless_rounds_are_served_by_any_instance(stack):
    """2026-07-28 requests carry no session id: the proxy spreads them, and each round completes wherever it lands."""
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        pids = list(pool.map(lambda n: modern_call(stack.proxy.url, n), range(MODERN_CALLS)))
    served = Counter(stack.owner_of(pid) for pid in pids)
    assert set(served) == set(stack.instances), served
    routed = stack.proxy.wait_routed(2 * MODERN_CALLS)
    assert all(r.owner is None and r.status == 200 for r in routed), routed[:5]
    assert len({r.served_by for r in routed}) == len(stack.instances), Counter(r.served_by for r in routed)
