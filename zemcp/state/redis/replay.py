"""The resumable streams' data in Redis: its keys, the Lua scripts that change it, and this
process's side of it (:class:`RedisReplay`), for :mod:`zemcp.state.redis.eventlogs`.

Keys (named by :meth:`zemcp.state.redis.client.Redis.key`; S a session id, X a stream id):

- ``streams:S`` (hash): stream id -> kind for each stream of the session, and ``:standalone``
  -> the id of its standalone stream;
- ``stream:S:X`` (hash, the stream's state): ``kind``; ``seq``, the latest number given
  (priming events included); ``dropped``, the latest number trimmed; ``bytes`` held;
  ``final`` and ``fin_at`` once finished (its last number; Redis time in ms); ``tokens``, the
  counter of its connections; ``reader``, ``holds`` and ``rnode``, the reading connection's
  token, whether it holds a place of a thread budget, and its node; ``seen`` (Redis ms), when
  the reader last polled or left; ``ending``, the token asked to end; ``ctl``, the counter of
  the control stream; ``writer`` and ``request`` (a request stream's), the node id of the
  process that writes it and the JSON-RPC id (JSON) of the request it answers;
- ``stream:S:X:events`` (a Redis Stream): one entry ``0-<n>`` per event holding its SSE bytes,
  trimmed oldest first to ``max_events`` and ``max_bytes`` (the newest is always kept);
- ``stream:S:X:control`` (a Redis Stream of one entry): written by attach, detach,
  ``end_connection`` and finish, so that a reader blocked in ``XREAD`` on both streams wakes.

Each operation is one script of :data:`SCRIPTS`, run atomically with ``EVALSHA`` in one round
trip; times are Redis's clock (``TIME``), so processes on several hosts agree. Every write
renews the stream's keys to expire ``window`` + :data:`EXPIRY_MARGIN` seconds later (and the
session's hash to expire no sooner); the end of a stream sets them once more, for its last
window. The request streams a process writes are also renewed by its node's heartbeat while
the process lives, so a handler that sends nothing for long keeps its stream. Their keys
gone while Redis answers means that Redis lost its data (flushed, restarted without
persistence): the writer is then told so (:class:`StreamLost`) and writes to its own
connection alone.

``max_replay_bytes`` evicts nothing here: what Redis holds is bounded by each stream's bounds
and by expiry. :attr:`RedisReplay.held` (``server status``) is what the streams that this
process finished hold, for their window.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

from redis.commands.core import Script

from zemcp.config import StreamLimits
from zemcp.state.redis.client import Redis, text
from zemcp.state.redis.node import Node
from zemcp.state.unavailable import StateUnavailable

#: [seconds] how much longer than the resume window a stream's keys live after its last write.
EXPIRY_MARGIN = 10.0

#: Lua functions every script starts with.
PRELUDE = r"""
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function unfinished() return redis.call('HEXISTS', KEYS[1], 'final') == 0 end
local function renew(ttl)
  for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ttl) end
  if redis.call('PTTL', KEYS[4]) < tonumber(ttl) then redis.call('PEXPIRE', KEYS[4], ttl) end
end
local function signal(what)
  local n = redis.call('HINCRBY', KEYS[1], 'ctl', 1)
  redis.call('XADD', KEYS[3], 'MAXLEN', 1, '0-' .. n, 'k', what)
end
-- The reader, whether it still reads, whether it is on node `me`, and how many ms ago the
-- stream was last known to be read (0: now, by a reader of this node).
local function presence(me, lease, real)
  local p = redis.call('HMGET', KEYS[1], 'reader', 'rnode', 'seen')
  local here = p[2] == me
  local live = p[1] ~= '0' and (here or real - tonumber(p[3]) <= tonumber(lease))
  return p[1], live, here, (live and here) and 0 or real - tonumber(p[3])
