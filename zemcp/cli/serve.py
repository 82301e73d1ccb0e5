"""``zemcp run``: serve a zemcp server from a file or module, over HTTP or stdio.

``zemcp run notes.py`` finds the :class:`zemcp.McpApp` or :class:`zemcp.Server` in the file
(``notes:server`` names it) and serves it through gunicorn's own application API with
:mod:`zemcp.http.gunicorn_conf`, the same configuration as ``gunicorn -c gunicorn.conf.py
notes:app``: the gthread worker of :mod:`zemcp.http.worker` and the thread budget of the
settings. ``--transport stdio`` serves the same server over MCP's stdio transport instead
(:mod:`zemcp.cli.stdio`), for clients that start servers as subprocesses.

A stdio server, and an HTTP one started with a pipe on stdin as desktop clients start their
servers, stops when the program that started it exits (:mod:`zemcp.cli.lifetime`); the HTTP
one also says that such a client needs ``--transport stdio``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from zemcp.cli import lifetime
from zemcp.config import Settings
from zemcp.core.server import Server
from zemcp.http.transport import McpApp

if TYPE_CHECKING:
    from gunicorn.app.base import BaseApplication
    from gunicorn.arbiter import Arbiter

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class TargetError(click.ClickException):
    """The target names no loadable server (shown to the user with what to do)."""


def load_target(target: str) -> tuple[McpApp, Server]:
    """The app and server that ``target`` names.

    Args:
        target: ``path/to/file.py``, ``module`` or ``package.module``, optionally followed by
            ``:attribute`` naming a :class:`McpApp` or :class:`Server` in it; without the
            attribute, the one McpApp (else the one Server) at the module's top level.
    Returns:
        ``(app, server)``; a Server is wrapped in a new ``McpApp``.
    Raises:
        TargetError: the file or module cannot be imported, the attribute is missing or of
            another type, the module holds no server or several, or the server cannot be
            served as declared (its MCP Apps declarations do not hold together).
    """
    value = _target(target)
    if isinstance(value, McpApp):
        return value, value.server
    try:
        return McpApp(value), value
    except ValueError as exc:
        raise TargetError(f"{target}: {exc}") from None


def load_server(target: str) -> Server:
    """The server that ``target`` names (as for :func:`load_target`), not made ready to serve:
    what ``zemcp inspect`` describes, a server that could not be served included.

    Raises:
        TargetError: as :func:`load_target`, but for the server's declarations.
    """
    value = _target(target)
    return value.server if isinstance(value, McpApp) else value


def _target(target: str) -> McpApp | Server:
    location, _, attribute = target.partition(":")
    module = _import(location)
    if attribute:
        value = getattr(module, attribute, None)
        if not isinstance(value, (McpApp, Server)):
            raise TargetError(
                f"{location} has no McpApp or Server named {attribute!r} "
                f"(found {type(value).__name__ if value is not None else 'nothing'})"
            )
    else:
        value = _find(module, location)
    return value


def _import(location: str) -> Any:
    path = Path(location)
    if location.endswith(".py") or path.is_file():
        if not path.is_file():
            raise TargetError(f"no such file: {location}")
        # The file's directory is importable, as it is for `python file.py`: its own imports work.
        sys.path.insert(0, str(path.resolve().parent))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise TargetError(f"cannot import {location}: not a Python source file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise TargetError(f"importing {location} failed: {type(exc).__name__}: {exc}") from exc
        return module
    sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(location)
    except ModuleNotFoundError as exc:
        if exc.name and location.startswith(exc.name):
            raise TargetError(
                f"no module named {location!r} (run from its directory, or give the path of its .py file)"
            ) from None
        raise TargetError(f"importing {location} failed: {exc}") from exc
    except Exception as exc:
        raise TargetError(f"importing {location} failed: {type(exc).__name__}: {exc}") from exc


def _find(module: Any, location: str) -> McpApp | Server:
    found = {
        kind: [name for name, value in vars(module).items() if isinstance(value, kind)] for kind in (McpApp, Server)
    }
    for kind in (McpApp, Server):
        names = found[kind]
        if len(names) == 1:
            value: McpApp | Server = getattr(module, names[0])
            return value
        if len(names) > 1:
            raise TargetError(
                f"{location} holds several {kind.__name__}s ({', '.join(names)}); name one: {location}:{names[0]}"
            )
    raise TargetError(
        f"{location} holds no zemcp.McpApp or zemcp.Server at its top level; create one there "
        f"(server = zemcp.Server(...)) or name it: {location}:NAME"
    )


def _gunicorn_application(target: str, options: dict[str, Any], preload: bool, watch: bool) -> BaseApplication:
    # Imported here: the stdio transport needs none of gunicorn.
    from gunicorn.app.base import BaseApplication

    import zemcp.http.gunicorn_conf as conf

    class Application(BaseApplication):
        """gunicorn's application API with zemcp's configuration module."""

        def load_config(self) -> None:
            for name in conf.__all__:
                value = getattr(conf, name)
                if value is not None:
                    self.cfg.set(name, value)
            for name, value in options.items():
                self.cfg.set(name, value)
            self.cfg.set("when_ready", self.when_ready)

        def when_ready(self, arbiter: Arbiter) -> None:
            """zemcp's start-up hook, then the URL clients need (gunicorn names only the socket),
            then, when asked, the watch of the parent: its SIGTERM is gunicorn's graceful stop."""
            conf.when_ready(arbiter)
            # Without preload the app loads in the workers: its endpoint is the settings' one.
            endpoint = self.preloaded.endpoint if self.preloaded is not None else Settings.from_env().endpoint
            for listener in arbiter.LISTENERS:
                if arbiter.log is not None:
                    arbiter.log.info("zemcp: MCP endpoint at %s", _url(listener.sock, self.cfg.is_ssl, endpoint))
            if watch:

                def parent_exited(pid: int) -> None:
                    if arbiter.log is not None:
                        arbiter.log.info("zemcp: the parent process (pid %d) exited; stopping", pid)
                    os.kill(os.getpid(), signal.SIGTERM)

                lifetime.watch_parent(parent_exited)

        #: The app loaded in the master (with preload), which load() then returns.
        preloaded: McpApp | None = None

        # gunicorn's stubs type the WSGI callable with a narrower start_response than PEP 3333's.
        def load(self) -> McpApp:  # type: ignore[override]
            return self.preloaded if self.preloaded is not None else load_target(target)[0]

    app = Application()
    if preload:
        if _settings().log_format == "json":
            # gunicorn's logger first: it then takes zemcp's records, so that what the import
            # logs is a JSON line too.
            app.cfg.logger_class(app.cfg)
        # Load in the master: a target that cannot be served fails at once, with its reason.
        app.preloaded = app.load()
    return app


