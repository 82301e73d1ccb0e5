"""gunicorn with several workers: 2026-07-28 multi-round-trip calls, requestState refusals, and
what handshake-era sessions get without Redis.

A stateless call's rounds are independent HTTP requests: with ``ZEMCP_WORKERS=4`` and a
fresh connection per request, round 2 often reaches another worker than round 1, which
can open the ``requestState`` only because gunicorn.conf.py makes one key in the master
before forking. Which worker served each request is read from the traced access log
(gunicorn's ``%(p)s``, tests/support/gunicorn.py ``TRACE_FORMAT``); a tag header names each request.

A handshake-era session lives in the worker that created it (the in-process backend): a
request of it that reaches the other of two workers gets a 404 saying so and naming
``ZEMCP_REDIS_URL``, and that worker logs a warning. Those tests ask a stateless
``server status`` which worker took a new connection, and keep the connection open to send
the session's request to that worker.
"""

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pytest
import requests

from tests.support.clients import TAG_HEADER, ModernClient
from tests.support.gunicorn import connection_to_a_worker, wait_trace
from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT
from zemcp.state import workers

WORKERS = 4
CALLS = 100
#: Client threads: enough to keep every worker busy, far below the workers' thread budget.
CLIENT_THREADS = 16
#: [seconds] bound on the whole batch of calls.
BATCH_TIMEOUT = 60
#: Calls whose two rounds must have reached different workers. With four workers and fresh
#: connections, about half of them do; this floor only rules out "always the same worker".
MIN_CROSS_WORKER_CALLS = 10
#: New connections tried at most to reach the other of two workers (each reaches it about
#: every second time).
MAX_TRIES = 100
#: [seconds] bound on a line appearing in the server's log.
LOG_DEADLINE = 5.0


def parent_pid(pid: int) -> int:
    """The parent process id of ``pid`` (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        # The command name (field 2) is in parentheses and may contain spaces.
        return int(f.read().rsplit(")", 1)[1].split()[1])


def assert_invalid_state(response, reply, told: str = "") -> None:
    """HTTP 400 with JSON-RPC -32602 and data.reason "invalid_request_state", and no result;
    the message starts by telling ``told`` (which check failed), when given."""
    assert response.status_code == 400, (response.status_code, response.text)
    assert "result" not in reply, reply
    error = reply["error"]
    assert error["code"] == -32602, error
    assert error.get("data", {}).get("reason") == "invalid_request_state", error
    assert error["message"].startswith(f"Invalid params: {told}"), error


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
    """A requestState with one character changed (key id, ciphertext or tag) answers 400, -32602, invalid_request_state, told as tampered."""
    server = start_traced_server(workers=WORKERS)
    client = ModernClient(server.url, name="tamper-check")
    first = client.ask_command()
    state = first["requestState"]
    prefix = "v1."
    assert state.startswith(prefix), state

    # The key id (the first 4 bytes) names no key once changed; any other change fails the integrity check.
    told = {
        len(prefix)
        + 1: "requestState names a key this server does not hold: another server issued it, or it was altered;",
        len(state) // 2: "requestState was tampered with: it fails its integrity check;",
        len(state) - 2: "requestState was tampered with: it fails its integrity check;",
    }
    for position, message in told.items():
        original = state[position]
        replacement = "A" if original != "A" else "B"
        tampered = state[:position] + replacement + state[position + 1 :]
        assert tampered != state and len(tampered) == len(state)
        response, reply = client.call({}, input_responses=answer("session show"), request_state=tampered)
        assert_invalid_state(response, reply, message)

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
        assert_invalid_state(
            response, reply, "requestState was issued for other arguments: send the arguments of the request"
        )

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
    assert_invalid_state(response, reply, "requestState expired: it is valid for 1 s after the round that issued it;")
    assert re.search(r"refused a requestState .*: expired$", server.log(), re.M), "the log should say it expired"


@pytest.mark.parametrize("state", [12345, {"v": 1}, "", "not-a-token"], ids=["number", "object", "empty", "garbage"])
def test_malformed_request_state_is_refused(server, state):
    """A requestState that is no token at all (wrong type, empty, garbage) answers 400, -32602, invalid_request_state."""
    client = ModernClient(server.url, name="malformed-check")
    response, reply = client.call({}, input_responses=answer("session show"), request_state=state)
    assert_invalid_state(response, reply)


def wait_log(server, pattern: str) -> re.Match:
    """The first match of ``pattern`` in ``server``'s log, waited for up to :data:`LOG_DEADLINE` s."""
    end = time.monotonic() + LOG_DEADLINE
    while (match := re.search(pattern, server.log(), re.M)) is None:
        assert time.monotonic() < end, f"no line matching {pattern!r} in the log within {LOG_DEADLINE} s"
        time.sleep(0.05)
    return match


