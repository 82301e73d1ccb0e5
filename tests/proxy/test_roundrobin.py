"""deploy/nginx-roundrobin.conf in front of instances a, b and c with the default in-process state.

The file spreads every request round robin and routes nothing by session; it is meant for
instances that share their state in Redis (``ZEMCP_REDIS_URL``), which tests with the
``start_stack("nginx-roundrobin", redis_url=...)`` fixture of tests/support/stacks.py
start. Without Redis, as here, it serves 2026-07-28 clients, which are stateless, and not
handshake-era sessions, whose requests reach instances that do not know them.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from tests.support.clients import HandshakeClient, ModernClient
from tests.support.proxies import Stack, parse_pid

#: Eliciting 2026-07-28 calls, and how many run at once.
MODERN_CALLS = 30
CONCURRENCY = 10
#: Requests of the handshake-era session after its initialize.
SESSION_REQUESTS = 9


def modern_round_trip(stack: Stack, n: int) -> str:
    """Both rounds of an eliciting ze_execute through the proxy, answered with ``server status``;
    returns the instance that ran round 2."""
    client = ModernClient(stack.proxy.url, name=f"roundrobin-{n}")
    final = client.answer_command(client.ask_command(), "server status")
    assert final["resultType"] == "complete" and final["isError"] is False, final
    return stack.owner_of(parse_pid(final["content"][0]["text"]))


def test_roundrobin_serves_2026_calls_on_every_instance_without_shared_state(start_stack):
    """2026-07-28 calls through round robin complete with the in-process state: each round is
    served wherever it lands, all three instances serve rounds, and none logs a routing warning."""
    stack = start_stack("nginx-roundrobin")
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        second_rounds = Counter(pool.map(lambda n: modern_round_trip(stack, n), range(MODERN_CALLS)))

    assert set(second_rounds) == set(stack.instances), second_rounds
    routed = stack.proxy.wait_routed(2 * MODERN_CALLS)
    assert len(routed) == 2 * MODERN_CALLS, routed
    assert all(r.owner is None and r.status == 200 for r in routed), routed[:5]
    assert {r.served_by for r in routed} == set(stack.instances), Counter(r.served_by for r in routed)
    for instance in stack.instances.values():
        assert instance.routing_warnings() == [], instance.name


def test_roundrobin_without_shared_state_breaks_handshake_sessions(start_stack):
    """A handshake-era session behind round robin without Redis: only the requests that happen
    to reach its owner are served; the others get 404 and a routing warning on their instance."""
    stack = start_stack("nginx-roundrobin")
    client = HandshakeClient(stack.proxy.url)
    try:
        response = client.initialize(initialized=False)
        assert response.status_code == 200, (response.status_code, response.text)
        owner = client.session_id.partition(".")[0]
        statuses = [client.request("tools/list").status_code for _ in range(SESSION_REQUESTS)]
    finally:
        client.close()

    routed = stack.proxy.wait_routed(1 + SESSION_REQUESTS)
    assert [r.status for r in routed[1:]] == statuses, (routed, statuses)
    assert routed[0].owner is None and routed[0].served_by == owner, routed[0]
    session_requests = routed[1:]
    assert all(r.owner == owner for r in session_requests), session_requests
    # One client connection stays on one nginx worker, whose round robin sends every third
    # request to the owner.
    served = Counter((r.served_by == owner, r.status) for r in session_requests)
    assert served == {(True, 200): SESSION_REQUESTS // 3, (False, 404): SESSION_REQUESTS - SESSION_REQUESTS // 3}, (
        session_requests
    )
    strays = Counter(r.served_by for r in session_requests if r.served_by != owner)
    for name, count in strays.items():
        assert stack.instances[name].routing_warnings() == [(owner, name)] * count, name