def _url(sock: socket.socket, tls: bool, endpoint: str) -> str:
    """The endpoint's URL on a listening socket: ``http://127.0.0.1:8000/mcp``."""
    if sock.family == socket.AF_UNIX:
        return f"unix:{sock.getsockname()}, path {endpoint}"
    host, port = sock.getsockname()[:2]
    host = f"[{host}]" if sock.family == socket.AF_INET6 else host
    return f"{'https' if tls else 'http'}://{host}:{port}{endpoint}"


def _check_port(bind: str) -> None:
    """Refuse a TCP address another program listens on, saying which option moves it (gunicorn
    would retry it five times, then exit naming only the address)."""
    from gunicorn.util import parse_address

    try:
        address = parse_address(bind)
    except RuntimeError as exc:
        raise click.BadParameter(str(exc), param_hint="'--bind'") from None
    if isinstance(address, tuple) and lifetime.bind_in_use(address):
        raise click.ClickException(
            f"{bind} is in use by another program: serve on another port with --bind HOST:PORT "
            "(or ZEMCP_BIND), or stop the program that listens there"
        )


def _settings() -> Settings:
    """The settings of the environment, a malformed variable told as a usage error (without a traceback)."""
    try:
        return Settings.from_env()
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


@click.group()
def main() -> None:
    """zemcp: serve synchronous MCP servers."""