end
local function add(sid, payload, max_events, max_bytes)
  local n = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  local data = 'id: ' .. sid .. '-' .. n .. '\nevent: message\ndata: ' .. payload .. '\n\n'
  redis.call('XADD', KEYS[2], '0-' .. n, 'd', data)
  local size = redis.call('HINCRBY', KEYS[1], 'bytes', #data)
  local count, last = redis.call('XLEN', KEYS[2]), nil
  while count > 1 and (count > tonumber(max_events) or size > tonumber(max_bytes)) do
    local e = redis.call('XRANGE', KEYS[2], last and '(' .. last or '-', '+', 'COUNT', 1)[1]
    last, size, count = e[1], size - #e[2][2], count - 1
  end
  if last then
    local dropped = tonumber(string.match(last, '%d+$'))
    redis.call('XTRIM', KEYS[2], 'MINID', '0-' .. (dropped + 1))
    redis.call('HSET', KEYS[1], 'bytes', size, 'dropped', dropped)
  end
  return data
end
"""

#: The scripts by name. Each takes four KEYS: the stream's hash, its events, its control stream
#: and the session's hash (as ``RedisEventLog.keys``); ARGV as its comment says.
SCRIPTS = {
    # ARGV: stream id, kind, writer node, request id (JSON), ttl ms, and "read" when the writer's
    # own connection reads it from the start (token 1, event 1 its priming event), then the
    # payload of its first message event ('' none), max events, max bytes. Returns that
    # event's SSE bytes ('' none).
    "open": r"""
redis.call('HSET', KEYS[1], 'kind', ARGV[2], 'seq', 0, 'dropped', 0, 'bytes', 0, 'tokens', 0, 'reader', 0,
  'seen', now_ms(), 'writer', ARGV[3], 'request', ARGV[4])
local first = ''
if ARGV[6] == 'read' then
  redis.call('HSET', KEYS[1], 'seq', 1, 'tokens', 1, 'reader', 1, 'holds', 0, 'rnode', ARGV[3])
  if ARGV[7] ~= '' then first = add(ARGV[1], ARGV[7], ARGV[8], ARGV[9]) end
end
signal('open')
if ARGV[2] == 'standalone' then
  local old = redis.call('HGET', KEYS[4], ':standalone')
  if old then redis.call('HDEL', KEYS[4], old) end
  redis.call('HSET', KEYS[4], ':standalone', ARGV[1])
end
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])
renew(ARGV[5])
return first
""",
    # ARGV: ttl ms. Returns the new number, 0 when the stream is gone.
    "prime": r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local n = redis.call('HINCRBY', KEYS[1], 'seq', 1)
if unfinished() then renew(ARGV[1]) end
return n
""",
    # ARGV: stream id, payload ('' none), max events, max bytes, ttl ms, node, lease ms, writer
    # ('' any), 'append' or 'finish'. Adds an event and, to finish, ends the stream; only while
    # it is unfinished and, with a writer, written by that node. Returns {SSE bytes or '',
    # reader (-1: the stream's keys are gone), ms since the stream was last read or -1, bytes held}.
    "write": r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return {'', -1, -1, 0} end
local reader, live, here, floor = presence(ARGV[6], ARGV[7], now_ms())
if not unfinished() or (ARGV[8] ~= '' and redis.call('HGET', KEYS[1], 'writer') ~= ARGV[8]) then
  return {'', reader, floor, redis.call('HGET', KEYS[1], 'bytes')}
end
local data = ''
if ARGV[2] ~= '' then data = add(ARGV[1], ARGV[2], ARGV[3], ARGV[4]) end
if ARGV[9] == 'finish' then
  redis.call('HSET', KEYS[1], 'final', redis.call('HGET', KEYS[1], 'seq'), 'fin_at', now_ms())
  signal('finish')
end
renew(ARGV[5])
return {data, reader, floor, redis.call('HGET', KEYS[1], 'bytes')}
""",
    # ARGV: holds (0/1), node, ttl ms. Returns the new reader's token, 0 when the stream is gone.
    "attach": r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local token = redis.call('HINCRBY', KEYS[1], 'tokens', 1)
redis.call('HSET', KEYS[1], 'reader', token, 'holds', ARGV[1], 'rnode', ARGV[2], 'seen', now_ms())
signal('attach')
if unfinished() then renew(ARGV[3]) end
return token
""",
    # ARGV: token, ttl ms. Returns 1 when that token was the reader.
    "detach": r"""
if redis.call('HGET', KEYS[1], 'reader') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'reader', 0, 'holds', 0, 'seen', now_ms())
signal('detach')
if unfinished() then renew(ARGV[2]) end
return 1
""",
    # ARGV: ttl ms.
    "end": r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'ending', redis.call('HGET', KEYS[1], 'reader'))
