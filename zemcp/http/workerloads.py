"""Which worker of a gunicorn serves a connection: one with room, by loads kept in shared memory.

gunicorn's workers share one listening socket: every worker's poller wakes when a connection
waits, and the first to call ``accept`` takes it. A worker busy with a burst is about as quick
to accept as an idle one, so a burst of connections lands mostly on one worker, while each
worker's budgets (``pending_budget``, ``call_budget``) are its own: calls beyond that worker's
budget are refused while its siblings sit idle. And a client that keeps its connections alive
sends its next requests to the workers that accepted them, whatever their load.

So each worker publishes its load in a slot of a :class:`WorkerLoads` table, memory the
master maps before it forks (gunicorn's ``pre_fork`` hook assigns a worker its slot,
``child_exit`` frees it); a heartbeat beside it tells a live worker from one that stopped
looking. A load (:func:`pack`) counts the worker's *busy* connections first (waiting for a
request head, or with a request other than a GET running: a GET is a stream, which holds a
thread of the stream budgets, not of the calls'), then its *idle* kept-alive ones. Each slot
also has an inbox, a Unix datagram socket pair made with the table, through which siblings
hand the worker connections. The worker's :class:`zemcp.http.worker.ThreadWorker` then:

- takes a waiting connection at once when no live sibling has a lower load
  (:func:`accept_now`); otherwise it leaves the connection to that sibling for a moment, and
  takes it anyway when it still waits (nothing waits long for a sibling that is slow to
  look). The least loaded worker always takes new connections, so they never stay in the
  backlog, also when every worker is full (elicitation answers come on new connections);
- when a request head is whole while the worker already has its budget of busy connections
  and a live sibling has room (:func:`hand_to`), hands the connection, with the bytes read
  so far, to that sibling's inbox (``SCM_RIGHTS``), which serves it from there on. Only with
  shared state (``ZEMCP_REDIS_URL``), where every worker serves every session.
"""

from __future__ import annotations

import contextlib
import mmap
import socket

#: A load is ``busy << BUSY_SHIFT | idle``: busy connections weigh first, idle ones break ties.
BUSY_SHIFT = 24
#: The most idle connections a load tells apart.
IDLE_MAX = (1 << BUSY_SHIFT) - 1
#: The load of a slot whose worker takes no connections (none there, starting, stopping, or
#: at gunicorn's ``worker_connections``).
ABSENT = 1 << 62
#: [milliseconds] a worker whose heartbeat is older than this has stopped looking (its loop
#: publishes at least once a second) and counts as absent.
STALE_MS = 5000
#: Slots of a table beyond the workers it starts with (gunicorn's TTIN adds workers).
SPARE_SLOTS = 8
#: [bytes] the most a handed connection carries along: a whole request head (at most 64 KiB)
#: and the bytes read with it.
HANDOFF_BYTES = 128 * 1024


def pack(busy: int, idle: int) -> int:
    """The load of a worker with ``busy`` busy and ``idle`` idle kept-alive connections (both 0
    or more): a lower load has fewer busy connections, or as many and fewer idle ones."""
    return busy << BUSY_SHIFT | min(idle, IDLE_MAX)


def busy_of(load: int) -> int:
    """The busy connections of a worker of ``load`` (huge for :data:`ABSENT`)."""
    return load >> BUSY_SHIFT


def accept_now(mine: int, lowest: int) -> bool:
    """Whether a worker of load ``mine`` takes a waiting connection at once: when no live
    sibling has a lower load (``lowest``, from :meth:`WorkerLoads.lowest`; :data:`ABSENT`
    when there is none). Workers of equal load all try; the first takes the connection."""
    return mine <= lowest


def hand_to(busy: int, lowest: int, budget: int) -> bool:
    """Whether a worker with ``busy`` other busy connections hands a request to the least
    loaded live sibling (of load ``lowest``): it holds its ``budget`` of busy connections
    already, and that sibling does not."""
    return busy >= budget > busy_of(lowest)


