"""N gunicorn workers with Redis hold N times one worker's budgets (docs/deploy.md, "Capacity").

Each worker's pending budget is its own (8 threads: 4 pending elicitations), so a deployment
of four holds 16 only when the connections spread over the workers that have room: new
connections go to the least loaded worker, and a worker whose busy connections fill its
budget hands a request that reaches it, on a new or a kept-alive connection, to a sibling
with room (zemcp/http/workerloads.py). Each test starts its own gunicorn with Redis; they
skip, saying so, where redis-server is not installed.
"""

from __future__ import annotations

import asyncio
import collections
import time

import httpx2
import mcp
import requests
from mcp import types
from mcp.client.streamable_http import streamable_http_client

from tests.support.clients import SUPPORTED_VERSIONS
from tests.support.gunicorn import TraceRecord, trace_records, wait_trace
from tests.support.placement import answer_on, redis_settings, serving_workers, start_call, worker_connection

WORKERS = 4
#: gunicorn threads per worker: a pending budget of 4 (docs/configuration.md, "Derived values").
THREADS = 8
PENDING_BUDGET = 4
#: [seconds] bound on the SDK scenario.
SCENARIO_TIMEOUT = 60
#: [seconds] bound on a request's line reaching the access log after its response ended.
LOG_TIMEOUT = 5
#: What ElicitTooMany says (docs/elicitation.md), as ze_execute reports it.
TOO_MANY = "Error: elicit: too many pending elicitations"


def is_call_stream(record: TraceRecord) -> bool:
    """Whether ``record`` is a session's POST answered with an event stream (an eliciting call)."""
    return (
        record.http == "POST"
        and bool(record.session_in)
        and (record.content_type or "").startswith("text/event-stream")
    )


def test_four_workers_hold_four_pending_budgets_of_one_sdk_client(start_traced_server, redis_server):
    """One client (ZEMCP_CLIENT_SHARE=1): 16 sessions of the official SDK in legacy mode on one
    pooled keep-alive HTTP client hold 16 eliciting calls at once over 4 workers of 8 threads,
    4 in each, none refused; the 17th is refused with ElicitTooMany; then all 16 complete."""
    server = start_traced_server(**redis_settings(redis_server.url, threads=THREADS, client_share=1))
    serving_workers(server, WORKERS)
    held = WORKERS * PENDING_BUDGET
    asked: list[str] = []

    async def scenario():
        all_asked = asyncio.Event()
        release = asyncio.Event()
        versions: list[str] = []
        all_connected = asyncio.Event()

        async def on_elicit(context, params):
            asked.append(params.message)
            if len(asked) == held:
                all_asked.set()
            await release.wait()
            return types.ElicitResult(action="accept", content={"command": "session show"})

        async def one_call(http: httpx2.AsyncClient, n: int, start: asyncio.Event) -> types.CallToolResult:
            async with mcp.Client(
                streamable_http_client(server.url, http_client=http),
                mode="legacy",
                elicitation_callback=on_elicit,
                client_info=types.Implementation(name=f"capacity-{n}", version="1.0"),
                read_timeout_seconds=SCENARIO_TIMEOUT,
            ) as client:
                versions.append(client.protocol_version)
                if len(versions) == held + 1:
                    all_connected.set()
                await start.wait()
                return await client.call_tool("ze_execute", {})

        async with httpx2.AsyncClient(timeout=httpx2.Timeout(SCENARIO_TIMEOUT)) as http:
            go = asyncio.Event()
            calls = [asyncio.create_task(one_call(http, n, go)) for n in range(held)]
            # The 17th call starts once the 16 wait for their answers.
            extra = asyncio.create_task(one_call(http, held, all_asked))
            await all_connected.wait()
            go.set()
            waiting = asyncio.create_task(all_asked.wait())
            await asyncio.wait([waiting, *calls], return_when=asyncio.FIRST_COMPLETED)
            early = [call.result() for call in calls if call.done()]
            assert waiting.done() and not early, f"{len(asked)} calls elicited; ended early: {early}"
            refused = await extra
            release.set()
            return versions, refused, await asyncio.gather(*calls)

    versions, refused, results = asyncio.run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
    # Every session ran the initialize handshake (legacy mode).
    assert set(versions) <= set(SUPPORTED_VERSIONS), versions

    assert refused.is_error is True and refused.content[0].text.startswith(TOO_MANY), refused
    assert len(asked) == held
    for n, result in enumerate(results):
        assert result.is_error is False, result
        assert f"client: capacity-{n} 1.0" in result.content[0].text, result.content[0].text
    # Each worker held its budget: the held calls' event streams, by the worker that served them
    # (a request is logged once its response ended).
    deadline = time.monotonic() + LOG_TIMEOUT
    while len(streams := [r for r in trace_records(server) if is_call_stream(r)]) < held:
        assert time.monotonic() < deadline, streams
        time.sleep(0.05)
    held_by = collections.Counter(r.pid for r in streams)
    assert sorted(held_by.values()) == [PENDING_BUDGET] * WORKERS, held_by


def test_a_full_worker_hands_a_call_on_its_kept_alive_connection_to_a_sibling(start_traced_server, redis_server):
    """A worker whose 4 pending elicitations fill its budget hands the next call, which comes on
    a connection it kept alive, to its sibling with the connection: the call elicits there
    instead of being refused, and completes."""
    server = start_traced_server(**redis_settings(redis_server.url, workers=2, threads=THREADS, client_share=1))
    # Three sessions of one client: a session may hold half the pending budget (2).
    sessions = [server.session(name=f"handoff-{n}") for n in range(3)]
    first, full = worker_connection(sessions[0])
    others = serving_workers(server, 2) - {full}
    connections = [first] + [worker_connection(sessions[0], others)[0] for _ in range(PENDING_BUDGET)]

    # Four eliciting calls fill the budget of the worker that accepted every connection ...
    owners = [sessions[n // 2] for n in range(PENDING_BUDGET)] + [sessions[2]]
    calls = [start_call(owner, connection) for owner, connection in zip(owners, connections)]
    # ... and the fifth, on its fifth connection, elicited all the same.
    with requests.Session() as answerer:
        for owner, (call, stream, ask) in zip(owners, calls):
            assert answer_on(owner, answerer, ask["id"], "session show").status_code == 202
            final = stream.rest()[-1]
            assert final["id"] == call["id"] and final["result"]["isError"] is False, final
    for connection in connections:
        connection.close()

    def fifth_call(record: TraceRecord) -> bool:
        return is_call_stream(record) and record.session_in == sessions[2].session_id

    # A request is logged once its response ended: wait for the fifth call's line.
    records = wait_trace(server, 0, 1, until=fifth_call)
    fifth = [r for r in records if fifth_call(r)]
    assert len(fifth) == 1, records
    before = [r for r in records[: records.index(fifth[0])] if r.port == fifth[0].port]
    assert before and {r.pid for r in before} == {full}, (before, full)
    assert fifth[0].pid != full, f"worker {full} served the fifth call itself"