@main.command()
@click.argument("target")
@click.option(
    "--transport",
    type=click.Choice(["http", "stdio"]),
    default="http",
    show_default=True,
    help="http: MCP's Streamable HTTP under gunicorn. stdio: newline-delimited JSON-RPC on "
    "stdin and stdout, logs on stderr, for clients that start the server as a subprocess.",
)
@click.option(
    "--bind",
    "-b",
    metavar="HOST:PORT",
    help="(http) The address to listen on; sets ZEMCP_BIND. Default: ZEMCP_BIND, else 127.0.0.1:8000.",
)
@click.option(
    "--threads",
    type=click.IntRange(min=3),
    help="(http) gthread threads per worker, which the thread budget is derived from; sets "
    "ZEMCP_THREADS. Default: ZEMCP_THREADS, else 32.",
)
@click.option(
    "--workers",
    "-w",
    type=click.IntRange(min=1),
    help="(http) Worker processes; sets ZEMCP_WORKERS. Keep 1 for handshake-era clients "
    "(their sessions live in one process) unless ZEMCP_REDIS_URL shares them. Default: ZEMCP_WORKERS, else 1.",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS),
    default="info",
    show_default=True,
    help="Lowest level of log messages written (to stderr).",
)
@click.option(
    "--reload", is_flag=True, help="(http) Restart the workers when a source file changes: for development only."
)
def run(
    target: str,
    transport: str,
    bind: str | None,
    threads: int | None,
    workers: int | None,
    log_level: str,
    reload: bool,
) -> None:
    """Serve the server that TARGET names.

    TARGET is a Python file (notes.py) or module (notes, mypackage.tools), optionally with
    :NAME naming the zemcp.McpApp or zemcp.Server in it (notes:server); without NAME, the one
    McpApp or Server at the module's top level is served. Other settings come from ZEMCP_*
    environment variables (docs/configuration.md).
    """
    if transport == "stdio":
        http_only = {"--bind": bind, "--threads": threads, "--workers": workers, "--reload": reload}
        given = [option for option, value in http_only.items() if value not in (None, False)]
        if given:
            raise click.UsageError(
                f"{', '.join(given)}: for --transport http only; --transport stdio serves one client on "
                "stdin and stdout (leave them out)"
            )
        from zemcp.cli import stdio

        # Before the import: what the target prints at import time must not reach stdout.
        reader, writer = stdio.claim_stdio()
        stdio.log_to_stderr(log_level, _settings().log_format)
        stdio.run(load_target(target)[1], reader, writer)
        return
    # The options become the settings the server and gunicorn's configuration both read.
    for name, value in (("BIND", bind), ("THREADS", threads), ("WORKERS", workers)):
        if value is not None:
            os.environ[f"ZEMCP_{name}"] = str(value)
    started_by_a_program = lifetime.stdin_is_pipe()
    if started_by_a_program:
        # A desktop client's configuration without --transport stdio waits at initialize forever.
        click.echo(
            "zemcp run: stdin is a pipe, as when a desktop client starts its MCP servers, but this serves "
            "Streamable HTTP; a client that talks to the server over stdin and stdout needs --transport stdio "
            f"in its command (zemcp run {target} --transport stdio). Serving HTTP until the program that "
            "started this one exits.",
            err=True,
        )
    _check_port(_settings().bind)
    options: dict[str, Any] = {"loglevel": log_level}
    if reload:
        options["reload"] = True
        if target.partition(":")[0].endswith(".py"):
            options["reload_extra_files"] = [str(Path(target.partition(":")[0]).resolve())]
    _gunicorn_application(target, options, preload=not reload, watch=started_by_a_program).run()


@main.command()
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Print the description as JSON instead of text.")
def inspect(target: str, as_json: bool) -> None:
    """List what the server TARGET names offers: its tools, resources, resource templates and
    prompts, with their schemas and who may use each (permission= and scopes).

    TARGET is as for zemcp run. Nothing is served and no client is needed.
    """
    from zemcp.cli import inspect as inspection

    description = inspection.describe(load_server(target))
    click.echo(json.dumps(description, indent=2) if as_json else inspection.render(description), nl=as_json)