class WorkerLoads:
    """The load, heartbeat and inbox of each worker of one gunicorn, shared by every process
    forked after it was made.

    Args:
        slots: how many workers it can hold.

    The master calls :meth:`assign` before each fork and :meth:`release` when a worker
    exits; a worker calls :meth:`publish`, :meth:`lowest`, :meth:`hand` and reads its
    :attr:`inbox`. Each slot is two 64-bit integers written only by its worker (load,
    heartbeat in milliseconds of ``time.monotonic()``, one clock for every process of the
    host); others only read them.

    Attributes:
        slot: the slot of this process (in a worker), or None (no slot was free).
    """

    def __init__(self, slots: int):
        self.slots = slots
        # An anonymous shared mapping: every process forked later writes and reads the same pages.
        self._memory = mmap.mmap(-1, slots * 16)
        self._cells = memoryview(self._memory).cast("q")
        self._inboxes: list[tuple[socket.socket, socket.socket]] = []
        for slot in range(slots):
            self._write(slot, ABSENT, 0)
            receiving, sending = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            receiving.setblocking(False)
            # A worker that cannot take a connection at once keeps it: never wait on a sibling.
            sending.setblocking(False)
            sending.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2 * HANDOFF_BYTES)
            self._inboxes.append((receiving, sending))
        self._free = list(range(slots - 1, -1, -1))
        self._held: dict[int, int] = {}
        self.slot: int | None = None

    def _write(self, slot: int, load: int, beat: int) -> None:
        self._cells[2 * slot] = load
        self._cells[2 * slot + 1] = beat

    def assign(self, key: int) -> None:
        """(In the master, before a fork) Give the worker about to be forked, known by ``key``
        (gunicorn's ``worker.age``), a free slot; it starts absent. It gets none (and
        accepts as gunicorn does) when every slot is held."""
        slot = self._free.pop() if self._free else None
        if slot is not None:
            self._write(slot, ABSENT, 0)
            self._held[key] = slot
        self.slot = slot

    def release(self, key: int) -> None:
        """(In the master) The worker known by ``key`` exited: its slot is absent and free again,
        and connections handed to it too late are closed (their clients see them end)."""
        slot = self._held.pop(key, None)
        if slot is None:
            return
        self._write(slot, ABSENT, 0)
        while True:
            try:
                _, fds, _, _ = socket.recv_fds(self._inboxes[slot][0], HANDOFF_BYTES, 1)
            except OSError:
                break
            for fd in fds:
                socket.socket(fileno=fd).close()
        self._free.append(slot)

    @property
    def inbox(self) -> socket.socket | None:
        """This worker's end of its inbox (non-blocking): each datagram is a connection's
        bytes read so far, with the connection's descriptor (``socket.recv_fds``)."""
        return None if self.slot is None else self._inboxes[self.slot][0]

    def publish(self, load: int, now: float) -> None:
        """Record this worker's ``load`` (:func:`pack`, or :data:`ABSENT`) at ``now``
        (``time.monotonic()``, seconds): its heartbeat."""
        if self.slot is not None:
            self._write(self.slot, load, int(now * 1000))

    def lowest(self, now: float) -> tuple[int, int | None]:
        """The lowest load of the other workers whose heartbeat is fresh at ``now`` (seconds of
        ``time.monotonic()``) and the slot of that worker; ``(ABSENT, None)`` when there is none."""
        fresh = int(now * 1000) - STALE_MS
        loads = self._cells[0::2].tolist()
        beats = self._cells[1::2].tolist()
        best, found = ABSENT, None
        for slot, load in enumerate(loads):
            if load < best and beats[slot] >= fresh and slot != self.slot:
                best, found = load, slot
        return best, found

    def hand(self, slot: int, sock: socket.socket, data: bytes) -> bool:
        """Send the connection ``sock``, with ``data`` (what was read of it so far, at most
        :data:`HANDOFF_BYTES`), to the inbox of ``slot``; True when it went (the caller then
        closes its own descriptor of it), False when that inbox is full or the data too long."""
        if len(data) > HANDOFF_BYTES:
            return False
        with contextlib.suppress(OSError):
            return socket.send_fds(self._inboxes[slot][1], [data], [sock.fileno()]) == len(data)
        return False


_table: WorkerLoads | None = None


def assign(workers: int, key: int) -> None:
    """(gunicorn's ``pre_fork`` hook, in the master) Make the table at the first fork, sized for
    ``workers`` and :data:`SPARE_SLOTS` more, and give the worker about to be forked (known
    by ``key``, its ``age``) a slot."""
    global _table
    if _table is None:
        _table = WorkerLoads(workers + SPARE_SLOTS)
    _table.assign(key)


def release(key: int) -> None:
    """(gunicorn's ``child_exit`` hook, in the master) Free the slot of the worker known by ``key``."""
    if _table is not None:
        _table.release(key)


def mine() -> WorkerLoads | None:
    """The table, in a worker that holds a slot of it; None otherwise (a configuration without
    zemcp's hooks, or no free slot): the worker then accepts as gunicorn does."""
    if _table is None or _table.slot is None:
        return None
    return _table
