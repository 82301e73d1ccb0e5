"""2026-07-28 clients against the gunicorn-served server: the official TypeScript client, and both eras at once.

The TypeScript test runs tests/node/modern_client.cjs with Node 22 and
``@modelcontextprotocol/client`` 2.x, which a session fixture (tests/support/node.py) installs with npm into a cache
folder (``$ZEMCP_TEST_NODE_DIR``, else ``~/.cache/zemcp-tests/node``; see tests/support/nodeinstall.py)
and reuses while it holds the right versions. Without npm the test is skipped; a failed
install fails it.
"""

from __future__ import annotations

import json

from tests.support import REPO
from tests.support.clients import MODERN_VERSION, ModernClient
from tests.support.gunicorn import wait_trace
from tests.support.node import TS_CLIENT_MAJOR
from tests.support.nodeinstall import NODE_VERSION, node_binary, run_bounded

NODE_SCRIPT = REPO / "tests" / "node" / "modern_client.cjs"
#: [seconds] bound on one run of the Node client.
NODE_RUN_TIMEOUT = 60
ELICIT_MESSAGE = "Which command would you like to run?"


def test_typescript_client_pinned_2026_lists_calls_and_answers_elicitation(node_modules, traced_server):
    """The TypeScript client pinned to 2026-07-28 discovers, lists tools, and completes ze_execute {} by answering the elicitation."""
    node = node_binary(node_modules)
    since = len(traced_server.log())
    code, out, err = run_bounded(
        [str(node), str(NODE_SCRIPT), str(node_modules), traced_server.url], NODE_RUN_TIMEOUT, cwd=REPO
    )
    assert code == 0, f"the Node client failed ({code}):\n{out}\n{err}"
    report = json.loads(out.strip().splitlines()[-1])

    assert report["nodeVersion"] == f"v{NODE_VERSION}", report
    assert report["sdkVersion"].split(".")[0] == TS_CLIENT_MAJOR, report
    assert report["era"] == "modern" and report["protocolVersion"] == MODERN_VERSION, report
    assert report["sessionId"] is None, report
    assert MODERN_VERSION in report["discoverVersions"], report
    assert "ze_execute" in report["tools"], report
    assert [e["message"] for e in report["elicitations"]] == [ELICIT_MESSAGE], report
    result = report["result"]
    assert result["isError"] is False, result
    text = result["content"][0]["text"]
    assert "client: zemcp-ts-check 7.1" in text, text
    assert f"protocol version: {MODERN_VERSION}" in text and "session: none" in text, text

    # On the wire: the probe, the listing and two rounds of the call, all stateless.
    records = wait_trace(traced_server, since, 4)
    assert [r.mcp_method for r in records] == ["server/discover", "tools/list", "tools/call", "tools/call"], records
    for record in records:
        assert record.http == "POST" and record.status == 200, record
        assert record.version == MODERN_VERSION, record
        assert record.session_in is None and record.session_out is None, record
    assert [r.mcp_name for r in records[2:]] == ["ze_execute", "ze_execute"], records


def test_modern_calls_complete_while_a_legacy_elicitation_is_pending(server):
    """A legacy session's pushed elicitation stays pending while modern eliciting calls complete, then completes itself."""
    # A modern call whose first round ends before the legacy session exists ...
    straddler = ModernClient(server.url, name="modern-straddler")
    straddling = straddler.ask_command()

    legacy = server.session(name="legacy-during-modern", version="3.0")
    call, response, stream, ask = legacy.start_elicitation()
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert ask["params"]["message"] == ELICIT_MESSAGE
    legacy.wait_pending(1)

    # ... while the legacy elicitation waits, modern calls run both their rounds.
    for n in range(5):
        text = ModernClient(server.url, name=f"modern-{n}", version="2.0").run_eliciting("session show")
        assert f"client: modern-{n} 2.0" in text and "session: none" in text, text
        assert f"protocol version: {MODERN_VERSION}" in text, text
    # Plain modern calls see no session and leave the legacy one alone.
    status = ModernClient(server.url, name="modern-status").call_result({"command": "server status"})
    assert "pending elicitations: 1 " in status["content"][0]["text"], status

    # The legacy stream is still open and waiting: only keep-alive comments, no event.
    stream.wait_comments(1)
    assert legacy.status()["pending"] == 1
    accepted = legacy.accept(ask["id"], {"command": "session show"})
    assert accepted.status_code == 202, (accepted.status_code, accepted.text)
    messages = stream.rest()
    assert [m.get("id") for m in messages] == [call["id"]], messages
    result = messages[0]["result"]
    assert result["isError"] is False, result
    text = result["content"][0]["text"]
    assert "client: legacy-during-modern 3.0" in text and f"protocol version: {legacy.protocol_version}" in text, text
    assert "session: none" not in text and "age: " in text, text
    legacy.wait_pending(0)

    # The modern call started before it all still completes with its state.
    final = straddler.answer_command(straddling, "session show")
    assert final["resultType"] == "complete" and "client: modern-straddler 1.0" in final["content"][0]["text"], final
