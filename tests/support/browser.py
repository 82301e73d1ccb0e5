"""Headless Chromium for the tests of browser clients, and a server for the page it loads.

Fixtures:
    chromium: the chromium executable; the test skips, saying why, where it is not installed
        (CI installs it: .ci/run).
    page_server: factory ``page_server(html)`` -> :class:`FileServer`, a page served at
        :data:`PAGE_PATH` on another origin than the MCP server's; stopped after the test.

:func:`run_chromium` loads a page in headless chromium in a process group of its own and
returns the DOM the page's script left. :func:`devtools_browser` runs chromium under the
Chrome DevTools Protocol instead, for tests that look into frames, click and take screenshots
(:class:`DevTools`).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import websocket

from tests.support.gunicorn import STOP_TIMEOUT
from tests.support.net import HOST
from tests.support.processes import stop_group

#: Where ``page_server`` serves its page.
PAGE_PATH = "/page.html"
#: [seconds] bound of one chromium run (start, page load, three fetches, DOM dump).
BROWSER_TIMEOUT = 60
#: [milliseconds] virtual time the page may use; fetches in flight do not consume it.
VIRTUAL_TIME_BUDGET = 15000


class FileServer:
    """Serves fixed files on 127.0.0.1 in a background thread, under the origin ``origin_host``
    (pages on another origin than the MCP server's, the MCP Apps host and its sandbox).

    Args:
        files: URL path -> (body, Content-Type).
        origin_host: the host name of the origin the browser sees (``localhost`` or ``127.0.0.1``).

    Attributes:
        origin: ``http://<origin_host>:<port>``.
    """

    def __init__(self, files: dict[str, tuple[bytes, str]], origin_host: str):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                found = files.get(urllib.parse.urlsplit(self.path).path)
                if found is None:
                    self.send_error(404)
                    return
                body, kind = found
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args) -> None:
                # The pages' requests are not under test; keep pytest's output to the servers'.
                pass

        self._httpd = ThreadingHTTPServer((HOST, 0), Handler)
        self._httpd.daemon_threads = True
        self.origin = f"http://{origin_host}:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="file-server", daemon=True)
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
    servers: list[FileServer] = []

    def start(page: str) -> FileServer:
        # localhost, not 127.0.0.1: the page's origin differs from the MCP server's in host too.
        server = FileServer({PAGE_PATH: (page.encode("utf-8"), "text/html; charset=utf-8")}, "localhost")
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def _environment(tmp_path: Path) -> dict[str, str]:
    """Chromium's environment: $HOME and the XDG directories under ``tmp_path``/home.

    Chromium writes below them next to its profile (NSS database, caches).
    """
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }


#: Nothing but loopback servers: no proxy, no DNS for other names, none of the browser's own
#: background traffic (component updates, sync, metrics).
LOOPBACK_ONLY = [
    "--no-proxy-server",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--no-first-run",
    "--metrics-recording-only",
]


def run_chromium(chromium: str, url: str, tmp_path: Path) -> tuple[str, str]:
    """Load ``url`` in headless chromium and return (the dumped DOM, chromium's stderr).

    Chromium runs in its own process group, stopped with everything it spawned afterwards,
    also on a timeout. Its profile, cache and home are under ``tmp_path``.
    """
    env = _environment(tmp_path)
    stderr_path = tmp_path / "chromium.stderr"
    args = [
        chromium,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
        *LOOPBACK_ONLY,
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


#: [seconds] how long chromium may take to open its DevTools port.
DEVTOOLS_START_TIMEOUT = 20.0
#: [seconds] bound of one DevTools command's answer.
DEVTOOLS_COMMAND_TIMEOUT = 15.0
#: [seconds] between two evaluations of :meth:`DevTools.wait_for`.
POLL_INTERVAL = 0.1


class DevTools:
    """One page of a headless chromium, driven over the Chrome DevTools Protocol.

    Commands travel on the browser's websocket in the page's flat session. Console messages
    and uncaught exceptions of the page's frames are kept in :attr:`console` (text lines) for
    failure messages.
    """

    def __init__(
        self, connection: websocket.WebSocket, session_id: str, stderr: Path, ids: Iterator[int] | None = None
    ):
        self._connection = connection
        self._session_id = session_id
        # Message ids are per connection: a page's object shares the browser's counter.
        self._ids = ids if ids is not None else itertools.count(1)
        self._stderr = stderr
        self.console: list[str] = []

    def send(self, method: str, params: dict | None = None, *, session: bool = True) -> dict:
        """Send one command and return its result.

        Args:
            method: the protocol's method (``Page.navigate``).
            params: its parameters.
            session: False for a command of the browser itself rather than of the page.
        Returns:
            the command's ``result`` object.
        Raises:
            AssertionError: chromium answered with an error, or not within
                :data:`DEVTOOLS_COMMAND_TIMEOUT` seconds.
        """
        message_id = next(self._ids)
        message = {"id": message_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session_id
        self._connection.send(json.dumps(message))
        deadline = time.monotonic() + DEVTOOLS_COMMAND_TIMEOUT
        while time.monotonic() < deadline:
            self._connection.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                answer = json.loads(self._connection.recv())
            except websocket.WebSocketTimeoutException:
                break
            if answer.get("id") == message_id:
                assert "error" not in answer, f"{method} failed: {answer['error']}"
                return answer.get("result", {})
            self._note(answer)
        pytest.fail(f"chromium did not answer {method} within {DEVTOOLS_COMMAND_TIMEOUT} s{self.diagnosis()}")

    def _note(self, event: dict) -> None:
        """Keep the text of console messages and uncaught exceptions (other events are dropped)."""
        params = event.get("params", {})
        if event.get("method") == "Runtime.consoleAPICalled":
            words = [str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", [])]
            self.console.append(f"console.{params.get('type')}: {' '.join(words)}")
        elif event.get("method") == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.console.append(f"exception: {details.get('exception', {}).get('description', details.get('text'))}")

    def diagnosis(self) -> str:
        """The page's console lines and the tail of chromium's stderr, for a failure message."""
        stderr = self._stderr.read_text(errors="replace")[-3000:] if self._stderr.exists() else ""
        return "\nconsole:\n" + "\n".join(self.console[-40:]) + f"\nchromium stderr (tail):\n{stderr}"

    def navigate(self, url: str) -> None:
        """Load ``url`` in the page (returns when the navigation is committed)."""
        answer = self.send("Page.navigate", {"url": url})
        assert "errorText" not in answer, f"navigating to {url} failed: {answer['errorText']}"

    def evaluate(self, expression: str, context: int | None = None):
        """The JSON value of ``expression`` (promises awaited) in the page's main frame, or in
        the execution context ``context`` (:meth:`frame_context`)."""
        params: dict = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        if context is not None:
            params["contextId"] = context
        answer = self.send("Runtime.evaluate", params)
        assert "exceptionDetails" not in answer, f"{expression!r} threw: {answer['exceptionDetails']}"
        return answer["result"].get("value")

    def wait_for(self, expression: str, timeout: float, context: int | None = None, what: str = ""):
        """Evaluate ``expression`` until its value is truthy and return that value.

        Args:
            expression: JavaScript, evaluated as by :meth:`evaluate`.
            timeout: [seconds] how long to keep trying.
            context: the execution context, as for :meth:`evaluate`.
            what: what is awaited, for the failure message.
        Raises:
            pytest.fail: still falsy after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression, context)
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"{what or expression} did not happen within {timeout} s{self.diagnosis()}")
            time.sleep(POLL_INTERVAL)

    def frames(self) -> list[dict]:
        """Every frame of the page, parents first: dicts of ``id``, ``parentId`` (None for the
        main frame), ``url`` and ``securityOrigin``."""
        found: list[dict] = []

        def walk(node: dict, parent: str | None) -> None:
            frame = node["frame"]
            found.append({**frame, "parentId": parent})
            for child in node.get("childFrames", []):
                walk(child, frame["id"])

        walk(self.send("Page.getFrameTree")["frameTree"], None)
        return found

    def find_frame(self, predicate: Callable[[dict, list[dict]], bool], timeout: float, what: str) -> dict:
        """The first frame of :meth:`frames` for which ``predicate(frame, frames)`` holds,
        waiting up to ``timeout`` seconds for it to appear."""
        deadline = time.monotonic() + timeout
        while True:
            frames = self.frames()
            for frame in frames:
                if predicate(frame, frames):
                    return frame
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} frame within {timeout} s among {frames}{self.diagnosis()}")
            time.sleep(POLL_INTERVAL)

    def frame_context(self, frame_id: str) -> int:
        """An execution context in frame ``frame_id`` (an isolated world: its own globals, the
        frame's DOM), for :meth:`evaluate` there, whatever the frame's origin."""
        return self.send("Page.createIsolatedWorld", {"frameId": frame_id, "worldName": "zemcp-tests"})[
            "executionContextId"
        ]

    def screenshot(self, path: Path) -> None:
        """Write a PNG of the page's viewport to ``path``."""
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))


