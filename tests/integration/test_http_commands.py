"""The reference server's commands report the real state of the running gunicorn worker."""

import re

from tests.support.clients import ModernClient


def test_help_lists_the_builtin_commands(client):
    """help lists session show, session list and server status."""
    text = client.command_text("help")
    for name in ("help", "session show", "session list", "server status"):
        assert re.search(rf"^{name}\s", text, re.M), f"help does not list {name!r}:\n{text}"


def test_commands_dispatch_by_longest_word_prefix(client):
    """A command line runs the command whose name is its longest word prefix; a partial name is an error result."""
    assert "protocol version:" in client.command_text("session show with some arguments")
    assert "protocol version:" in client.command_text("  session   show  ")
    assert "session(s) in process" in client.command_text("session list --all")
    assert "thread budget:" in client.command_text("server status now")
    for line in ("session", "server", "sessions show"):
        result = client.execute(line)
        assert result["isError"] is True, (line, result)
        assert result["content"][0]["text"].startswith("Error: "), result


def test_session_show_reports_this_session(server):
    """session show reports client name and version, protocol version, elicitation, age and pending count."""
    client = server.session(name="show-client", version="3.1.4", protocol_version="2025-03-26")
    text = client.command_text("session show")
    assert re.search(r"^client: show-client 3\.1\.4$", text, re.M), text
    assert re.search(r"^protocol version: 2025-03-26$", text, re.M), text
    assert re.search(r"^elicitation: yes$", text, re.M), text
    assert re.search(r"^age: \d+ s$", text, re.M), text
    assert re.search(r"^pending elicitations: 0$", text, re.M), text
    plain = server.session(elicitation=False, name="plain")
    assert re.search(r"^elicitation: no$", plain.command_text("session show"), re.M)


def test_session_show_counts_pending_of_this_session_only(server):
    """session show's pending count follows this session's waiting elicitations."""
    client = server.session()
    other = server.session()
    call, _, stream, elicitation = client.start_elicitation()
    assert "pending elicitations: 1" in client.command_text("session show")
    assert "pending elicitations: 0" in other.command_text("session show")
    assert client.accept(elicitation["id"], {"command": "help"}).status_code == 202
    assert stream.rest()[-1]["id"] == call["id"]
    assert "pending elicitations: 0" in client.command_text("session show")


def test_session_list_shows_only_the_callers_session_and_hides_ids(server):
    """Without authorization session list shows the caller's session alone (no caller can be
    told from another), counts the same sessions as server status, and shows no raw id; a
    2026-07-28 caller has none."""
    client = server.session(name="lister", version="0.9")
    other = server.session(name="other-lister")
    listing = client.command_text("session list")
    status = client.status()
    header = re.match(r"^(\d+) session\(s\) in process (\d+) are yours \((\d+) in all\):$", listing.splitlines()[0])
    assert header, listing
    mine, pid, total = (int(group) for group in header.groups())
    lines = listing.splitlines()[1:]
    assert mine == len(lines) == 1 and total == status["sessions"], (listing, status["text"])
    assert pid == status["pid"]
    assert lines[0].startswith("*") and "lister 0.9" in lines[0], listing
    assert "other-lister" not in listing
    for session_id in (client.session_id, other.session_id):
        assert session_id not in listing and session_id not in status["text"]
        assert session_id.rpartition(".")[2][:12] not in listing
    stateless = ModernClient(server.url).call_result({"command": "session list"})["content"][0]["text"]
    assert stateless.startswith("0 session(s) in process") and "other-lister" not in stateless, stateless


def test_server_status_figures_are_consistent(server):
    """server status reports version, pid, uptime, sessions, pending and a thread budget that adds up."""
    client = server.session()
    status = client.status()
    text = status["text"]
    assert re.search(r"^zemcp \d+\.\d+\.\d+", text, re.M), text
    assert status["pid"] > 1
    assert status["uptime"] >= 0
    assert status["sessions"] >= 1 and status["session_cap"] == 1024
    parts = ("threads_pending", "threads_listen", "threads_standalone", "threads_reserved")
    assert sum(status[part] for part in parts) == status["threads"], text
    assert status["listen_cap"] == status["threads_listen"]
    assert status["standalone_cap"] == status["threads_standalone"]
    # The status command is itself a running call, counted in the call budget.
    assert status["running"] >= 1 and status["call_budget"] == status["threads"] - 8, text
    assert status["pending_cap"] == status["threads_pending"]
    assert 1 <= status["pending_cap"] < status["threads"]
    before = status["sessions"]
    server.session()
    assert client.status()["sessions"] == before + 1
    call, _, stream, elicitation = client.start_elicitation()
    assert client.status()["pending"] == status["pending"] + 1
    assert client.accept(elicitation["id"], {"command": "help"}).status_code == 202
    stream.rest()
    client.wait_pending(status["pending"])