def worker_pid(server, http: requests.Session) -> int:
    """The pid of the worker that serves the kept-alive connection ``http``, asked with a
    stateless ``server status`` (no session)."""
    probe = ModernClient(server.url, name="worker-probe")
    message = probe.message("tools/call", {"name": "ze_execute", "arguments": {"command": "server status"}})
    response = http.post(
        server.url,
        data=json.dumps(message),
        headers=probe.headers(message, {"Connection": "keep-alive"}),
        timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
    )
    text = probe.reply(response, message["id"])["result"]["content"][0]["text"]
    return int(re.search(r"^pid: (\d+)$", text, re.M).group(1))


def connection_to_another_worker(server, owner: int) -> tuple[requests.Session, int]:
    """A kept-alive connection to a worker of ``server`` other than ``owner``, and that worker's pid."""
    return connection_to_a_worker(partial(worker_pid, server), {owner})


def session_owner(server, client) -> int:
    """The worker that created ``client``'s session (named by its id), a worker of ``server``."""
    owner = workers.creator(client.session_id)
    assert owner is not None, client.session_id
    if os.path.isdir("/proc"):
        assert parent_pid(owner) == server.proc.pid, (owner, server.proc.pid)
    return owner


def test_a_session_request_on_another_worker_says_so_and_names_redis(start_server):
    """With 2 workers and no Redis, the start-up warning names ZEMCP_REDIS_URL, and a session's request that reaches
    the worker that did not create it gets 404 saying so, with a warning in that worker's log."""
    server = start_server(workers=2)
    wait_log(
        server,
        r"zemcp: 2 workers share one listening socket, and without ZEMCP_REDIS_URL .* Set ZEMCP_REDIS_URL "
        r"\(pip install redis, or '\.\[redis\]' in a zemcp checkout\) to share handshake-era sessions between workers and instances.* "
        r"2026-07-28 clients need neither",
    )
    client = server.session()
    owner = session_owner(server, client)
    http, other = connection_to_another_worker(server, owner)
    with http:
        response = http.post(
            client.url,
            data=json.dumps({"jsonrpc": "2.0", "id": client.new_id(), "method": "ping"}),
            headers=client.headers(),
            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
        )
    assert response.status_code == 404, (response.status_code, response.text)
    message = response.json()["error"]["message"]
    assert message.startswith("Session not found here: it belongs to another worker of this gunicorn"), message
    assert "set ZEMCP_REDIS_URL" in message and "ZEMCP_WORKERS=1" in message, message
    warning = wait_log(server, rf"request for a session of worker {owner} reached worker {other} of this gunicorn.*")
    assert "set ZEMCP_REDIS_URL (pip install redis, or '.[redis]' in a zemcp checkout)" in warning.group(0), (
        warning.group(0)
    )
    # The session itself is alive in its own worker.
    assert client.rpc("ping") == {}


def test_an_elicitation_answer_on_another_worker_is_refused_saying_so(start_server):
    """An answer POST that reaches the wrong worker gets 404 saying it was not delivered and why (with the warning);
    sent on a connection to the session's worker, it completes the call."""
    server = start_server(workers=2, elicitation_timeout=30)
    client = server.session()
    owner = session_owner(server, client)
    # The eliciting call waits in the session's worker: its own new connection must reach it.
    for _ in range(MAX_TRIES):
        call = client.call_message({})
        response, stream = client.open_stream(call)
        if response.status_code == 200:
            break
        assert response.status_code == 404 and "another worker" in response.text, (response.status_code, response.text)
    else:
        pytest.fail(f"{MAX_TRIES} tools/call requests all reached the worker without the session")
    elicitation = stream.next_message()
    assert elicitation is not None and elicitation.get("method") == "elicitation/create", elicitation
    answer = {"jsonrpc": "2.0", "id": elicitation["id"], "result": {"action": "accept", "content": {"command": "help"}}}

    http, other = connection_to_another_worker(server, owner)
    with http:
        lost = http.post(client.url, data=json.dumps(answer), headers=client.headers(), timeout=(CONNECT_TIMEOUT, 5))
    assert lost.status_code == 404, (lost.status_code, lost.text)
    message = lost.json()["error"]["message"]
    assert message.startswith("This answer was not delivered: Session not found here: it belongs to another worker"), (
        message
    )
    assert "set ZEMCP_REDIS_URL" in message, message
    wait_log(server, rf"request for a session of worker {owner} reached worker {other} .*ZEMCP_REDIS_URL")

    # New connections go to the less loaded worker, the one without the waiting call: the answer
    # takes a kept-alive connection that reached the session's worker.
    to_owner, _ = connection_to_a_worker(partial(worker_pid, server), {other})
    with to_owner:
        delivered = to_owner.post(
            client.url, data=json.dumps(answer), headers=client.headers(), timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)
        )
    assert delivered.status_code == 202, (delivered.status_code, delivered.text)
    final = stream.rest()[-1]
    assert final["id"] == call["id"] and final["result"]["isError"] is False, final
