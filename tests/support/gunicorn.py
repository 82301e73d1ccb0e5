"""gunicorn serving zemcp on a free loopback port, its fixtures, and reading what it logged.

The integration tests start ``gunicorn -c gunicorn.conf.py wsgi:app`` from the checkout with
the interpreter running pytest, on a free loopback port, and talk to it over 127.0.0.1 only.

Fixtures:
    start_server: factory ``start_server(app="wsgi:app", environ=None, **settings)`` ->
        :class:`GunicornServer`; keyword names are settings without the prefix
        (``elicitation_timeout=1`` sets ``ZEMCP_ELICITATION_TIMEOUT=1``), ``environ`` other
        variables of the server's environment (a site's own). Every server it started is
        stopped at teardown.
    server: one server with short keep-alives for the whole run, for tests whose settings
        are the defaults (plus a 0.5 s keep-alive interval); its clients close after each test.
    client: an initialized :class:`~tests.support.clients.HandshakeClient` (with the
        elicitation capability) on ``server``.
    start_traced_server: like ``start_server``, but gunicorn's access log gets one
        :data:`TRACE_FORMAT` line per request (worker pid, client port, MCP headers, session
        ids), read back with :func:`trace_records`.
    traced_server: one such traced server with the default settings for the whole run.
    _log_dir: the folder every :class:`GunicornServer` logs to; a test (or a module's own
        fixture) that starts one itself passes it, and is marked ``gunicorn`` for it.

:func:`lend` shares a session-wide server of a module's own the way ``server`` does.

A failed test's report gets the tail of the log of each gunicorn it used
(:func:`pytest_runtest_makereport`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support import REPO
from tests.support.clients import CLIENT_VERSION, TAG_HEADER, HandshakeClient
from tests.support.net import HOST, free_port
from tests.support.processes import stop_group

#: [seconds] how long a server may take to accept TCP connections after start.
START_TIMEOUT = 20.0
#: [seconds] how long a server may take to exit after SIGTERM before it is killed.
STOP_TIMEOUT = 5.0

#: Settings of the shared ``server`` fixture (everything else at its default).
DEFAULT_SERVER_SETTINGS = {"keepalive_interval": "0.5", "elicitation_timeout": "30"}


#: Connections opened at once per try of :func:`connection_to_a_worker`.
WORKER_PROBE_BATCH = 8
#: [seconds] how long :func:`connection_to_a_worker` tries (workers may still be starting).
WORKER_PROBE_TIME = 20.0


def connection_to_a_worker(ask_pid: Callable[[requests.Session], int], avoid: set[int]) -> tuple[requests.Session, int]:
    """A kept-alive connection to a gunicorn worker whose pid is not in ``avoid``, and its pid.

    ``ask_pid(http)`` makes one request on the connection ``http`` and returns the pid of the
    worker that answered, or 0 when the worker refused it (the batch's probes took its call
    budget): such a connection is closed and the batch tried again. A new connection goes to the least loaded worker (zemcp's worker
    class; the first to accept under another one), and the others may still be starting:
    one worker can take every connection when they come one by one. Each try opens a batch of
    connections at once, so that the others take some while it is busy; tries go on for
    :data:`WORKER_PROBE_TIME`.

    Raises:
        pytest.fail: no connection reached another worker in time.
    """

    def probe(_: int) -> tuple[requests.Session, int]:
        http = requests.Session()
        return http, ask_pid(http)

    tries = 0
    deadline = time.monotonic() + WORKER_PROBE_TIME
    with ThreadPoolExecutor(WORKER_PROBE_BATCH) as pool:
        while time.monotonic() < deadline:
            tries += 1
            found = None
            for http, pid in pool.map(probe, range(WORKER_PROBE_BATCH)):
                if found is None and pid and pid not in avoid:
                    found = http, pid
                else:
                    http.close()
            if found is not None:
                return found
            time.sleep(0.1)
    pytest.fail(
        f"{tries} batches of {WORKER_PROBE_BATCH} new connections in {WORKER_PROBE_TIME:g} s all reached workers {avoid}"
    )


class GunicornServer:
    """``gunicorn -c gunicorn.conf.py wsgi:app`` in its own process group on a free port.

    Attributes:
        port: the TCP port on 127.0.0.1.
        url: the MCP endpoint URL.
        env: the ZEMCP_* variables it was started with.
        log_path: file receiving gunicorn's stdout and stderr (access and error logs).

    ``gunicorn_args`` are extra command-line options, placed before the app. With
    ``config=False`` gunicorn runs without gunicorn.conf.py, with its own defaults (the sync
    worker), as a site that mounts zemcp in its own gunicorn setup might. ``app`` is the
    WSGI app gunicorn loads (the reference server by default); ``cwd`` the directory it
    starts in (the checkout by default, whose zemcp it then imports); ``environ`` variables
    of its environment other than the settings (a Django site's database, say).
    """

    def __init__(
        self,
        settings: dict[str, Any],
        log_dir: Path,
        gunicorn_args: tuple[str, ...] = (),
        config: bool = True,
        app: str = "wsgi:app",
        cwd: Path = REPO,
        environ: dict[str, str] | None = None,
    ):
        self.port = free_port()
        self.base = f"http://{HOST}:{self.port}"
        self.url = f"{self.base}/mcp"
        # The tests read what went over the wire from the access log, which is off by default.
        self.env = {"ZEMCP_ACCESS_LOG": "-"}
        self.env.update({"ZEMCP_" + key.upper(): str(value) for key, value in settings.items()})
        self.env["ZEMCP_BIND"] = f"{HOST}:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZEMCP_")}
        env.update(environ or {})
        env.update(self.env)
        env["PYTHONUNBUFFERED"] = "1"
        fd, name = tempfile.mkstemp(prefix=f"gunicorn-{self.port}-", suffix=".log", dir=log_dir)
        self.log_path = Path(name)
        self._log = os.fdopen(fd, "wb")
        self._clients: list[HandshakeClient] = []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                # Without -c, gunicorn would still read ./gunicorn.conf.py: name an empty file instead.
                *(
                    ("-c", "gunicorn.conf.py")
                    if config
                    else ("-c", os.devnull, "--bind", self.env["ZEMCP_BIND"], "--access-logfile", "-")
                ),
                *gunicorn_args,
                app,
            ],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            self._wait_listening()
        except BaseException:
            self.stop()
            raise

    def _wait_listening(self) -> None:
        end = time.monotonic() + START_TIMEOUT
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                pytest.fail(f"gunicorn exited with {self.proc.returncode} at start ({self.env}):\n{self.log()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        pytest.fail(
            f"gunicorn did not accept connections on {HOST}:{self.port} within {START_TIMEOUT} s:\n{self.log()}"
        )

    def log(self) -> str:
        """Everything gunicorn wrote so far (it writes to the file directly)."""
        return self.log_path.read_text(errors="replace")

    def client(self, name: str = "zemcp-tests", version: str = "1.0", source: str | None = None) -> HandshakeClient:
        """A new, uninitialized client of this server (closed when the server stops), connecting
        from the loopback address ``source`` when given."""
        client = HandshakeClient(self.url, name, version, source=source)
        self._clients.append(client)
        return client

    def session(
        self,
        *,
        elicitation: bool = True,
        name: str = "zemcp-tests",
        version: str = "1.0",
        protocol_version: str = CLIENT_VERSION,
        source: str | None = None,
    ) -> HandshakeClient:
        """A client with a live session (initialize must succeed), from loopback address ``source`` if given."""
        client = self.client(name, version, source)
        response = client.initialize(elicitation=elicitation, protocol_version=protocol_version)
        assert response.status_code == 200, (response.status_code, response.text)
        return client

    def close_clients(self) -> None:
        """Close every client's streams and connections (the server keeps running)."""
        clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    def stop(self) -> None:
        """Close the clients, SIGTERM the process group, wait, SIGKILL on timeout."""
        self.close_clients()
        stop_group(self.proc, STOP_TIMEOUT)
        self._log.close()


_SERVERS_KEY = pytest.StashKey[list]()


def _remember(request: pytest.FixtureRequest, server: GunicornServer) -> None:
    node = request.node
    node.stash.setdefault(_SERVERS_KEY, []).append(server)


@pytest.fixture(scope="session")
def _log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gunicorn-logs")


def _server_factory(request: pytest.FixtureRequest, log_dir: Path, gunicorn_args: tuple[str, ...] = ()) -> Iterator:
    """Yield ``start(app="wsgi:app", environ=None, **settings)``, which starts a gunicorn for the
    test; stop them all after it."""
    servers: list[GunicornServer] = []

    def start(app: str = "wsgi:app", environ: dict[str, str] | None = None, **settings: Any) -> GunicornServer:
        server = GunicornServer(settings, log_dir, gunicorn_args, app=app, environ=environ)
        servers.append(server)
        _remember(request, server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def start_server(request: pytest.FixtureRequest, _log_dir: Path) -> Iterator:
    """Factory: ``start_server(elicitation_timeout=1, ...)`` starts a gunicorn for this test."""
    yield from _server_factory(request, _log_dir)


@pytest.fixture(scope="session")
def _shared_server(_log_dir: Path) -> Iterator[GunicornServer]:
    server = GunicornServer(DEFAULT_SERVER_SETTINGS, _log_dir)
    yield server
    server.stop()


def lend(request: pytest.FixtureRequest, shared: GunicornServer) -> Iterator[GunicornServer]:
    """Yield the session-wide server ``shared`` to the test of ``request`` (its log goes into
    the test's report if it fails); the clients it made are closed after the test."""
    _remember(request, shared)
    yield shared
    shared.close_clients()


@pytest.fixture
def server(request: pytest.FixtureRequest, _shared_server: GunicornServer) -> Iterator[GunicornServer]:
    """The shared gunicorn (default settings, 0.5 s keep-alive); clients close after each test."""
    yield from lend(request, _shared_server)


@pytest.fixture
def client(server: GunicornServer) -> HandshakeClient:
    """An initialized client with the elicitation capability on the shared server."""
    return server.session()


# -- access-log tracing ---------------------------------------------------------------------

#: gunicorn ``access_log_format`` of traced servers: one line per request, ``|``-separated
#: ``key=value`` fields; a header that was not there reads ``-``.
TRACE_FORMAT = "|".join(
    [
        "zemcp-trace",
        "pid=%(p)s",
        # The client's TCP port: two requests with one port came on one connection.
        "port=%({remote_port}e)s",
        "status=%(s)s",
        "http=%(m)s",
        "path=%(U)s",
        "mcp-method=%({mcp-method}i)s",
        "mcp-name=%({mcp-name}i)s",
        "version=%({mcp-protocol-version}i)s",
        "session-in=%({mcp-session-id}i)s",
        "session-out=%({mcp-session-id}o)s",
        "content-type=%({content-type}o)s",
        "tag=%({" + TAG_HEADER.lower() + "}i)s",
    ]
)


@dataclass(frozen=True)
class TraceRecord:
    """One request as a traced server's access log recorded it (``None`` for an absent header).

    Attributes:
        pid: the gunicorn worker process that served it.
        port: the client's TCP port of the connection it came on.
        status: the HTTP status.
        http: the HTTP method.
        path, mcp_method, mcp_name, version, session_in, session_out, content_type, tag: the
            path, the ``Mcp-Method``, ``Mcp-Name`` and ``MCP-Protocol-Version`` request headers,
            the ``Mcp-Session-Id`` request and response headers, the response ``Content-Type``,
            and the :data:`TAG_HEADER` request header.
    """

    pid: int
    port: int
    status: int
    http: str
    path: str
    mcp_method: str | None
    mcp_name: str | None
    version: str | None
    session_in: str | None
    session_out: str | None
    content_type: str | None
    tag: str | None


def trace_records(server: GunicornServer, since: int = 0) -> list[TraceRecord]:
    """The :data:`TRACE_FORMAT` lines of ``server``'s log after character ``since``, in log order.

    A request is logged when its response ended, so a record lands after its client read the
    end of the answer; use :func:`wait_trace` to wait for it.
    """
    records = []
    for line in server.log()[since:].splitlines():
        if not line.startswith("zemcp-trace|"):
            continue
        fields = dict(part.split("=", 1) for part in line.split("|")[1:])
        value = {key: (None if text == "-" else text) for key, text in fields.items()}
        records.append(
            TraceRecord(
                pid=int(fields["pid"].strip("<>")),
                port=int(fields["port"]),
                status=int(fields["status"]),
                http=fields["http"],
                path=fields["path"],
                mcp_method=value["mcp-method"],
                mcp_name=value["mcp-name"],
                version=value["version"],
                session_in=value["session-in"],
                session_out=value["session-out"],
                content_type=value["content-type"],
                tag=value["tag"],
            )
        )
    return records


def wait_trace(
    server: GunicornServer,
    since: int,
    count: int,
    deadline: float = 5.0,
    until: Callable[[TraceRecord], bool] | None = None,
) -> list[TraceRecord]:
    """Poll until at least ``count`` records follow ``since`` and, with ``until``, one of them
    satisfies it (bounded by ``deadline`` s); returns them all."""
    end = time.monotonic() + deadline
    while True:
        records = trace_records(server, since)
        done = len(records) >= count and (until is None or any(until(r) for r in records))
        if done or time.monotonic() > end:
            assert done, (
                f"expected {count} traced requests within {deadline} s (and one matching {until}), got {records}"
            )
            return records
        time.sleep(0.05)


@pytest.fixture
def start_traced_server(request: pytest.FixtureRequest, _log_dir: Path) -> Iterator:
    """Factory like ``start_server``, for a gunicorn whose access log uses :data:`TRACE_FORMAT`."""
    yield from _server_factory(request, _log_dir, ("--access-logformat", TRACE_FORMAT))


@pytest.fixture(scope="session")
def _shared_traced_server(_log_dir: Path) -> Iterator[GunicornServer]:
    server = GunicornServer(DEFAULT_SERVER_SETTINGS, _log_dir, ("--access-logformat", TRACE_FORMAT))
    yield server
    server.stop()


@pytest.fixture
def traced_server(request: pytest.FixtureRequest, _shared_traced_server: GunicornServer) -> Iterator[GunicornServer]:
    """A shared traced gunicorn (the ``server`` settings); read its requests with :func:`trace_records`."""
    yield from lend(request, _shared_traced_server)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """On a failure, attach the tail of the log of each gunicorn the test used."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for server in item.stash.get(_SERVERS_KEY, []):
            try:
                lines = server.log().splitlines()[-80:]
            except (OSError, ValueError):
                continue
            report.sections.append((f"gunicorn {server.url} {server.env}", "\n".join(lines)))
