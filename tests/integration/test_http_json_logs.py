"""ZEMCP_LOG_FORMAT=json under gunicorn: every line of the server's log is one JSON object,
gunicorn's own lines and its access log too, a crafted client name forges nothing, and a
session is named by its fingerprint, never by its id. The text format stays gunicorn's. The
request records (ZEMCP_LOG_REQUESTS) tell a 2026-07-28 round that asks from one that answers."""

import json
import re
import time

from tests.support.clients import ModernClient
from zemcp import logsafe
from zemcp.state.session import fingerprint

#: A client name made to end its log line and start a forged one, or to close the JSON object.
CRAFTED = 'evil\n[2026-12-03 12:00:00 +0000] [1] [CRITICAL] forged {"level": "critical", "event": "forged"}"}'
#: The fields every JSON line holds, with their types.
FIXED = {"time": str, "level": str, "logger": str, "event": str, "message": str, "pid": int}


def records_until(server, done, deadline: float = 10.0) -> list[dict]:
    """Every line of ``server``'s log parsed as JSON, once ``done(records)`` holds (polled:
    gunicorn writes some lines after the response, such as the access line)."""
    end = time.monotonic() + deadline
    while True:
        lines = server.log().splitlines()
        records = [json.loads(line) for line in lines]
        if done(records) or time.monotonic() > end:
            assert done(records), f"the log never got there: {lines}"
            return records
        time.sleep(0.05)


def test_every_line_is_one_json_object_and_names_the_session_by_its_fingerprint(start_server):
    server = start_server(log_format="json")
    client = server.session(name=CRAFTED)
    assert client.command_text("help")
    session_id = client.session_id
    assert client.delete().status_code in (200, 202, 204)

    def ended(records):
        accesses = [r for r in records if r["logger"] == "gunicorn.access"]
        return any(r["event"] == "session_ended" for r in records) and any(
            "DELETE /mcp" in r["message"] for r in accesses
        )

    records = records_until(server, ended)
    text = server.log()
    assert len(records) == len(text.splitlines()), "one object a line"
    for record in records:
        assert {name: type(record[name]) for name in FIXED} == FIXED, record
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["time"]), record
        assert record["level"] in ("debug", "info", "warning", "error", "critical"), record
        assert record["event"] != "forged" and "exc_type" not in record, record

    starting = [r for r in records if r["message"].startswith(("Starting gunicorn", "Listening at", "Booting worker"))]
    assert len(starting) == 3, records
    assert {(r["logger"], r["event"], r["level"]) for r in starting} == {("gunicorn.error", "gunicorn", "info")}

    [initialized] = [r for r in records if r["event"] == "session_initialized"]
    assert initialized["logger"] == "zemcp.handshake"
    assert initialized["session"] == fingerprint(session_id)
    assert initialized["message"].startswith(f"session {fingerprint(session_id)} initialized: client ")
    assert logsafe.clip(CRAFTED) in initialized["message"]
    [ended_record] = [r for r in records if r["event"] == "session_ended"]
    assert ended_record["session"] == fingerprint(session_id)

    accesses = [r for r in records if r["event"] == "access"]
    assert {r["logger"] for r in accesses} == {"gunicorn.access"}
    assert sum('"POST /mcp HTTP/1.1" 200' in r["message"] for r in accesses) >= 2, accesses

    assert session_id not in text, "the session id itself is never logged"
    assert "forged" not in "".join(line for line in text.splitlines() if not line.startswith("{"))


def test_the_text_format_keeps_gunicorns_lines(server):
    """Without ZEMCP_LOG_FORMAT, gunicorn's lines and zemcp's are what they always were."""
    client = server.session(name="text-format")
    fp = fingerprint(client.session_id)
    end = time.monotonic() + 5
    while f"session {fp} initialized" not in server.log() and time.monotonic() < end:
        time.sleep(0.05)
    lines = server.log().splitlines()
    head = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}\] \[\d+\] \[INFO\] "
    assert re.fullmatch(head + r"Starting gunicorn \S+", lines[0]), lines[0]
    assert any(re.fullmatch(head + f"session {fp} initialized: client 'text-format' .*", line) for line in lines)
    assert not any(line.startswith("{") for line in lines)


def test_a_round_that_asks_is_logged_input_required_and_an_unasked_key_is_named(start_server):
    """ZEMCP_LOG_REQUESTS=on: the rounds of a 2026-07-28 call are logged input_required until the
    last, ok; a retry whose answer sits under a key nobody asked gets the question again and a
    warning naming that key and the one asked."""
    server = start_server(log_format="json", log_requests="on")
    client = ModernClient(server.url, name="rounds-in-the-log")
    first = client.ask_command()
    wrong = {"cmd": {"action": "accept", "content": {"command": "help"}}}
    again = client.call_result({}, input_responses=wrong, request_state=first["requestState"])
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["command"], again
    final = client.answer_command(again, "help")
    assert final["resultType"] == "complete" and final["isError"] is False, final

    def calls(records):
        return [r for r in records if r["event"] == "request" and r.get("method") == "tools/call"]

    records = records_until(server, lambda records: len(calls(records)) == 3)
    assert [(r["tool"], r["outcome"]) for r in calls(records)] == [
        ("ze_execute", "input_required"),
        ("ze_execute", "input_required"),
        ("ze_execute", "ok"),
    ]
    [ignored] = [r for r in records if r["logger"] == "zemcp.mrtr" and "inputResponses" in r["message"]]
    assert ignored["level"] == "warning", ignored
    assert ignored["message"] == (
        "tools/call 'ze_execute': the inputResponses under 'cmd' answered no question of this round and were "
        "ignored; the round asks again under 'command' (an answer goes under the key of its inputRequests entry)"
    )