signal('end')
if unfinished() then renew(ARGV[1]) end
return 1
""",
    # ARGV: token, cursor, ttl ms. A reader's turn: {'gone'}, {'taken'}, {'dropped'}, {'ending'},
    # or {'ok', seq, final or -1, control counter, writer, request, SSE bytes after the cursor...}.
    "poll": r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return {'gone'} end
local m = redis.call('HMGET', KEYS[1], 'reader', 'dropped', 'ending', 'seq', 'final', 'ctl', 'writer', 'request')
if m[1] ~= ARGV[1] then return {'taken'} end
if tonumber(ARGV[2]) < tonumber(m[2]) then return {'dropped'} end
redis.call('HSET', KEYS[1], 'seen', now_ms())
if not m[5] then renew(ARGV[3]) end
if m[3] == ARGV[1] then
  redis.call('HSET', KEYS[1], 'ending', 0)
  return {'ending'}
end
local out = {'ok', m[4], m[5] or -1, m[6], m[7], m[8]}
for _, e in ipairs(redis.call('XRANGE', KEYS[2], '(0-' .. ARGV[2], '+')) do out[#out + 1] = e[2][2] end
return out
""",
    # ARGV: stream id, node, offset ms of the caller's "now", window ms, lease ms. Returns {0} for a
    # stream that is gone, else {1, member of the session, kind, seq, dropped, bytes, final or -1,
    # holds a place on this node, attached, abandoned, expired, ms since last read, writer, request}.
    "look": r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local real = now_ms()
local now, window = real + tonumber(ARGV[3]), tonumber(ARGV[4])
local _, live, here, floor = presence(ARGV[2], ARGV[5], real)
local m = redis.call('HMGET', KEYS[1], 'kind', 'seq', 'dropped', 'bytes', 'final', 'fin_at', 'holds', 'seen',
  'writer', 'request')
local abandoned = not live and now - tonumber(m[8]) > window
local expired = (m[5] and now - tonumber(m[6]) > window) or (m[1] == 'standalone' and abandoned)
return {1, redis.call('HEXISTS', KEYS[4], ARGV[1]), m[1], m[2], m[3], m[4], m[5] or -1,
  (live and here and m[7] == '1') and 1 or 0, live and 1 or 0, abandoned and 1 or 0, expired and 1 or 0, floor,
  m[9], m[10]}
""",
    # ARGV: ttl ms. The writer's heartbeat: keep an unfinished stream.
    "renew": r"""
if redis.call('EXISTS', KEYS[1]) == 1 and unfinished() then renew(ARGV[1]) end
return 0
""",
    # ARGV: stream id. The session no longer knows the stream (resuming it gets 404).
    "forget": r"""
