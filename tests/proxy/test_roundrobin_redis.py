"""Three instances sharing their sessions in Redis behind deploy/nginx-roundrobin.conf: plain
round robin, no session routing, and every handshake-era request is served wherever it lands."""

from __future__ import annotations

from collections import Counter

from tests.support.clients import HandshakeClient
from tests.support.proxies import parse_pid

#: Eliciting calls of the session, each answered through the proxy.
CALLS = 12


def test_a_session_is_served_by_every_instance_behind_round_robin(start_stack, redis_server):
    stack = start_stack("nginx-roundrobin", redis_url=redis_server.url)
    client = HandshakeClient(stack.proxy.url)
    try:
        assert client.initialize().status_code == 200
        served: Counter[str] = Counter()
        for _ in range(CALLS):
            call, _, stream, ask = client.start_elicitation()
            accepted = client.accept(ask["id"], {"command": "server status"})
            assert accepted.status_code == 202, accepted.text
            final = stream.next_message()
            assert final["id"] == call["id"] and final["result"]["isError"] is False, final
            served[stack.owner_of(parse_pid(final["result"]["content"][0]["text"]))] += 1
        # Round robin put the calls on every instance, and each got its answer from wherever it was posted.
        assert set(served) == {"a", "b", "c"}, served
        assert client.delete().status_code == 204
    finally:
        client.close()
