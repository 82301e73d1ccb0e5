"""The official TypeScript SDK 1.x client (``@modelcontextprotocol/sdk``) against the gunicorn-served server.

It speaks the handshake era only: ``initialize``, a session, and elicitations pushed on the
call's event stream and answered by a POST. tests/node/legacy_client.cjs makes every HTTP
request on a connection of its own (tests/support/tsclient1.py has the helper, which other tests
use with several workers and a shared state backend); here it runs against one worker with
the in-process state. The ``ts_sdk1_modules`` fixture installs Node 22 and the SDK with npm
into a cache folder and skips, saying why, without npm.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.support.clients import SUPPORTED_VERSIONS
from tests.support.gunicorn import wait_trace
from tests.support.nodeinstall import NODE_VERSION
from tests.support.tsclient1 import SDK_MAJOR, run_legacy_calls

CALLS = 10
#: [seconds] bound on one run of the client (it takes about 1 s).
RUN_TIMEOUT = 60


@pytest.mark.parametrize("concurrency", [1, 3])
def test_sdk1_client_answers_every_elicitation_on_new_connections(ts_sdk1_modules, start_traced_server, concurrency):
    """10 eliciting ze_execute calls in one session, one or three at a time: each result is the
    session's ``session show``, and the server saw every request on a connection of its own."""
    server = start_traced_server()
    since = len(server.log())
    summary = run_legacy_calls(server.url, CALLS, RUN_TIMEOUT, concurrency=concurrency, modules=ts_sdk1_modules)

    assert summary["exitCode"] == 0, summary
    assert summary["failures"] == [] and summary["ok"] == CALLS and summary["elicitations"] == CALLS, summary
    assert summary["sdkVersion"].split(".")[0] == SDK_MAJOR, summary
    assert summary["nodeVersion"] == f"v{NODE_VERSION}", summary
    assert summary["protocolVersion"] in SUPPORTED_VERSIONS and summary["sessionId"], summary
    assert summary["connections"] == summary["requests"], summary

    # initialize, notifications/initialized, the standalone GET stream, each call and its
    # answer, DELETE; the GET is logged last, when the DELETE has ended its stream.
    records = wait_trace(server, since, summary["requests"], until=lambda r: r.http == "GET")
    assert len(records) == summary["requests"] == 2 * CALLS + 4, (summary, records)
    assert Counter((r.http, r.status) for r in records) == {
        ("POST", 200): CALLS + 1,
        ("POST", 202): CALLS + 1,
        ("GET", 200): 1,
        ("DELETE", 204): 1,
    }, records
    assert {r.session_in for r in records[1:]} == {summary["sessionId"]}, records
    ports = Counter(r.port for r in records)
    assert len(ports) == len(records), f"requests that shared a connection: {[p for p, n in ports.items() if n > 1]}"


def test_sdk1_client_stays_connected_when_the_standalone_cap_is_full(ts_sdk1_modules, start_server):
    """With the one standalone stream of the process held by another session, the SDK's own
    standalone GET is told to come back later (an event stream with retry, which it accepts)
    instead of being refused with a status it reports as a failure; its calls all succeed."""
    server = start_server(max_standalone_streams=1, keepalive_interval=0.3)
    holder = server.session(name="holder")
    response, stream = holder.get_stream()
    assert response.status_code == 200 and stream is not None
    stream.read_priming()
    summary = run_legacy_calls(server.url, 2, RUN_TIMEOUT, modules=ts_sdk1_modules)
    assert summary["exitCode"] == 0 and summary["ok"] == 2, summary
    assert summary["transportErrors"] == [], summary
    assert "no room for a GET of a standalone stream" in server.log()
