"""The official Python SDK's MCP Apps server (tests/apps/sdk_weather.py) on a free loopback port.

Fixtures:
    sdk_apps_url: the ``/mcp`` URL of that server, serving the test View (tests/support/apphost.py)
        as its weather card and admitting the host page's origin by CORS; stopped after the test.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.apps.sdk_weather import REFRESH_TOOL
from tests.support import REPO
from tests.support.apphost import AppHost
from tests.support.gunicorn import START_TIMEOUT, STOP_TIMEOUT
from tests.support.net import HOST, free_port
from tests.support.processes import stop_group


def wait_listening(proc: subprocess.Popen, port: int, log: Path) -> None:
    """Wait until ``port`` accepts connections; fail with the server's log if ``proc`` exits or
    :data:`~tests.support.gunicorn.START_TIMEOUT` seconds pass first."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the SDK server did not listen on {port} (exit code {proc.poll()}):\n{log.read_text()}")
            time.sleep(0.1)


@pytest.fixture
def sdk_apps_url(app_host: AppHost, tmp_path: Path) -> Iterator[str]:
    """The SDK's weather server with the test View as its card: its ``/mcp`` URL."""
    card = tmp_path / "card.html"
    card.write_text(app_host.app_html(REFRESH_TOOL), encoding="utf-8")
    port = free_port()
    log = tmp_path / "sdk-server.log"
    command = [
        sys.executable,
        "-m",
        "tests.apps.sdk_weather",
        f"--port={port}",
        f"--html={card}",
        f"--allow-origin={app_host.origin}",
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command, cwd=REPO, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_listening(proc, port, log)
        yield f"http://{HOST}:{port}/mcp"
    finally:
        stop_group(proc, STOP_TIMEOUT)
