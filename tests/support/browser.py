"""Headless Chromium for the tests of browser clients, and a server for the page it loads.

Fixtures:
    chromium: the chromium executable; the test skips, saying why, where it is not installed
        (CI installs it: .ci/run).
    page_server: factory ``page_server(html)`` -> :class:`PageServer`, a page served on another
        origin than the MCP server's; stopped after the test.

:func:`run_chromium` loads a page in headless chromium in a process group of its own and
returns the DOM the page's script left.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.gunicorn import STOP_TIMEOUT
from tests.support.net import HOST
from tests.support.processes import stop_group

#: [seconds] bound of one chromium run (start, page load, three fetches, DOM dump).
BROWSER_TIMEOUT = 60
#: [milliseconds] virtual time the page may use; fetches in flight do not consume it.
VIRTUAL_TIME_BUDGET = 15000


class PageServer:
    """Serves one HTML page at ``/page.html`` on 127.0.0.1 in a background thread.

    Attributes:
        origin: ``http://localhost:<port>``: the page's origin as the browser sees it, other
            than the MCP server's ``http://127.0.0.1:<port>`` in host and port.
        url: the page's URL under that origin.
    """

    def __init__(self, page: str):
        body = page.encode("utf-8")

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/page.html":
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args) -> None:
                # The page's requests are not under test; keep pytest's output to zemcp's.
                pass

        self._httpd = ThreadingHTTPServer((HOST, 0), Handler)
        self._httpd.daemon_threads = True
        port = self._httpd.server_address[1]
        self.origin = f"http://localhost:{port}"
        self.url = f"{self.origin}/page.html"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="page-server", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, close the socket and wait for the thread."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def chromium() -> str:
    """The chromium executable; skipped with the reason where it is not installed, as the proxy
    tests are for haproxy and nginx (CI installs all three: .ci/run)."""
    path = shutil.which("chromium") or shutil.which("chromium", path="/usr/bin")
    if path is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium); .ci/run installs it for CI")
    return path


@pytest.fixture
def page_server() -> Iterator:
    """Factory: ``page_server(html)`` serves a page on another origin; stopped after the test."""
    servers: list[PageServer] = []

    def start(page: str) -> PageServer:
        server = PageServer(page)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def run_chromium(chromium: str, url: str, tmp_path: Path) -> tuple[str, str]:
    """Load ``url`` in headless chromium and return (the dumped DOM, chromium's stderr).

    Chromium runs in its own process group, stopped with everything it spawned afterwards,
    also on a timeout. Its profile, cache and home are under ``tmp_path``.
    """
    home = tmp_path / "home"
    home.mkdir()
    # Chromium writes below $HOME and the XDG directories next to its profile (NSS database,
    # caches); point them into the test's directory.
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }
    stderr_path = tmp_path / "chromium.stderr"
    args = [
        chromium,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
        # Nothing but the two loopback servers: no proxy, no DNS for other names, none of the
        # browser's own background traffic (component updates, sync, metrics).
        "--no-proxy-server",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--no-first-run",
        "--metrics-recording-only",
        # Console messages (a blocked CORS request's reason) go to stderr, for failure reports.
        "--enable-logging=stderr",
        f"--virtual-time-budget={VIRTUAL_TIME_BUDGET}",
        "--dump-dom",
        url,
    ]
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, start_new_session=True
        )
        try:
            stdout, _ = proc.communicate(timeout=BROWSER_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"chromium did not finish within {BROWSER_TIMEOUT} s:\n{stderr_path.read_text(errors='replace')}"
            )
        finally:
            stop_group(proc, STOP_TIMEOUT)
    errors = stderr_path.read_text(errors="replace")
    assert proc.returncode == 0, f"chromium exited with {proc.returncode}:\n{errors}"
    return stdout.decode("utf-8", errors="replace"), errors
