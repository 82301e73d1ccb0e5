"""Log lines as JSON objects, one a line: what ``ZEMCP_LOG_FORMAT=json`` writes.

:func:`install` is the one place that puts the chosen format (``Settings.log_format``) on a
log handler: gunicorn's handlers under zemcp's configuration (:mod:`zemcp.http.gunicorn_log`)
and stderr's under ``zemcp run --transport stdio`` (:mod:`zemcp.cli.stdio`). ``text`` leaves
each handler's own lines as they are; ``json`` gives it a :class:`JsonFormatter`.

A JSON line holds a fixed set of fields (:data:`FIELDS`), each read from the record's
attributes (``extra=`` of the logging call) and checked for its form; the rest of a record's
extras is never written, since they could hold anything. ``json.dumps`` escapes every control
character, so no string of a client can end its field or its line; strings are shortened as
:func:`zemcp.logsafe.shorten` does, and ``session`` is kept only as a fingerprint, so a session
id given by mistake is dropped, not logged.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import math
import re
import time
from typing import Any

from zemcp import logsafe

#: The values of ``Settings.log_format``.
FORMATS = ("text", "json")

#: The fields a record may carry through ``extra=``, in the order a line gives them.
FIELDS = (
    "method",
    "tool",
    "arguments",
    "values",
    "duration",
    "outcome",
    "reason",
    "session",
    "user",
    "subject",
    "client",
    "protocol_version",
    "task_id",
    "trace_id",
    "span_id",
)
#: The most names a list field (``arguments``) shows; [characters] the most of ``values``.
LIST_ITEMS = 64
VALUES_CHARS = 2000

#: The event of records of loggers whose last name part says nothing of their kind.
LOGGER_EVENTS = {"gunicorn.error": "gunicorn", "gunicorn.access": "access"}

_EVENT = re.compile(r"[a-z][a-z0-9_]{0,63}")
_FINGERPRINT = re.compile(r"[0-9a-f]{8,64}")
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")
# The OpenTelemetry trace module is looked for at the first record that needs it.
_UNLOADED = object()


@functools.lru_cache(maxsize=256)
def logger_event(name: str) -> str:
    """The event of a record that names none: from its logger's name.

    Args:
        name: the logger's name, such as ``"zemcp.handshake"``.
    Returns:
        ``"handshake"`` for ``zemcp.handshake`` (the ``zemcp.`` prefix dropped), the entry of
        :data:`LOGGER_EVENTS` for gunicorn's loggers, otherwise the name lowercased with every
        run of other characters than ``a-z0-9`` as one ``_`` (``"myapp_db"`` for ``myapp.db``).
    """
    if name in LOGGER_EVENTS:
        return LOGGER_EVENTS[name]
    name = name.removeprefix("zemcp.")
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "log"


def event_name(record: logging.LogRecord) -> str:
    """The record's ``event`` attribute when it is a snake_case name (``extra={"event":
    "request"}``), else :func:`logger_event` of its logger."""
    given = getattr(record, "event", None)
    if isinstance(given, str) and _EVENT.fullmatch(given):
        return given
    return logger_event(record.name)


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON.

    The line holds ``time`` (``2026-12-03T12:00:00.123Z``: UTC, milliseconds), ``level``
    (``"info"``), ``logger``, ``event`` (:func:`event_name`), ``message`` (the formatted
    message) and ``pid``; then those of :data:`FIELDS` the record carries in a valid form
    (``duration`` a finite number of seconds, ``session`` a fingerprint, ``trace_id`` 32 and
    ``span_id`` 16 hex digits, ``arguments`` a list of strings, the others strings, shortened);
    then, for a record with an
    exception, ``exc_type`` (its class name) and ``exc_text`` (the traceback, one string).

    A record without ``trace_id`` gets ``trace_id`` and ``span_id`` of the span recording in
    the current context, when the ``opentelemetry`` package is installed.
    """

    def __init__(self) -> None:
        super().__init__()
        self._trace: Any = _UNLOADED

    def format(self, record: logging.LogRecord) -> str:
        """The record as one JSON object, without a line break."""
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": event_name(record),
            "message": record.getMessage(),
            "pid": record.process,
        }
        line.update(fields(record))
        if "trace_id" not in line:
            line.update(self.current_span())
        if record.exc_info and record.exc_info[0] is not None:
            line["exc_type"] = record.exc_info[0].__name__
            if not record.exc_text:
                # Cached on the record as logging.Formatter does, for the other handlers.
                record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc_text"] = record.exc_text
        return json.dumps(line)

    def current_span(self) -> dict[str, str]:
        """``{"trace_id": ..., "span_id": ...}`` of the span recording in the current context;
        ``{}`` without one, or without the ``opentelemetry`` package."""
        if self._trace is _UNLOADED:
            try:
                # By name, and only here: zemcp does not depend on OpenTelemetry.
                self._trace = importlib.import_module("opentelemetry.trace")
            except ImportError:
                self._trace = None
        if self._trace is None:
            return {}
        try:
            span = self._trace.get_current_span()
            if not span.is_recording():
                return {}
            context = span.get_span_context()
            if not context.is_valid:
                return {}
            return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}
        except Exception:
            # A tracer that fails must not cost the log line.
            return {}


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The :data:`FIELDS` the record carries in a valid form (others are left out).

    Returns:
        field name -> value: ``duration`` a float, ``arguments`` a list of at most
        :data:`LIST_ITEMS` strings, ``values`` a string (JSON text the record gives, cut to
        :data:`VALUES_CHARS`), the others strings.
    """
    found: dict[str, Any] = {}
    for name in FIELDS:
        value = getattr(record, name, None)
        if value is None:
            continue
        if name == "duration":
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                found[name] = float(value)
        elif name == "session":
            if isinstance(value, str) and _FINGERPRINT.fullmatch(value):
                found[name] = value
        elif name in ("trace_id", "span_id"):
            ident = _hex_id(value, 32 if name == "trace_id" else 16)
            if ident is not None:
                found[name] = ident
        elif name == "arguments":
            if isinstance(value, (list, tuple)):
                found[name] = [
                    logsafe.shorten(v) if isinstance(v, str) else logsafe.clip(v) for v in value[:LIST_ITEMS]
                ]
        elif name == "values":
            if isinstance(value, str):
                found[name] = logsafe.shorten(value, VALUES_CHARS)
        else:
            found[name] = logsafe.shorten(value) if isinstance(value, str) else logsafe.clip(value)
    return found


def _hex_id(value: Any, digits: int) -> str | None:
    """A trace or span id as ``digits`` lowercase hex digits (from an int, as OpenTelemetry
    keeps them, or from hex), or None when it is neither."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 16**digits:
        return f"{value:0{digits}x}"
    if isinstance(value, str) and (_TRACE_ID if digits == 32 else _SPAN_ID).fullmatch(value.lower()):
        return value.lower()
    return None


def install(handler: logging.Handler, log_format: str) -> None:
    """Make ``handler`` write the lines of ``log_format``.

    Args:
        handler: the handler whose formatter is chosen.
        log_format: ``"text"`` keeps the handler's own formatter (its lines stay as they
            were); ``"json"`` gives it a :class:`JsonFormatter`.
    Raises:
        ValueError: ``log_format`` is neither (``Settings`` refuses such a value first).
    """
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    elif log_format != "text":
        raise ValueError(f"log_format (ZEMCP_LOG_FORMAT) must be {' or '.join(FORMATS)}, got {log_format!r}")
