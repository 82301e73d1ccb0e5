"""Processes for the proxy tests and benchmarks/proxy.py: zemcp instances, HAProxy, nginx.

Everything runs from the configurations in deploy/, rendered for free 127.0.0.1 ports:

* an :class:`Instance` is gunicorn started with the arguments of ``ExecStart`` in
  deploy/zemcp@.service (so with deploy/gunicorn-instance.conf.py), ``ZEMCP_INSTANCE`` set
  to its name and ``ZEMCP_BIND`` to its port, as the unit does;
* :class:`HAProxy` renders deploy/haproxy.cfg and runs ``haproxy -db -f <cfg>``;
* :class:`Nginx` renders deploy/nginx.conf and includes it from a minimal main
  configuration whose pid, logs and temporary files live in its own prefix directory,
  then runs ``nginx -p <prefix> -c <conf> -g 'daemon off;'``;
* :class:`NginxRoundRobin` does the same with deploy/nginx-roundrobin.conf (plain round
  robin, for instances that share their state in Redis).

:func:`start_stack` starts instances with given settings and one of these proxies in front.

Each process gets its own process group and is stopped with SIGTERM, then SIGKILL. No
pytest here, so that the benchmark can use it too.
"""

from __future__ import annotations

import abc
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from tests.support import REPO
from tests.support.processes import stop_group

DEPLOY = REPO / "deploy"
HOST = "127.0.0.1"
#: [seconds] how long a process may take to listen after it was started.
START_TIMEOUT = 20.0
#: [seconds] how long a process group gets after SIGTERM before it is killed.
STOP_TIMEOUT = 10.0
#: The ``ZEMCP_REQUEST_STATE_KEY`` of every instance this process starts.
SHARED_REQUEST_STATE_KEY = secrets.token_urlsafe(32)
#: The log line an instance writes when a request names a session of another instance.
ROUTING_WARNING = re.compile(r"request for a session of instance '([^']*)' reached instance '([^']*)'")


class HarnessError(RuntimeError):
    """A process of the harness did not start, or a configuration did not render."""


def find_binary(name: str) -> str | None:
    """The path of ``name`` on PATH or in the sbin directories, where Debian installs the proxies."""
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))


_issued_ports: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago and not handed out before by this process."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        # The kernel may offer a port again as soon as it is released; two processes of one
        # stack must never be given the same one.
        if port not in _issued_ports:
            _issued_ports.add(port)
            return port


def render(template: Path, values: dict[str, str], instances: list[Instance]) -> str:
    """Render a deploy/ template with deploy/render.py, exactly as docs/deploy.md shows."""
    argv = [sys.executable, str(DEPLOY / "render.py"), str(template)]
    for name, value in values.items():
        argv += ["--set", f"{name}={value}"]
    for instance in instances:
        argv += ["--instance", f"{instance.name}={instance.address}"]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise HarnessError(f"rendering {template.name} failed: {done.stderr.strip()}")
    return done.stdout


def instance_command() -> list[str]:
    """The gunicorn command of deploy/zemcp@.service, run by this interpreter.

    Raises:
        HarnessError: the unit has no ``ExecStart=`` line running gunicorn.
    """
    unit = DEPLOY / "zemcp@.service"
    for line in unit.read_text().splitlines():
        if line.startswith("ExecStart="):
            argv = shlex.split(line.removeprefix("ExecStart="))
            if not argv or not argv[0].endswith("/gunicorn"):
                raise HarnessError(f"{unit.name}: ExecStart does not run gunicorn: {line}")
            return [sys.executable, "-m", "gunicorn", *argv[1:]]
    raise HarnessError(f"{unit.name} has no ExecStart= line")


class Process:
    """A child process in its own process group, with its output in a log file."""

    def __init__(self, argv: list[str], log_path: Path, *, env: dict[str, str] | None = None, cwd: Path = REPO):
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        """Everything the process wrote so far."""
        return self.log_path.read_text(errors="replace")

    def wait_listening(self, port: int) -> None:
        """Return once ``port`` accepts connections.

        Raises:
            HarnessError: the process exited, or did not listen within ``START_TIMEOUT``.
        """
        end = time.monotonic() + START_TIMEOUT
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise HarnessError(f"{shlex.join(self.argv)} exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with socket.create_connection((HOST, port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise HarnessError(
            f"{shlex.join(self.argv)} did not listen on {HOST}:{port} within {START_TIMEOUT} s:\n{self.log()}"
        )

    def stop(self) -> None:
        """SIGTERM the process group, wait, SIGKILL it on timeout; close the log."""
        stop_group(self.proc, STOP_TIMEOUT)
        self._log.close()


