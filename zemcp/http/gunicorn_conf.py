"""zemcp's gunicorn configuration: gthread workers sized from the ZEMCP_* settings.

Every value comes from ``zemcp.Settings`` (environment variables ``ZEMCP_*``, documented in
docs/configuration.md), so the server's thread budget and gunicorn's thread count cannot
drift apart. gunicorn reads it as a configuration module (``gunicorn -c
python:zemcp.http.gunicorn_conf app:app``); the repository's gunicorn.conf.py and ``zemcp run``
use it too. Importing it makes a ``ZEMCP_REQUEST_STATE_KEY``, and a ``ZEMCP_INSTANCE``, when
none is set: import it in the master, before workers fork.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from zemcp import logsafe
from zemcp.config import Settings
from zemcp.core.server import serve_all, shutdown_all
from zemcp.eras.modern.request_state import new_key
from zemcp.http import workerloads
from zemcp.http.gunicorn_log import send_zemcp_records

if TYPE_CHECKING:
    from types import FrameType

    from gunicorn.arbiter import Arbiter
    from gunicorn.workers.base import Worker

# The master reads this file before it forks: a key made here is shared by every worker of
# this instance, so any worker can open the 2026-07-28 requestState another one sealed.
# Several instances (hosts) need ZEMCP_REQUEST_STATE_KEY set alike; see docs/deploy.md.
if not os.environ.get("ZEMCP_REQUEST_STATE_KEY", "").strip():
    os.environ["ZEMCP_REQUEST_STATE_KEY"] = new_key()

try:
    _settings = Settings.from_env()
except ValueError as exc:
    # What is wrong and what to set instead, without gunicorn's traceback of its config file.
    raise SystemExit(f"Error: {exc}") from None

# Likewise one instance name for every worker: a proxy routes a session by the name, which
# stands for this gunicorn, and a worker tells a session of a sibling worker (the tag after
# the name) from one of another instance. Without this each worker would draw its own.
if not os.environ.get("ZEMCP_INSTANCE", "").strip():
    os.environ["ZEMCP_INSTANCE"] = _settings.instance

_made_metrics_dir = ""
# Prometheus multiprocess mode: every worker writes its figures to files in one folder, which
# must exist, and be empty, before the workers start; a scrape of any worker adds them up.
if _settings.metrics_path:
    _metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip()
    if _metrics_dir:
        # Figures of an earlier run would be added to this one's.
        for _old in Path(_metrics_dir).glob("*.db"):
            _old.unlink()
    else:
        # Made here, removed when the master exits (on_exit).
        _made_metrics_dir = tempfile.mkdtemp(prefix="zemcp-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = _made_metrics_dir

#: The gunicorn settings and hooks this module defines (what a config file star-imports).
__all__ = [
    "bind",
    "worker_class",
    "workers",
    "threads",
    "worker_connections",
    "limit_request_field_size",
    "timeout",
    "graceful_timeout",
    "keepalive",
    "max_requests",
    "control_socket_disable",
    "accesslog",
    "errorlog",
    "loglevel",
    "logger_class",
    "when_ready",
    "pre_fork",
    "post_fork",
    "post_worker_init",
    "child_exit",
    "on_exit",
]

bind = [_settings.bind]
# gthread, with limits on connections that send nothing or half a request head.
worker_class = "zemcp.http.worker.ThreadWorker"
# Handshake-era sessions and their pending elicitations live in the process that created
# them unless ZEMCP_REDIS_URL shares them: one worker then, unless a proxy routes every
# request of a session to its owner. 2026-07-28 requests are stateless and may be served by
# any worker.
workers = _settings.workers
threads = _settings.threads
# Every busy thread's connection, and 1000 idle kept-alive ones on top: below that, a worker
# whose threads all hold pending elicitations would stop accepting the answers' connections.
worker_connections = _settings.threads + 1000
# OAuth access tokens of identity providers that list groups or roles grow past gunicorn's
# 8190-byte default for one header; the whole head stays capped at 64 KiB by the worker.
limit_request_field_size = 32768
# For gthread this is only a liveness heartbeat, not a request timeout, so long
# elicitations are safe with the default.
timeout = 30
graceful_timeout = 30
keepalive = 5
# Restarting a worker drops its sessions; never recycle workers by request count.
max_requests = 0
# gunicorn's control socket has one default path per user; several instances would collide.
control_socket_disable = True
# Off unless ZEMCP_ACCESS_LOG names a target ("-" for stdout): a line per request is work on
# every request that nobody may read.
accesslog = _settings.access_log or None
errorlog = "-"
loglevel = "info"
# ZEMCP_LOG_FORMAT=json: gunicorn's own lines (and the access log's) become JSON through its
# logger class, which keeps gunicorn's targets. Otherwise gunicorn's default, named as gunicorn
# names it, so that a statsd host still switches it to gunicorn's statsd logger.
logger_class = "zemcp.http.gunicorn_log.JsonLogger" if _settings.log_format == "json" else "gunicorn.glogging.Logger"


def when_ready(server: Arbiter) -> None:
    """Say at start-up, once for the instance, where the shared state lives: the Redis of
    ``ZEMCP_REDIS_URL`` without its credentials, or a warning when several workers share this
    instance's socket and keep their handshake-era sessions in the process."""
    if _settings.state_backend == "redis" and server.log is not None:
        # Here, not where each worker opens it: one line for the instance, and the workers'
        # records reach gunicorn's log only after their app is loaded.
        server.log.info(
            "zemcp: shared state in Redis at %s (ZEMCP_REDIS_URL; any user name and password not shown), keys under %r",
            logsafe.without_credentials(_settings.redis_url),
            _settings.redis_prefix,
        )
    if server.cfg.workers > 1 and _settings.state_backend == "memory" and server.log is not None:
        server.log.warning(
            "zemcp: %d workers share one listening socket, and without ZEMCP_REDIS_URL a handshake-era session "
            "(initialize, Mcp-Session-Id) lives in the worker that created it: its requests that reach another "
            "worker get 404 (saying so), and an elicitation answer among them is lost. Set ZEMCP_REDIS_URL "
            "(pip install redis, or '.[redis]' in a zemcp checkout) to share handshake-era sessions between workers and instances, or "
            "serve one worker (ZEMCP_WORKERS=1), and more instances of one worker behind a proxy that routes by "
            "Mcp-Session-Id. 2026-07-28 clients need neither: any worker serves them. See docs/deploy.md",
            server.cfg.workers,
        )


