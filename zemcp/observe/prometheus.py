"""zemcp's metrics as Prometheus text, added up over every gunicorn worker.

With ``PROMETHEUS_MULTIPROC_DIR`` set before the workers start (zemcp's gunicorn
configuration sets it when ``metrics_path`` is on), ``prometheus_client`` keeps each
worker's figures in files of that folder and a scrape served by any worker reads them all:
counters and histograms of every worker add up, those of workers that exited included;
the live gauges count the workers alive (``livesum``; the sessions of a shared Redis store,
which every worker sees whole, take the largest reading, ``livemax``). The ``child_exit``
hook of :mod:`zemcp.http.gunicorn_conf` marks a worker that exited (:func:`mark_dead`).
Without the variable (one process, or zemcp mounted in an application served otherwise)
the figures are this process's. Imported only when ``metrics_path`` is set; needs
``prometheus_client`` (``zemcp[prometheus]``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from zemcp.observe import figures, instruments
from zemcp.observe.instruments import prometheus_label, prometheus_name

log = logging.getLogger("zemcp.metrics")

#: The variable that turns prometheus_client's multiprocess mode on.
MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
#: [seconds] how often a worker writes its live figures (gauges) for the scrapes others serve.
REFRESH_INTERVAL = 5.0


class PrometheusMetrics:
    """The instruments of :mod:`zemcp.observe.instruments` as ``prometheus_client`` metrics
    of this process; one per process (:func:`process_metrics`), fed by every server in it.

    Args:
        shared_sessions: the sessions live in a store every process sees (Redis): each
            worker then reports them all, and the gauge takes the largest reading.
    """

    #: The media type of the text :meth:`exposition` returns.
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, shared_sessions: bool):
        self.multiprocess = bool(os.environ.get(MULTIPROCESS_DIR))
        self.registry = CollectorRegistry()
        registry = self.registry

        def labels(keys: tuple[str, ...]) -> list[str]:
            return [prometheus_label(key) for key in keys]

        self._operations = Histogram(
            prometheus_name(instruments.OPERATION_DURATION, "s"),
            "MCP request or notification duration as observed on the receiver",
            labels(instruments.OPERATION_KEYS),
            buckets=instruments.BUCKETS,
            registry=registry,
        )
        self._sessions = Histogram(
            prometheus_name(instruments.SESSION_DURATION, "s"),
            "The duration of the MCP session as observed on the MCP server",
            labels(instruments.SESSION_KEYS),
            buckets=instruments.BUCKETS,
            registry=registry,
        )
        self._refusals = Counter(
            prometheus_name(instruments.REFUSALS),
            "Requests refused before a handler ran",
            labels(instruments.REFUSAL_KEYS),
            registry=registry,
        )
        self._outcomes = Counter(
            prometheus_name(instruments.OUTCOMES),
            "Outcomes of the requests handlers sent the client",
            labels(instruments.OUTCOME_KEYS),
            registry=registry,
        )
        self._gauges: dict[str, Gauge] = {}
        for name, (description, _) in instruments.GAUGES.items():
            mode: Literal["livemax", "livesum"] = (
                "livemax" if shared_sessions and name == "zemcp.sessions.live" else "livesum"
            )
            kind = ["zemcp_stream_kind"] if name == "zemcp.streams.open" else []
            self._gauges[name] = Gauge(
                prometheus_name(name), description, kind, registry=registry, multiprocess_mode=mode
            )
        self._operation_children: dict[tuple[str, ...], Histogram] = {}
        self._lock = threading.Lock()
        self._refresher: threading.Thread | None = None

    def operation(self, seconds: float, labels: tuple[str, ...]) -> None:
        """Record one served request or notification ([seconds]; labels in ``OPERATION_KEYS`` order)."""
        child = self._operation_children.get(labels)
        if child is None:
            # Few distinct label sets (client-chosen names never become labels): look each up once.
            child = self._operation_children[labels] = self._operations.labels(*labels)
        child.observe(seconds)
        if self._refresher is None and self.multiprocess:
            self._start_refresher()

    def session(self, seconds: float, labels: tuple[str, ...]) -> None:
        """Record one ended session ([seconds]; labels in ``SESSION_KEYS`` order)."""
        self._sessions.labels(*labels).observe(seconds)

    def refusal(self, reason: str, status: int) -> None:
        """Count one refused request."""
        self._refusals.labels(reason, str(status)).inc()

    def outcome(self, method: str, outcome: str) -> None:
        """Count one outcome of a request a handler sent the client."""
        self._outcomes.labels(method, outcome).inc()

    def refresh(self) -> None:
        """Write the live figures of this process's servers into the gauges."""
        totals = figures.PROCESS.read()
        for name, gauge in self._gauges.items():
            if name == "zemcp.streams.open":
                for kind, n in totals[name].items():
                    gauge.labels(kind).set(n)
            else:
                gauge.set(totals[name])

    def exposition(self) -> bytes:
        """The Prometheus text of every worker (multiprocess mode) or of this process."""
        self.refresh()
        if not self.multiprocess:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)

    def _start_refresher(self) -> None:
        # Started by the first request a worker serves: a thread made before gunicorn forks
        # would not exist in the workers.
        with self._lock:
            if self._refresher is not None:
                return
            self._refresher = threading.Thread(target=self._refresh_forever, name="zemcp-metrics", daemon=True)
        self._refresher.start()

    def _refresh_forever(self) -> None:
        while True:
            time.sleep(REFRESH_INTERVAL)
            try:
                self.refresh()
            except Exception:
                # A figure that cannot be read now (Redis away) is read again next time.
                log.debug("the live figures could not be read", exc_info=True)

    def _forked(self) -> None:
        self._refresher = None


_process_metrics: PrometheusMetrics | None = None
_process_lock = threading.Lock()


def process_metrics(shared_sessions: bool) -> PrometheusMetrics:
    """This process's :class:`PrometheusMetrics` (made at the first call)."""
    global _process_metrics
    with _process_lock:
        if _process_metrics is None:
            _process_metrics = PrometheusMetrics(shared_sessions)
            os.register_at_fork(after_in_child=_process_metrics._forked)
        return _process_metrics


def mark_dead(pid: int) -> None:
    """Tell multiprocess mode that worker ``pid`` exited: its live gauges stop counting
    (its counters and histograms stay in the sums). Does nothing outside multiprocess mode."""
    if os.environ.get(MULTIPROCESS_DIR):
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