class Instance:
    """One zemcp instance: gunicorn as deploy/zemcp@.service runs it, on a free port.

    Attributes:
        name: its ``ZEMCP_INSTANCE``, the prefix of its session ids.
        port, address, url: where it listens (``address`` is ``host:port``).
    """

    def __init__(self, name: str, workdir: Path, *, settings: dict[str, str] | None = None):
        """Start gunicorn; ``settings`` are extra environment variables (whole names, ``ZEMCP_REDIS_URL``)."""
        self.name = name
        self.port = free_port()
        self.address = f"{HOST}:{self.port}"
        self.url = f"http://{self.address}/mcp"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZEMCP_")}
        # One requestState key for every instance, as deploy/ requires.
        env["ZEMCP_REQUEST_STATE_KEY"] = SHARED_REQUEST_STATE_KEY
        env.update(settings or {})
        env.update({"ZEMCP_INSTANCE": name, "ZEMCP_BIND": self.address, "PYTHONUNBUFFERED": "1"})
        self.process = Process(instance_command(), workdir / f"instance-{name}.log", env=env)

    def wait_ready(self) -> None:
        """Return once the instance listens (see :meth:`Process.wait_listening`)."""
        self.process.wait_listening(self.port)

    def log(self) -> str:
        """gunicorn's access and error log so far."""
        return self.process.log()

    def routing_warnings(self) -> list[tuple[str, str]]:
        """``(owner, this instance)`` of every routing warning in the log."""
        return ROUTING_WARNING.findall(self.log())

    def stop(self) -> None:
        """Stop the instance (its sessions end with it)."""
        self.process.stop()


@dataclass(frozen=True)
class Routed:
    """One request as the proxy logged it.

    Attributes:
        owner: the instance named by the request's session id; None without an id.
        served_by: the instance that answered (after any retry), or None.
        status: the HTTP status sent to the client.
    """

    owner: str | None
    served_by: str | None
    status: int


class Proxy(abc.ABC):
    """Common part of :class:`HAProxy` and :class:`Nginx`.

    Attributes:
        name: the proxy's key in :data:`PROXIES` or :data:`ROUND_ROBIN_PROXIES`, and the
            name of its directory under the work directory.
        binary: the program that runs it.
    """

    name = ""
    binary = ""

    def __init__(self, workdir: Path, instances: list[Instance]):
        self.instances = instances
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}/mcp"
        self.dir = workdir / self.name
        self.dir.mkdir()
        self.process: Process | None = None

    def _start(self, args: list[str]) -> None:
        binary = find_binary(self.binary)
        if binary is None:
            raise HarnessError(f"{self.binary} is not installed (Debian: apt-get install {self.binary})")
        self.process = Process([binary, *args], self.dir / "stdout.log", cwd=self.dir)
        try:
            self.process.wait_listening(self.port)
        except BaseException:
            self.process.stop()
            raise

    @abc.abstractmethod
    def logs(self) -> str:
        """The proxy's logs so far (for failure reports)."""

    @abc.abstractmethod
    def routed(self) -> list[Routed]:
        """Every request the proxy logged so far, in log order."""

    def unlogged(self) -> int:
        """How many requests the proxy dropped from its log so far (it counts them)."""
        return 0

    def wait_routed(self, count: int, timeout: float = 5.0) -> list[Routed]:
        """Poll until ``count`` requests are logged or counted as dropped; returns the logged ones."""
        end = time.monotonic() + timeout
        while True:
            records = self.routed()
            if len(records) + self.unlogged() >= count or time.monotonic() > end:
                return records
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the proxy."""
        if self.process is not None:
            self.process.stop()


class HAProxy(Proxy):
    """deploy/haproxy.cfg rendered for the instances, run as ``haproxy -db -f <cfg>``."""

    name = "haproxy"
    binary = "haproxy"
    # option httplog, after the syslog header: "<client> [<date>] zemcp zemcp_instances/<server>
    # Tq/Tw/Tc/Tr/Ta <status> ... {<owner>} "<request>"".
    _LINE = re.compile(r" zemcp zemcp_instances/(?P<server>\S+) \S+ (?P<status>\d{3}) .* \{(?P<owner>[^}]*)\} \"")

    def __init__(self, workdir: Path, instances: list[Instance]):
        super().__init__(workdir, instances)
        # The admin socket's path must stay short (HAProxy takes 97 bytes at most), which a
        # test's own directory, nested per test and per xdist worker, may not be.
        self._run_dir = tempfile.TemporaryDirectory(prefix="zemcp-haproxy-")
        self.config = self.dir / "haproxy.cfg"
        self.config.write_text(
            render(
                DEPLOY / "haproxy.cfg",
                {
                    "LISTEN": f"{HOST}:{self.port}",
                    "LOG_TARGET": "stdout",
                    "RUN_DIR": self._run_dir.name,
                    "PEER_ADDRESS": f"{HOST}:{free_port()}",
                },
                instances,
            )
        )
        self._start(["-db", "-f", str(self.config)])

    def stop(self) -> None:
        """Stop HAProxy, and remove its run directory."""
        super().stop()
        self._run_dir.cleanup()

    def logs(self) -> str:
        """HAProxy's log (its standard output)."""
        return self.process.log() if self.process else ""

    def admin(self, command: str) -> str:
        """The answer of the admin socket (the stats socket of the config) to ``command``."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(Path(self._run_dir.name) / "zemcp-haproxy.sock"))
            s.sendall(command.encode() + b"\n")
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        return answer.decode()

    def unlogged(self) -> int:
        """HAProxy's DroppedLogs counter: log lines it could not write to stdout at once."""
        match = re.search(r"^DroppedLogs: (\d+)$", self.admin("show info"), re.M)
        if match is None:
            raise HarnessError("HAProxy's 'show info' has no DroppedLogs line")
        return int(match.group(1))

    def routed(self) -> list[Routed]:
        """Requests from the HTTP log lines: server name and the captured session owner."""
        records = []
        for match in self._LINE.finditer(self.logs()):
            server = match["server"]
            records.append(
                Routed(match["owner"] or None, None if server == "<NOSRV>" else server, int(match["status"]))
            )
        return records