@contextlib.contextmanager
def devtools_browser(chromium: str, tmp_path: Path, width: int = 800, height: int = 600) -> Iterator[DevTools]:
    """Headless chromium with one blank page of ``width`` x ``height`` CSS pixels under DevTools.

    Chromium runs in its own process group with its profile under ``tmp_path`` and is stopped
    with everything it spawned on exit. Site isolation is off, so that every frame of the page
    is in one renderer and one DevTools target (origins and iframe sandboxes apply as always:
    they do not depend on processes).

    Yields:
        the :class:`DevTools` of the page.
    """
    profile = tmp_path / "profile"
    stderr_path = tmp_path / "chromium.stderr"
    args = [
        chromium,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={profile}",
        *LOOPBACK_ONLY,
        "--disable-site-isolation-trials",
        "--disable-features=IsolateOrigins,site-per-process,IsolateSandboxedIframes",
        "--hide-scrollbars",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        "--enable-logging=stderr",
        "about:blank",
    ]
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            args,
            env=_environment(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    connection = None
    try:
        # Chromium writes the port it chose, and the browser's websocket path, into this file.
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + DEVTOOLS_START_TIMEOUT
        lines: list[str] = []
        while len(lines) < 2:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"chromium opened no DevTools port (exit code {proc.poll()}):\n"
                    f"{stderr_path.read_text(errors='replace')}"
                )
            time.sleep(POLL_INTERVAL)
            lines = port_file.read_text().split() if port_file.exists() else []
        # No Origin header: chromium refuses DevTools websockets from origins it was not told of.
        connection = websocket.create_connection(
            f"ws://{HOST}:{lines[0]}{lines[1]}", timeout=DEVTOOLS_COMMAND_TIMEOUT, suppress_origin=True
        )
        browser = DevTools(connection, "", stderr_path)
        target = browser.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)
        page = DevTools(connection, session["sessionId"], stderr_path, browser._ids)
        page.send("Page.enable")
        page.send("Runtime.enable")
        page.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        yield page
    finally:
        if connection is not None:
            connection.close()
        stop_group(proc, STOP_TIMEOUT)
