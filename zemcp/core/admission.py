"""Admission to the threads of the call budget: running calls and the streams that hold a thread.

Under gunicorn's gthread worker every request holds a thread while it runs, and a running
call, a listen stream, a resumed stream and a standalone GET stream hold one for as long as
they last. They share the call budget (``Settings.call_budget``: the threads less the
reserve kept for answers, cancellations and pings), so that an answer, a cancel or a ping is
always served; beyond it a request is refused with :class:`Busy` (HTTP 503 with
``Retry-After``). Each budget is also shared out per client (:mod:`zemcp.state.shares`): a
client beyond its share is refused with :class:`zemcp.state.shares.ShareTaken` (HTTP 429), so
that one client cannot take the threads every other client needs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from zemcp.config import Settings
from zemcp.state.fanout import FanOut, ListenLimitReached
from zemcp.state.shares import Shares
from zemcp.state.streamlogs import REQUEST, STANDALONE

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor


class _Closable(Protocol):
    def on_close(self, callback: Callable[[], object]) -> None: ...


_T = TypeVar("_T", bound=_Closable)

#: [seconds] ``Retry-After`` of a call refused because the call budget is taken.
BUSY_RETRY_AFTER = 2


class Busy(Exception):
    """The threads for running calls and streams are all taken (HTTP 503 with ``Retry-After``).

    Attributes:
        status: the HTTP status it is answered with.
        retry_after: [seconds] when to try again.
    """

    status = 503
    #: The reason it is counted under (:data:`zemcp.observe.instruments.REFUSALS`).
    reason = "busy"

    def __init__(self, held: int, budget: int):
        super().__init__(
            f"Service Unavailable: {held} running calls and streams hold this process's {budget} threads for them "
            f"(ZEMCP_THREADS minus the reserve kept for answers, cancellations and pings); retry in "
            f"{BUSY_RETRY_AFTER} s, or raise ZEMCP_THREADS"
        )
        self.retry_after = BUSY_RETRY_AFTER


class Admission:
    """The call budget of one server, and the handler pool of servers that run no handler on the request's thread.

    Args:
        settings: ``call_budget``, ``standalone_budget``, ``listen_budget``, ``client_share``
            and ``threads`` (the pool's size).
        fanout: its open listen streams count in the budget.

    A ``client`` argument is the key of the request's client (:func:`zemcp.state.shares.client_key`),
    or None for a request that has no shares (stdio).

    Attributes:
        running: calls whose handler is running.
        resuming: connections that read a session's request stream by GET.
        standalone: connections that read a session's standalone GET stream.
    """

    def __init__(self, settings: Settings, fanout: FanOut):
        self._settings = settings
        self._fanout = fanout
        self._lock = threading.Lock()
        self.running = 0
        # Connections that read a session's stream by GET (each holds a gunicorn thread).
        self.resuming = 0
        self.standalone = 0
        share = settings.client_share
        self._threads = Shares(settings.call_budget, share, "threads for running calls and streams")
        self._standalones = Shares(settings.standalone_budget, share, "standalone GET streams")
        self._listens = Shares(settings.listen_budget, share, "subscriptions/listen streams")
        # Made at the first job that needs it: under gunicorn every handler runs on its
        # request's own thread, and the pool is never used.
        self._pool: ThreadPoolExecutor | None = None

    def _check_room(self) -> None:
        """Raise :class:`Busy` when running calls and open streams hold the whole call budget (call it under the admission lock)."""
        held = self.running + self._fanout.count() + self.resuming + self.standalone
        if held >= self._settings.call_budget:
            raise Busy(held, self._settings.call_budget)

    def open_stream(self, opener: Callable[[], _T], client: str | None = None) -> _T:
        """Open a listen stream that holds a thread while it is open (``opener()``, which
        returns it) if the call budget and the client's shares have room; checked and opened
        together, so that concurrent opens cannot pass the budget. The client's places are
        given back when the stream closes.

        Raises:
            Busy: the call budget is taken; nothing is opened.
            ShareTaken: the client holds its share of the call budget or of the listen streams.
            ListenLimitReached: (from ``opener``) the listen-stream cap is reached.
        """
        with self._lock:
            self._check_room()
            self._threads.check(client)
            self._listens.check(client)
            stream = opener()
            self._threads.take(client)
            self._listens.take(client)

        def release() -> None:
            with self._lock:
                self._threads.give(client)
                self._listens.give(client)

        if client is not None:
            stream.on_close(release)
        return stream

    def hold_thread(self, kind: str = REQUEST, force: bool = False, client: str | None = None) -> Callable[[], None]:
        """Count a connection that reads a session's stream by GET in the call budget (it holds
        a thread while it reads); returns the function that gives the place back (call it once).

        Args:
            kind: ``"request"`` (it resumes a request's stream) or ``"standalone"`` (it reads
                the session's standalone stream, capped by ``standalone_budget``).
            force: count it without checking (it takes over from a connection that holds a
                place and is giving it back).
            client: whose shares it counts in.
        Raises:
            Busy: the call budget is taken.
            ListenLimitReached: (standalone) ``standalone_budget`` standalone streams are open.
            ShareTaken: the client holds its share of the call budget (or of the standalone streams).
        """
        standalone = kind == STANDALONE
        with self._lock:
            if not force and standalone and self.standalone >= self._settings.standalone_budget:
                raise ListenLimitReached(
                    f"this process already has its maximum of {self._settings.standalone_budget} standalone GET "
                    f"streams open (ZEMCP_MAX_STANDALONE_STREAMS); requests still get their own streams; retry later"
                )
            if not force:
                self._check_room()
                self._threads.check(client)
                if standalone:
                    self._standalones.check(client)
            self._threads.take(client)
            if standalone:
                self._standalones.take(client)
                self.standalone += 1
            else:
                self.resuming += 1

        def release() -> None:
            with self._lock:
                self._threads.give(client)
                if standalone:
                    self._standalones.give(client)
                    self.standalone -= 1
                else:
                    self.resuming -= 1

        return release

    def enter(self, client: str | None = None) -> Callable[[], None]:
        """Count a running call in the call budget (and in ``client``'s share of it); returns
        the function that gives its place back (call it once, as the call ends). A call whose
        client went away and that waits for it to resume still counts against that client.

        Raises:
            Busy: the call budget is taken (``Settings.call_budget``).
            ShareTaken: ``client`` holds its share of the call budget.
        """
        with self._lock:
            self._check_room()
            self._threads.check(client)
            self._threads.take(client)
            self.running += 1

        def release() -> None:
            with self._lock:
                self._threads.give(client)
                self.running -= 1

        return release

    def run(self, job: Callable[[], None], sink: Any) -> None:
        """Run ``job``, a call admitted by :meth:`enter`, whose output goes to ``sink``.

        With a :class:`zemcp.replies.direct.DirectSink` the job is left on the sink, for the
        request's own thread to run; otherwise it runs on the handler pool. ``job`` must
        answer its request whatever happens.
        """
        if getattr(sink, "direct", False):
            sink.job = job
        else:
            self._handler_pool().submit(job)

    def _handler_pool(self) -> ThreadPoolExecutor:
        pool = self._pool
        if pool is None:
            from concurrent.futures import ThreadPoolExecutor

            with self._lock:
                if self._pool is None:
                    # One worker per thread of the WSGI server: each waits on at most one handler.
                    self._pool = ThreadPoolExecutor(
                        max_workers=self._settings.threads, thread_name_prefix="zemcp-handler"
                    )
                pool = self._pool
        return pool
