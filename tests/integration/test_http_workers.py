"""2026-07-28 multi-round-trip calls against gunicorn with several workers, and requestState refusals.

A stateless call's rounds are independent HTTP requests: with ``ZEMCP_WORKERS=4`` and a
fresh connection per request, round 2 often reaches another worker than round 1, which
can open the ``requestState`` only because gunicorn.conf.py makes one key in the master
before forking. Which worker served each request is read from the traced access log
(gunicorn's ``%(p)s``, tests/conftest.py ``TRACE_FORMAT``); a tag header names each request.
"""

import os
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import TAG_HEADER, ModernClient, wait_trace

WORKERS = 4
CALLS = 100
#: Client threads: enough to keep every worker busy, far below the workers' thread budget.
CLIENT_THREADS = 16
#: [seconds] bound on the whole batch of calls.
BATCH_TIMEOUT = 60
#: Calls whose two rounds must have reached different workers. With four workers and fresh
#: connections, about half of them do; this floor only rules out "always the same worker".
MIN_CROSS_WORKER_CALLS = 10


def parent_pid(pid: int) -> int:
    """The parent process id of ``pid`` (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        # The command name (field 2) is in parentheses and may contain spaces.
        return int(f.read().rsplit(")", 1)[1].split()[1])


def assert_invalid_state(response, reply) -> None:
    """HTTP 400 with JSON-RPC -32602 and data.reason "invalid_request_state", and no result."""
    assert response.status_code == 400, (response.status_code, response.text)
    assert "result" not in reply, reply
    error = reply["error"]
    assert error["code"] == -32602, error
    assert error.get("data", {}).get("reason") == "invalid_request_state", error


def answer(command: str) -> dict:
    """``inputResponses`` accepting ze_execute's question with ``command``."""
    return {"command": {"action": "accept", "content": {"command": command}}}


def test_rounds_of_concurrent_modern_calls_complete_on_different_workers(start_traced_server):
    """100 concurrent two-round calls on 4 workers: many rounds 2 land on another worker than round 1, all complete with their own answer."""
    server = start_traced_server(workers=WORKERS)
    url = server.url

    # The traced pid is the worker's: plain `server status` calls report their own pid,
    # which must be the one the access log names for that request.
    since = len(server.log())
    probe = ModernClient(url, name="pid-probe")
    reported = {}
    for n in range(12):
        result = probe.call_result({"command": "server status"}, headers={TAG_HEADER: f"probe-{n}"})
        reported[f"probe-{n}"] = int(re.search(r"^pid: (\d+)$", result["content"][0]["text"], re.M).group(1))
    traced = {r.tag: r.pid for r in wait_trace(server, since, len(reported))}
    assert traced == reported, (traced, reported)

    since = len(server.log())

    def one_call(n: int) -> tuple[int, str]:
        client = ModernClient(url, name=f"worker-call-{n}", version=str(n))
        first = client.ask_command(headers={TAG_HEADER: f"call-{n}-round-1"})
        final = client.answer_command(first, "session show", headers={TAG_HEADER: f"call-{n}-round-2"})
        assert final.get("resultType") == "complete" and final.get("isError") is False, final
        return n, final["content"][0]["text"]

    started = time.monotonic()
    with ThreadPoolExecutor(CLIENT_THREADS) as pool:
        futures = [pool.submit(one_call, n) for n in range(CALLS)]
        outcomes = [future.result(timeout=max(1.0, BATCH_TIMEOUT - (time.monotonic() - started))) for future in futures]

    # Every call got the answer to its own question: its own client info, in the stateless era.
    for n, text in outcomes:
        assert f"client: worker-call-{n} {n}\n" in text, (n, text)
        assert "protocol version: 2026-07-28" in text and "session: none" in text, (n, text)

    records = wait_trace(server, since, 2 * CALLS)
    by_tag = {r.tag: r for r in records}
    assert len(by_tag) == 2 * CALLS, records
    assert all(r.status == 200 and r.session_out is None for r in records), records
    rounds = [(by_tag[f"call-{n}-round-1"].pid, by_tag[f"call-{n}-round-2"].pid) for n in range(CALLS)]
    crossed = sum(1 for first, second in rounds if first != second)
    assert crossed >= MIN_CROSS_WORKER_CALLS, f"only {crossed} of {CALLS} calls changed worker between rounds: {rounds}"
    # And those pids are distinct gunicorn workers of this server.
    pids = {pid for pair in rounds for pid in pair}
    assert 2 <= len(pids) <= WORKERS, pids
    if os.path.isdir("/proc"):
        assert {parent_pid(pid) for pid in pids} == {server.proc.pid}, pids


def test_tampered_request_state_is_refused(start_traced_server):
    """A requestState with one character changed (key id, ciphertext or tag) answers 400, -32602, invalid_request_state."""
    server = start_traced_server(workers=WORKERS)
    client = ModernClient(server.url, name="tamper-check")
    first = client.ask_command()
    state = first["requestState"]
    prefix = "v1."
    assert state.startswith(prefix), state

    for position in (len(prefix) + 1, len(state) // 2, len(state) - 2):
        original = state[position]
        replacement = "A" if original != "A" else "B"
        tampered = state[:position] + replacement + state[position + 1 :]
        assert tampered != state and len(tampered) == len(state)
        response, reply = client.call({}, input_responses=answer("session show"), request_state=tampered)
        assert_invalid_state(response, reply)

    # The untouched state still opens: the refusals were about the changed character.
    final = client.answer_command(first, "session show")
    assert final["resultType"] == "complete" and "client: tamper-check 1.0" in final["content"][0]["text"], final


def test_request_state_replayed_against_other_arguments_is_refused(start_traced_server):
    """A requestState sent back with different tool arguments answers 400, -32602, invalid_request_state."""
    server = start_traced_server(workers=WORKERS)
    client = ModernClient(server.url, name="replay-check")
    first = client.ask_command()

    for arguments in ({"command": "help"}, {"command": ""}):
        response, reply = client.call(
            arguments, input_responses=answer("session show"), request_state=first["requestState"]
        )
        assert_invalid_state(response, reply)

    final = client.answer_command(first, "session show")
    assert final["resultType"] == "complete" and "client: replay-check 1.0" in final["content"][0]["text"], final


def test_expired_request_state_is_refused(start_server):
    """With elicitation_timeout=1 a requestState that opened at once is refused 400, -32602, invalid_request_state 2.5 s later."""
    server = start_server(elicitation_timeout=1)
    client = ModernClient(server.url, name="expiry-check")
    first = client.ask_command()
    issued = time.monotonic()

    # Within its lifetime (at least 1 s) the state opens.
    final = client.answer_command(first, "session show")
    assert final["resultType"] == "complete" and "client: expiry-check 1.0" in final["content"][0]["text"], final

    # The token's expiry is rounded up to a whole second: at most 2 s after it was sealed.
    time.sleep(max(0.0, 2.5 - (time.monotonic() - issued)))
    response, reply = client.call({}, input_responses=answer("session show"), request_state=first["requestState"])
    assert_invalid_state(response, reply)
    assert re.search(r"refused a requestState .*: expired$", server.log(), re.M), "the log should say it expired"


@pytest.mark.parametrize("state", [12345, {"v": 1}, "", "not-a-token"], ids=["number", "object", "empty", "garbage"])
def test_malformed_request_state_is_refused(server, state):
    """A requestState that is no token at all (wrong type, empty, garbage) answers 400, -32602, invalid_request_state."""
    client = ModernClient(server.url, name="malformed-check")
    response, reply = client.call({}, input_responses=answer("session show"), request_state=state)
    assert_invalid_state(response, reply)