class Nginx(Proxy):
    """deploy/nginx.conf rendered for the instances, included from a minimal main config."""

    name = "nginx"
    binary = "nginx"
    template = "nginx.conf"
    # log_format zemcp_routing: "... <status> <bytes> route=zemcp_<owner>|zemcp_any upstream=...".
    _LINE = re.compile(r"\" (?P<status>\d{3}) \d+ route=(?P<owner>\S+) upstream=(?P<upstream>.*?) upstream_status=")

    def __init__(self, workdir: Path, instances: list[Instance]):
        super().__init__(workdir, instances)
        logs = self.dir / "logs"
        temp = self.dir / "temp"
        logs.mkdir()
        temp.mkdir()
        (self.dir / "zemcp.conf").write_text(
            render(
                DEPLOY / self.template,
                {
                    "LISTEN": f"{HOST}:{self.port}",
                    "LOG_DIR": str(logs),
                },
                instances,
            )
        )
        # What a distribution's nginx.conf provides around an included http-context file,
        # with every path inside the prefix so that nothing of the system nginx is touched.
        temp_paths = "\n".join(
            f"    {kind}_temp_path {temp / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        (self.dir / "nginx.conf").write_text(
            "worker_processes auto;\n"
            f"pid {self.dir / 'nginx.pid'};\n"
            f"error_log {logs / 'error.log'} info;\n"
            "events { worker_connections 1024; }\n"
            "http {\n"
            f"{temp_paths}\n"
            f"    access_log {logs / 'access.log'};\n"
            f"    include {self.dir / 'zemcp.conf'};\n"
            "}\n"
        )
        self._by_address = {i.address: i.name for i in instances}
        self._start(
            [
                "-p",
                str(self.dir),
                "-e",
                str(logs / "error.log"),
                "-c",
                str(self.dir / "nginx.conf"),
                "-g",
                "daemon off;",
            ]
        )

    def logs(self) -> str:
        """nginx's routing access log and error logs."""
        parts = []
        for path in sorted((self.dir / "logs").glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')}")
        return "\n".join(parts)

    @staticmethod
    def _owner(logged: str) -> str | None:
        """The session owner from the log's ``route=`` value (None for ``zemcp_any``)."""
        return logged.removeprefix("zemcp_") if logged != "zemcp_any" else None

    def routed(self) -> list[Routed]:
        """Requests from the access log: the session's owner and the last upstream tried."""
        path = self.dir / "logs" / "zemcp-access.log"
        if not path.exists():
            return []
        records = []
        for match in self._LINE.finditer(path.read_text(errors="replace")):
            owner = self._owner(match["owner"])
            # "$upstream_addr" lists every server tried: ", " within a group, " : " across
            # an internal redirect (the error_page fallback); the last one answered.
            last = re.split(r", | : ", match["upstream"])[-1]
            records.append(Routed(owner, self._by_address.get(last), int(match["status"])))
        return records


class NginxRoundRobin(Nginx):
    """deploy/nginx-roundrobin.conf: every request round robin, whatever its session.

    Only for instances that share their state (``ZEMCP_REDIS_URL``); in-process sessions
    break behind it. Its log names a request's session owner by the id's prefix (``owner=``),
    so :meth:`routed` still tells where a session was created and who served each request.
    """

    name = "nginx-roundrobin"
    template = "nginx-roundrobin.conf"
    # log_format zemcp_roundrobin: "... <status> <bytes> owner=<owner>|- upstream=...".
    _LINE = re.compile(r"\" (?P<status>\d{3}) \d+ owner=(?P<owner>\S+) upstream=(?P<upstream>.*?) upstream_status=")

    @staticmethod
    def _owner(logged: str) -> str | None:
        """The session owner from the log's ``owner=`` value (None for ``-``, no session id)."""
        return None if logged == "-" else logged


#: The proxies that route every request of a session to its owner (deploy/haproxy.cfg, deploy/nginx.conf).
PROXIES: dict[str, type[Proxy]] = {"haproxy": HAProxy, "nginx": Nginx}
#: The proxies that spread every request, for instances with a shared state backend.
ROUND_ROBIN_PROXIES: dict[str, type[Proxy]] = {"nginx-roundrobin": NginxRoundRobin}


@dataclass
class Stack:
    """Instances behind one proxy (see :func:`start_stack`).

    Attributes:
        proxy: the running proxy; clients talk to ``proxy.url``.
        instances: the instances by name.
        pids: the worker pid of each instance, by name (asked directly, not via the proxy).
    """

    proxy: Proxy
    instances: dict[str, Instance]
    pids: dict[str, int]

    def owner_of(self, pid: int) -> str:
        """The name of the instance whose worker has ``pid``.

        Raises:
            ValueError: ``pid`` is none of the instances' workers.
        """
        names = [name for name, p in self.pids.items() if p == pid]
        if not names:
            raise ValueError(f"pid {pid} is none of the instances' workers {self.pids}")
        return names[0]


def start_stack(
    workdir: Path,
    proxy: str,
    started: list[Instance | Proxy],
    names: Iterable[str] = ("a", "b", "c"),
    settings: dict[str, Any] | None = None,
) -> Stack:
    """Start one instance per name with ``settings`` and the proxy named ``proxy`` in front.

    Args:
        workdir: directory of the logs and the proxy's files (a fresh one per stack).
        proxy: a key of :data:`PROXIES` or :data:`ROUND_ROBIN_PROXIES`.
        started: every process is appended to it as soon as it started; the caller stops
            them (each has ``stop()``), also when this raises, and may read their logs.
        names: the instances' ``ZEMCP_INSTANCE`` names.
        settings: settings of every instance, names without the ``ZEMCP_`` prefix as in
            tests/support/gunicorn.py's ``start_server`` (``redis_url="redis://127.0.0.1:6379/0"``
            sets ``ZEMCP_REDIS_URL``).
    Returns:
        the running stack.
    Raises:
        HarnessError: a process did not start.
    """
    env = {"ZEMCP_" + key.upper(): str(value) for key, value in (settings or {}).items()}
    instances = {}
    for name in names:
        instances[name] = Instance(name, workdir, settings=env)
        started.append(instances[name])
    for instance in instances.values():
        instance.wait_ready()
    pids = {name: worker_pid(instance) for name, instance in instances.items()}
    running = {**PROXIES, **ROUND_ROBIN_PROXIES}[proxy](workdir, list(instances.values()))
    started.append(running)
    return Stack(running, instances, pids)


def worker_pid(instance: Instance) -> int:
    """The pid of the instance's worker, from ``server status`` asked directly (not via a proxy)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    with requests.Session() as http:
        init = http.post(
            instance.url,
            headers=headers,
            timeout=10,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "harness", "version": "1"},
                },
            },
        )
        init.raise_for_status()
        headers["Mcp-Session-Id"] = init.headers["Mcp-Session-Id"]
        status = http.post(
            instance.url,
            headers=headers,
            timeout=10,
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "ze_execute", "arguments": {"command": "server status"}},
            },
        )
        status.raise_for_status()
        http.delete(instance.url, headers={"Mcp-Session-Id": headers["Mcp-Session-Id"]}, timeout=10)
    return parse_pid(status.json()["result"]["content"][0]["text"])


def parse_pid(status_text: str) -> int:
    """The pid from the text of ``server status``.

    Raises:
        ValueError: the text has no ``pid:`` line.
    """
    match = re.search(r"^pid: (\d+)$", status_text, re.M)
    if match is None:
        raise ValueError(f"no 'pid:' line in server status output:\n{status_text}")
    return int(match.group(1))
