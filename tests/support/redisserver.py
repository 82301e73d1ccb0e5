"""A real ``redis-server`` for the tests: on a free loopback port, no persistence, stopped by PID;
frozen (SIGSTOP) and thawed (SIGCONT) to play a stall, as in a failover.

Debian's ``redis-server`` package provides it (``.ci/run`` installs it). Where it is missing,
:func:`require_redis` skips the test and says so.

Fixtures:
    redis_server: one :class:`RedisServer` for the whole run, its keys flushed before each test.
    start_redis: factory ``start_redis()`` -> :class:`RedisServer`, one of the test's own (for
        tests that stop or freeze it), stopped at teardown.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.net import HOST, free_port
from tests.support.processes import stop_group

#: [seconds] how long redis-server may take to accept connections.
START_TIMEOUT = 10.0


def redis_binary() -> str | None:
    """The path of ``redis-server``, or None (also looked for in /usr/sbin and /usr/bin)."""
    return shutil.which("redis-server") or shutil.which("redis-server", path="/usr/sbin:/usr/bin:/sbin")


def require_redis() -> str:
    """The path of ``redis-server``; skips the test, saying why, where it is missing."""
    binary = redis_binary()
    if binary is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server; .ci/run installs it)")
    try:
        import redis  # noqa: F401
    except ImportError:
        pytest.skip("the redis package is not installed (pip install '.[redis]')")
    return binary


class RedisServer:
    """One ``redis-server`` on 127.0.0.1, without persistence; :meth:`stop` and :meth:`start`
    stop it (its data is lost, as after a crash) and start it again on the same port;
    :meth:`stall` makes it stall and answer again with its data (as a failover or a restart
    with persistence looks to a client).

    Attributes:
        port: its TCP port.
        url: ``redis://127.0.0.1:<port>/0``.
    """

    def __init__(self, binary: str):
        self.binary = binary
        self.port = free_port()
        self.url = f"redis://{HOST}:{self.port}/0"
        self._dir = Path(tempfile.mkdtemp(prefix="zemcp-redis-"))
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        """Start the server (again); returns once it accepts connections."""
        log = open(self._dir / "redis.log", "ab")
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                HOST,
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self._dir),
                "--protected-mode",
                "yes",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        end = time.monotonic() + START_TIMEOUT
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                pytest.fail(f"redis-server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        pytest.fail(f"redis-server did not answer on {HOST}:{self.port} within {START_TIMEOUT} s:\n{self.log()}")

    def stop(self) -> None:
        """Stop the server (its data is gone)."""
        if self.proc is not None:
            self.thaw()  # a stopped process would not see the SIGTERM
            stop_group(self.proc, 5.0)
            self.proc = None

    def freeze(self) -> None:
        """Stop the server process (SIGSTOP): connections stay open and new ones are accepted
        by the kernel, but nothing is answered until :meth:`thaw`."""
        assert self.proc is not None, "the server is not running"
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """Let a frozen server go on (SIGCONT); it answers what was sent meanwhile."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def stall(self, seconds: float) -> None:
        """Freeze the server for ``seconds``, then thaw it (returns after the thaw, also when interrupted)."""
        self.freeze()
        try:
            time.sleep(seconds)
        finally:
            self.thaw()

    def flush(self) -> None:
        """Forget every key (between tests)."""
        import redis

        client = redis.Redis.from_url(self.url)
        try:
            client.flushall()
        finally:
            client.close()

    def log(self) -> str:
        """What the server wrote to its log."""
        path = self._dir / "redis.log"
        return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture(scope="session")
def _shared_redis() -> Iterator[RedisServer]:
    server = RedisServer(require_redis())
    yield server
    server.stop()


@pytest.fixture
def redis_server(_shared_redis: RedisServer) -> RedisServer:
    """The run's redis-server, with no keys left by an earlier test."""
    _shared_redis.flush()
    return _shared_redis


@pytest.fixture
def start_redis() -> Iterator[Callable[[], RedisServer]]:
    """Factory: a redis-server of this test's own (stopped at teardown)."""
    started: list[RedisServer] = []

    def start() -> RedisServer:
        server = RedisServer(require_redis())
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