redis.call('HDEL', KEYS[4], ARGV[1])
if redis.call('HGET', KEYS[4], ':standalone') == ARGV[1] then redis.call('HDEL', KEYS[4], ':standalone') end
return 0
""",
}


def ms(seconds: float) -> int:
    """[milliseconds] ``seconds``, rounded."""
    return round(seconds * 1000)


@dataclass(frozen=True)
class Look:
    """What the ``look`` script saw of a stream.

    Attributes:
        member: the session still knows it.
        final: its last event's number once finished, else -1.
        read_ago: [milliseconds] since it was last known to be read (0: now, by a reader of the
            caller's node), -1 when its keys are gone.
        the others: as the :class:`zemcp.state.streamlogs.EventLog` properties of those names.
    """

    member: bool
    kind: str
    seq: int
    dropped: int
    size: int
    final: int
    holds_here: bool
    attached: bool
    abandoned: bool
    expired: bool
    read_ago: int
    writer: str
    request: Any

    @classmethod
    def parse(cls, reply: list[Any]) -> Look:
        """The ``look`` script's reply; a stream whose keys are gone looks finished, unread,
        abandoned, expired and known to no session."""
        if not reply[0]:
            return cls(False, "request", 0, 0, 0, 0, False, False, True, True, -1, "", None)
        seq, dropped, size, final = (int(x) for x in reply[3:7])
        holds_here, attached, abandoned, expired = (bool(int(x)) for x in reply[7:11])
        kind, read_ago, writer, request = text(reply[2]), int(reply[11]), text(reply[12]), json.loads(reply[13])
        return cls(
            bool(reply[1]),
            kind,
            seq,
            dropped,
            size,
            final,
            holds_here,
            attached,
            abandoned,
            expired,
            read_ago,
            writer,
            request,
        )


class StreamLost(StateUnavailable):
    """The keys of a request stream this process writes are gone while Redis answers: Redis
    lost its data. Its events reach the writer's own connection only (as while Redis cannot be
    reached), and the stream can no longer be resumed."""


class Stream(Protocol):
    """A stream as :class:`RedisReplay` sees it: its keys, in the order the scripts take them."""

    keys: list[str]


class RedisReplay:
    """This process's side of the streams kept in Redis: the scripts, the renewal of the
    request streams it writes, and the bytes its finished streams hold (a
    :class:`zemcp.state.streamlogs.ByteBudget`). One per process, shared by every session's
    :class:`zemcp.state.redis.eventlogs.RedisStreamLogs`.

    Args:
        redis: the shared state's connection.
        node: this process's node, whose heartbeat renews the streams it writes.
        limits: the knobs of every stream.

    Attributes:
        redis, node, limits: as given.
        ttl: [milliseconds] how long a stream's keys live after its last write.
        scripts: :data:`SCRIPTS`, registered with ``redis.client``.
    """

    def __init__(self, redis: Redis, node: Node, limits: StreamLimits):
        self.redis = redis
        self.node = node
        self.limits = limits
        self.ttl = round((limits.window + EXPIRY_MARGIN) * 1000)
        self.scripts: dict[str, Script] = {
            name: redis.client.register_script(PRELUDE + body) for name, body in SCRIPTS.items()
        }
        self._lock = threading.Lock()
        self._writing: weakref.WeakSet[Stream] = weakref.WeakSet()
        # The streams it wrote whose keys Redis lost: they stay lost.
        self._lost: weakref.WeakSet[Stream] = weakref.WeakSet()
        self._renewed = time.monotonic()
        self._kept: OrderedDict[str, tuple[float, int]] = OrderedDict()
        self._bytes = 0
        node.every_heartbeat(self._renew)

    def renew_while_writing(self, stream: Stream) -> None:
        """Keep ``stream`` (a request stream this process writes) until :meth:`stop_renewing`."""
        with self._lock:
            self._writing.add(stream)

    def stop_renewing(self, stream: Stream) -> None:
        """``stream`` finished: its keys now live out its last window."""
        with self._lock:
            self._writing.discard(stream)

    def lost(self, stream: Stream) -> None:
        """The keys of ``stream`` were found gone while Redis answered: for a stream this process
        writes, Redis lost its data; for any other, it ended and expired (nothing to do).

        Raises:
            StreamLost: this process writes ``stream`` (or did, when its keys were lost).
        """
        with self._lock:
            if stream in self._writing:
                self._writing.discard(stream)
                self._lost.add(stream)
            if stream not in self._lost:
                return
        raise StreamLost(
            f"Service Unavailable: the shared session state (Redis at {self.redis.where}) lost this stream's "
            f"events (Redis lost its data): they reach the connection that reads it now, and the stream cannot "
            f"be resumed"
        )

    def reader(self, stream: Stream) -> int:
        """The token of the connection that reads ``stream`` now (0: none).

        Raises:
            StreamLost: this process writes ``stream`` and its keys are gone (:meth:`lost`).
            StateUnavailable: Redis cannot be reached.
        """
        with self.redis.guard():
            reader = self.redis.client.hget(stream.keys[0], "reader")
        if reader is None:
            self.lost(stream)
        return int(reader or 0)

    def _renew(self) -> None:
        # On the heartbeat thread. Renewing every third of the keys' life keeps them alive with
        # one pipelined round trip for all the streams this process writes.
        now = time.monotonic()
        if now - self._renewed < self.ttl / 3000:
            return
        self._renewed = now
        with self._lock:
            writing = list(self._writing)
        if not writing:
            return
        with self.redis.guard():
            pipe = self.redis.client.pipeline(transaction=False)
            for stream in writing:
                self.scripts["renew"](stream.keys, [self.ttl], client=pipe)
            pipe.execute()

    def keep(self, stream: Stream, size: int) -> None:
        """Count a stream this process finished, holding ``size`` bytes, for its window."""
        with self._lock:
            if stream.keys[0] not in self._kept:
                self._kept[stream.keys[0]] = (time.monotonic(), size)
                self._bytes += size

    def release(self, stream: Stream) -> None:
        """Stop counting a stream that was forgotten."""
        with self._lock:
            kept = self._kept.pop(stream.keys[0], None)
            if kept is not None:
                self._bytes -= kept[1]

    @property
    def held(self) -> int:
        """[bytes] held by the streams this process finished whose window has not passed."""
        cutoff = time.monotonic() - self.limits.window
        with self._lock:
            while self._kept and next(iter(self._kept.values()))[0] < cutoff:
                self._bytes -= self._kept.popitem(last=False)[1][1]
            return self._bytes
