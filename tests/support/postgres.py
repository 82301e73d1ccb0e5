"""A real PostgreSQL for the tests: a cluster of their own on a free loopback port, stopped by PID.

Debian's ``postgresql`` package provides the server binaries in
``/usr/lib/postgresql/<version>/bin`` (``.ci/run`` installs it, and stops the distribution's own
cluster); the tests never use that cluster. :class:`PostgresServer` makes a cluster with
``initdb`` in a temporary directory and runs ``postgres`` on it, as the ``postgres`` user when
the tests run as root (PostgreSQL refuses to run as root), with password authentication over
TCP on 127.0.0.1 only and no Unix socket. Where the binaries or psycopg are missing,
:func:`require_postgres` skips the test and says what to install.

Fixtures:
    postgres: one :class:`PostgresServer` for the whole run (per pytest-xdist worker).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.net import HOST, free_port
from tests.support.processes import stop_group

#: Where Debian installs each major version's server binaries.
DEBIAN_BINARIES = Path("/usr/lib/postgresql")
#: The unprivileged user the server runs as when the tests run as root.
SERVER_USER = "postgres"
#: [seconds] how long the server may take to accept connections after start.
START_TIMEOUT = 30.0
#: [seconds] how long a fast shutdown (SIGINT) may take before the server is killed.
STOP_TIMEOUT = 10.0
#: Settings for a throwaway cluster: no durability, which the tests never test.
FAST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def postgres_binaries() -> Path | None:
    """The ``bin`` directory of the newest PostgreSQL Debian installed, or None."""
    found = []
    for candidate in DEBIAN_BINARIES.glob("*/bin"):
        if (candidate / "postgres").is_file() and (candidate / "initdb").is_file():
            major = re.match(r"\d+", candidate.parent.name)
            found.append((int(major.group()) if major else 0, candidate))
    return max(found)[1] if found else None


def require_postgres() -> Path:
    """The ``bin`` directory of PostgreSQL's server; skips the test, saying why, where it or
    psycopg is missing."""
    binaries = postgres_binaries()
    if binaries is None:
        pytest.skip(
            f"PostgreSQL's server is not installed (no {DEBIAN_BINARIES}/<version>/bin/postgres; "
            "Debian: apt-get install postgresql; .ci/run installs it)"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed (pip install 'psycopg[binary]', part of the test extra)")
    return binaries


@dataclass(frozen=True)
class Database:
    """A database of the cluster and the role that owns it, as a site connects to it.

    Attributes:
        name, user, password: the database, its owner's role and that role's password.
        host, port: where the server listens.
    """

    name: str
    user: str
    password: str
    host: str
    port: int

    def environ(self) -> dict[str, str]:
        """The ``SITE_DB_*`` variables the test Django project reads its ``DATABASES`` from."""
        return {
            "SITE_DB_NAME": self.name,
            "SITE_DB_USER": self.user,
            "SITE_DB_PASSWORD": self.password,
            "SITE_DB_HOST": self.host,
            "SITE_DB_PORT": str(self.port),
        }


class PostgresServer:
    """``postgres`` on a cluster of its own, on 127.0.0.1 and a free port.

    Attributes:
        port: its TCP port.
        password: the password of the superuser ``postgres``.
        pid: the postmaster's process id (what :meth:`stop` signals).
    """

    def __init__(self, binaries: Path):
        self.binaries = binaries
        self.port = free_port()
        self.password = secrets.token_hex(16)
        self._dir = Path(tempfile.mkdtemp(prefix="zemcp-pg-"))
        self._data = self._dir / "data"
        self._owner = pwd.getpwnam(SERVER_USER) if os.geteuid() == 0 else None
        passwords = self._dir / "superuser-password"
        passwords.write_text(self.password + "\n")
        if self._owner is not None:
            # The server's user must reach the directory: it is private to it, not to root.
            os.chown(self._dir, self._owner.pw_uid, self._owner.pw_gid)
            os.chown(passwords, self._owner.pw_uid, self._owner.pw_gid)
        initdb = subprocess.run(
            [
                str(binaries / "initdb"),
                "--pgdata",
                str(self._data),
                "--username",
                "postgres",
                "--pwfile",
                str(passwords),
                "--auth-host",
                "scram-sha-256",
                "--auth-local",
                "scram-sha-256",
                "--encoding",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ],
            **self._as_server_user(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
        if initdb.returncode != 0:
            shutil.rmtree(self._dir, ignore_errors=True)
            pytest.fail(f"initdb failed ({initdb.returncode}):\n{initdb.stdout}{initdb.stderr}")
        passwords.unlink()
        self._log = open(self._dir / "postgres.log", "ab")
        options = {"listen_addresses": HOST, "port": str(self.port), "unix_socket_directories": "", **FAST_SETTINGS}
        self.proc = subprocess.Popen(
            [str(binaries / "postgres"), "-D", str(self._data), *[f"-c{k}={v}" for k, v in options.items()]],
            **self._as_server_user(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pid = self.proc.pid
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _as_server_user(self) -> dict[str, Any]:
        """Popen's arguments that run a program as :data:`SERVER_USER` (as root), else as is."""
        if self._owner is None:
            return {}
        return {"user": self._owner.pw_uid, "group": self._owner.pw_gid, "extra_groups": [], "cwd": self._dir}

    def _wait_ready(self) -> None:
        import psycopg

        end = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"postgres exited with {self.proc.returncode} at start:\n{self.log()}")
            try:
                with self.connect():
                    return
            except psycopg.OperationalError:
                if time.monotonic() > end:
                    pytest.fail(f"postgres did not accept connections within {START_TIMEOUT} s:\n{self.log()}")
                time.sleep(0.1)

    def connect(self, dbname: str = "postgres") -> Any:
        """A new psycopg connection as the superuser, in autocommit mode (close it, or use ``with``)."""
        import psycopg

        return psycopg.connect(
            host=HOST, port=self.port, user="postgres", password=self.password, dbname=dbname, autocommit=True
        )

    def create_database(self, name: str) -> Database:
        """A new database ``name`` owned by a new role of the same name, with a password of its own."""
        from psycopg import sql

        password = secrets.token_hex(16)
        with self.connect() as connection:
            connection.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(name), sql.Literal(password))
            )
            connection.execute(sql.SQL("CREATE DATABASE {0} OWNER {0}").format(sql.Identifier(name)))
        return Database(name, name, password, HOST, self.port)

    def log(self) -> str:
        """What the server logged so far."""
        return (self._dir / "postgres.log").read_text(errors="replace")

    def stop(self) -> None:
        """Fast shutdown (SIGINT to the postmaster's PID: clients are disconnected), then SIGKILL
        to what is left of its process group; the cluster's directory is removed."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=STOP_TIMEOUT)
        stop_group(self.proc, 0)
        self._log.close()
        shutil.rmtree(self._dir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL for the whole run (per xdist worker); skips where it is not installed."""
    server = PostgresServer(require_postgres())
    yield server
    server.stop()