def pre_fork(server: Arbiter, worker: Worker) -> None:
    """Give the worker about to be forked its slot in the table of the workers' loads, which
    the first fork makes (:mod:`zemcp.http.workerloads`): new connections go to the workers
    with room."""
    workerloads.assign(server.cfg.workers, worker.age)


def post_fork(server: Arbiter, worker: Worker) -> None:
    """Make the app's thread budget follow the gunicorn thread count actually in use."""
    os.environ["ZEMCP_THREADS"] = str(worker.cfg.threads)


def post_worker_init(worker: Worker) -> None:
    """Send zemcp's log records to gunicorn's error log (in its format: JSON lines under
    ``ZEMCP_LOG_FORMAT=json``), start every server's share of the state (:func:`serve_all`),
    and end the sessions on a stop (graceful or quick).

    gunicorn's graceful stop waits up to ``graceful_timeout`` for open responses, and a
    pending elicitation keeps one open; meanwhile new connections to this instance hang.
    Ending the sessions when the worker is told to stop lets those streams finish at once.
    """
    send_zemcp_records(worker.log.error_log)
    # The application is loaded: what its servers announce from now on (a tool registered by a
    # thread of its own, say) reaches every worker's streams, before any request came here.
    serve_all()

    stop = worker.handle_exit
    quit_now = worker.handle_quit

    def end_sessions(grace: float) -> None:
        # Every zemcp Server of the worker, also one mounted inside a Flask or Django app.
        ended = shutdown_all(grace)
        if ended:
            worker.log.info("zemcp: ended %d session(s) for the stop", ended)

    def handle_exit(sig: int, frame: FrameType | None) -> None:
        stop(sig, frame)
        # Running tasks may finish within the graceful stop; the second before gunicorn's
        # deadline fails the rest, so that none is left "working".
        end_sessions(max(0.0, worker.cfg.graceful_timeout - 1.0))

    def handle_quit(sig: int, frame: FrameType | None) -> None:
        # A quick stop (SIGINT, SIGQUIT) exits the process, which first waits for its threads:
        # wake the handlers waiting for answers, or it would wait until it is killed.
        end_sessions(0.0)
        quit_now(sig, frame)

    signal.signal(signal.SIGTERM, handle_exit)
    signal.siginterrupt(signal.SIGTERM, False)
    for quick in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(quick, handle_quit)


def child_exit(server: Arbiter, worker: Worker) -> None:
    """A worker exited: its slot of the loads' table is free again, and its live gauges leave
    the Prometheus sums (its counts stay)."""
    workerloads.release(worker.age)
    if _settings.metrics_path:
        from zemcp.observe.prometheus import mark_dead

        mark_dead(int(worker.pid))


def on_exit(server: Arbiter) -> None:
    """gunicorn stops: remove the metrics folder this configuration made for its workers."""
    if _made_metrics_dir:
        shutil.rmtree(_made_metrics_dir, ignore_errors=True)
