"""The official TypeScript MCP SDK 1.x client as a helper for any test: handshake-era eliciting calls.

tests/node/legacy_client.cjs runs ``@modelcontextprotocol/sdk`` 1.x on Node 22 against a
server: one session (``initialize`` with the elicitation capability), ``ze_execute {}``
called N times, each ``elicitation/create`` answered with ``{"command": "session show"}`` and
each result checked to be that command's output for the client's own session; every HTTP
request travels on a TCP connection of its own. Behind one listening socket with several
workers the kernel then hands a session's requests, and each elicitation's answer, to
whichever worker accepts them, which only a shared state backend (``ZEMCP_REDIS_URL``) serves
correctly.

* :func:`install_sdk1` installs Node 22, the SDK 1.x and undici into
  ``<cache folder>/sdk1`` (tests/support/nodeinstall.py), once; it skips, saying why, without npm
  or off x86-64 Linux. The ``ts_sdk1_modules`` session fixture (tests/support/node.py) calls it.
* :func:`run_legacy_calls` runs the client and returns its summary.
* :func:`run_late_answer` runs tests/node/late_answer_client.cjs: one elicitation answered
  after the server's elicitation timeout, then a call in the same session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.nodeinstall import NODE_PACKAGE, NODE_VERSION, cache_folder, node_binary, npm_install, run_bounded

SDK_PACKAGE = "@modelcontextprotocol/sdk"
SDK_MAJOR = "1"
#: The HTTP client the script gives the SDK, for its keep-alive switch (Node's built-in fetch has none).
UNDICI_MAJOR = "7"
SCRIPT = REPO / "tests" / "node" / "legacy_client.cjs"
LATE_ANSWER_SCRIPT = REPO / "tests" / "node" / "late_answer_client.cjs"
#: The ``clientInfo`` the script sends (``session show`` prints it).
CLIENT_NAME = "zemcp-ts-sdk1"
CLIENT_VERSION = "1.0"
#: [seconds] allowed beyond the script's own deadline for Node to start and print its summary.
STARTUP_GRACE = 15.0


def install_sdk1() -> Path:
    """The node_modules folder with Node 22, ``@modelcontextprotocol/sdk`` 1.x and undici, installed once and cached."""
    return npm_install(
        cache_folder() / "sdk1", {NODE_PACKAGE: NODE_VERSION, SDK_PACKAGE: SDK_MAJOR, "undici": UNDICI_MAJOR}
    )


def run_legacy_calls(url: str, n: int, timeout: float, *, concurrency: int = 1, modules: Path | None = None) -> dict:
    """Run tests/node/legacy_client.cjs: one session, ``n`` eliciting ``ze_execute`` calls.

    Args:
        url: the MCP endpoint (``http://127.0.0.1:<port>/mcp``, or a proxy's).
        n: how many calls, each answered by elicitation with ``session show``.
        timeout: [seconds] bound on the whole run (the script's own deadline; the process is
            stopped :data:`STARTUP_GRACE` s later if it has not exited by then).
        concurrency: how many calls are in flight at once in the session.
        modules: the install of :func:`install_sdk1` (installed, or skipped, when omitted).
    Returns:
        the script's summary: ``sdkVersion``, ``nodeVersion``, ``protocolVersion`` (the
        negotiated one), ``sessionId``, ``calls`` (= ``n``), ``concurrency``, ``ok`` (calls
        whose result was this session's ``session show``), ``failures`` (a list of
        ``{"call": index or None, "message": text}``; a None index is a failure of the run:
        the deadline, ``initialize``, the DELETE, elicitations not one per call, or
        ``requests`` != ``connections``), ``elicitations`` (questions answered),
        ``transportErrors`` (``{"message": text}`` for each error the SDK reported
        through ``Client.onerror`` while the calls ran), ``requests`` (HTTP requests sent), ``connections`` (TCP connections opened),
        ``seconds`` (wall time of the run); plus ``exitCode`` (0 exactly when every call
        succeeded and ``failures`` is empty) and ``stderr`` (what Node wrote there).
    """
    modules = install_sdk1() if modules is None else modules
    command = [str(node_binary(modules)), str(SCRIPT), str(modules), url, str(n), str(concurrency), f"{timeout:g}"]
    code, out, err = run_bounded(command, timeout + STARTUP_GRACE, cwd=REPO)
    lines = out.strip().splitlines()
    try:
        summary = json.loads(lines[-1])
    except (IndexError, ValueError):
        pytest.fail(f"the SDK 1.x client printed no summary (exit code {code}):\n{out}\n{err}")
    return {**summary, "exitCode": code, "stderr": err}


def run_late_answer(url: str, hold: float, timeout: float, *, modules: Path) -> dict:
    """Run tests/node/late_answer_client.cjs: ``ze_execute {}`` whose elicitation the SDK answers
    ``hold`` seconds late (its handler holds the event loop), then ``session show``, in one session.

    Args:
        url: the MCP endpoint of a server whose ``elicitation_timeout`` is shorter than ``hold``.
        hold: [seconds] how long the elicitation handler holds Node's event loop before it answers.
        timeout: [seconds] bound on the whole run (stopped :data:`STARTUP_GRACE` s later).
        modules: the install of :func:`install_sdk1`.
    Returns:
        the script's summary: ``sdkVersion``, ``sessionIds`` (the transport's session id after
        initialize and after the second call), ``initializes`` (initialize requests sent),
        ``askedId`` (the elicitation's id), ``answers`` (``{"id", "status"}`` of each POSTed
        answer), ``errors`` (``{"message"}`` of each ``Client.onerror`` report), ``results``
        (the two CallToolResults), ``failure`` (None, or why the run failed); plus ``exitCode``
        and ``stderr``.
    """
    command = [str(node_binary(modules)), str(LATE_ANSWER_SCRIPT), str(modules), url, f"{hold:g}", f"{timeout:g}"]
    code, out, err = run_bounded(command, timeout + STARTUP_GRACE, cwd=REPO)
    lines = out.strip().splitlines()
    try:
        summary = json.loads(lines[-1])
    except (IndexError, ValueError):
        pytest.fail(f"the SDK 1.x late-answer client printed no summary (exit code {code}):\n{out}\n{err}")
    return {**summary, "exitCode": code, "stderr": err}
