"""gunicorn's logger writing JSON lines: zemcp's gunicorn ``logger_class`` under ``ZEMCP_LOG_FORMAT=json``.

gunicorn's documented way to change its own log lines is its logger class (the
``logger_class`` setting: a class that quacks like ``gunicorn.glogging.Logger``).
:class:`JsonLogger` is gunicorn's class itself with one change: once gunicorn has set up its
handlers (at start-up, and again on every configuration reload), each handler of the error log
and of the access log gets zemcp's JSON format (:func:`zemcp.logformat.install`). So the
targets stay gunicorn's (``errorlog``, ``accesslog``, syslog), and so do its records: the
master's start-up lines, the workers' births and deaths, its errors, each access line as the
``message`` of an ``access`` event.

zemcp's own records reach the same handlers (:func:`send_zemcp_records`): in every worker once
it has started (``post_worker_init``), and under JSON from the logger's setup on, so that the
records logged while the application is imported (in the master with ``preload_app``, in each
worker otherwise) are JSON lines too.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from gunicorn.glogging import Logger
from gunicorn.instrument.statsd import Statsd

from zemcp import logformat

if TYPE_CHECKING:
    from gunicorn.config import Config


class JsonLogger(Logger):
    """gunicorn's logger whose error and access lines are JSON objects.

    gunicorn replaces its default logger class with its statsd one when a statsd host is
    set, but not a class that is named: with ``statsd_host`` set this class makes a
    :class:`JsonStatsd` instead, so that the metrics keep flowing.
    """

    def __new__(cls, cfg: Config) -> JsonLogger:
        """A :class:`JsonStatsd` when ``cfg`` names a statsd host, else a ``JsonLogger``."""
        chosen = JsonStatsd if cls is JsonLogger and cfg.statsd_host is not None else cls
        return object.__new__(chosen)

    def setup(self, cfg: Config) -> None:
        """gunicorn's setup of the error and access logs (from ``cfg``), then the JSON format
        on each of their handlers."""
        super().setup(cfg)
        for handler in (*self.error_log.handlers, *self.access_log.handlers):
            logformat.install(handler, "json")
        send_zemcp_records(self.error_log)


class JsonStatsd(JsonLogger, Statsd):
    """gunicorn's statsd logger (``statsd_host``) with :class:`JsonLogger`'s lines."""


#: The handlers of gunicorn's error log that :func:`send_zemcp_records` gave the ``zemcp``
#: logger last, which a later call (after a configuration reload) takes back.
_lent: list[logging.Handler] = []


def send_zemcp_records(error_log: logging.Logger) -> None:
    """Make the records of the ``zemcp`` loggers go to gunicorn's error log, at its level.

    The ``zemcp`` logger gets the handlers of ``error_log`` (those of an earlier call are
    removed first: a reload replaces gunicorn's handlers) and its level, and stops
    propagating, so that nothing is written twice.
    """
    zemcp_log = logging.getLogger("zemcp")
    for handler in _lent:
        zemcp_log.removeHandler(handler)
    _lent[:] = error_log.handlers
    zemcp_log.setLevel(error_log.level)
    zemcp_log.propagate = False
    for handler in _lent:
        zemcp_log.addHandler(handler)
