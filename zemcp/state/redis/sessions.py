"""Handshake-era sessions as records in Redis (a :class:`zemcp.state.sessionstore.SessionStore`).

Any process of any instance that shares the Redis recognises a live session and serves it
(MCP basic/transports, "Session Management"). A session is a hash holding what
``initialize`` fixed (version, client info and capabilities, the principal it is bound to)
and what later requests change (``logging/setLevel``, ``notifications/initialized``), a set
of its resource subscriptions, and its entry in a sorted set scored by its last traffic,
which counts live sessions against ``max_sessions`` and tells the sweepers of every process
which are idle past ``session_ttl``. A process that runs a request of a session keeps the
session's score fresh, so a session with a running request or a read standalone stream is
never idle. Every key expires on its own a margin after the TTL, also if no sweeper runs.
At every heartbeat a process also looks for the records of the sessions whose calls it runs:
one that Redis, answering, no longer has (Redis lost its data: flushed, or restarted without
persistence) is ended here at once, so that its calls end with an error instead of waiting
for answers nobody can send any more; a Redis that does not answer (a stall) ends nothing.

Each process keeps a :class:`RedisSession` object for the sessions it serves now: its
running requests, and the local side of its streams. Ending a session (DELETE, expiry) in
one process is announced on the bus, so that every process ends the waits and streams of
the session it holds.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from zemcp.config import Settings
from zemcp.protocol.elicitation import RequestCancelled
from zemcp.state.redis.client import Redis, text
from zemcp.state.redis.node import Node
from zemcp.state.redis.session import RedisSession
from zemcp.state.session import UNKNOWN_SESSION, Session, fingerprint, new_session_id
from zemcp.state.sessionstore import SessionLimitReached, SessionNotFound, SessionRequired
from zemcp.state.streamlogs import StreamLogs
from zemcp.state.waitingcalls import WaitingCalls

log = logging.getLogger("zemcp.session")

#: [seconds] how long every key of a session outlives its TTL, for a sweeper that ran late.
MARGIN = 60.0
#: [seconds] a process forgets its object of a session it has not served for this long.
LOCAL_IDLE = 120.0
#: [seconds] a process that looked a session up in Redis serves it from its own object for
#: this long without asking again: a change made through another process (logging/setLevel)
#: applies here within it, and the session's last request is recorded at most this late.
RECHECK = 1.0
#: Why a session whose calls run here ended when Redis, answering, no longer had its record.
LOST = "Redis no longer has it: Redis lost its data, or the session was ended meanwhile; initialize a new session"

# KEYS: the sorted set of sessions, the session's hash. ARGV: id, max_sessions, ttl ms,
# key lifetime ms, then the hash's field/value pairs. Returns 1, or 0 at the cap.
_CREATE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[2], unpack(ARGV, 5))
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""

# KEYS: sorted set, hash, subscriptions. ARGV: id, ttl ms, key lifetime ms, "1" for every
# field (else only the changing ones). Returns false for a session that is gone or idle
# past its TTL (then deleted), else the fields as a flat list.
_TOUCH = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local seen = redis.call('ZSCORE', KEYS[1], ARGV[1])
if (not seen) or now - tonumber(seen) > tonumber(ARGV[2]) or redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[2], KEYS[3])
  redis.call('ZREM', KEYS[1], ARGV[1])
  return false
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
if ARGV[4] == '1' then return redis.call('HGETALL', KEYS[2]) end
local v = redis.call('HMGET', KEYS[2], 'lvl', 'init')
return {'lvl', v[1] or '', 'init', v[2] or '0'}
"""

# KEYS: sorted set, hash, subscriptions. ARGV: id; then optionally "idle" and the least age
# in ms (at that offset from now) that lets it end. Returns the hash (flat) if this ended it.
_END = """
if ARGV[2] == 'idle' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[4])
  local seen = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if seen and now - tonumber(seen) <= tonumber(ARGV[3]) then return false end
end
local fields = redis.call('HGETALL', KEYS[2])
local gone = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2], KEYS[3])
if #fields == 0 and gone == 0 then return false end
return fields
"""

# KEYS: sorted set. ARGV: ttl ms, offset ms. Ids of sessions idle past the TTL at now + offset.
_IDLE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]), 'LIMIT', 0, 256)
"""

# KEYS: sorted set, then the hash and subscriptions of each session. ARGV: key lifetime ms,
# then the ids. Marks each live one as seen now.
_KEEP = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], now, ARGV[i])
    redis.call('PEXPIRE', KEYS[i * 2 - 2], ARGV[1])
    redis.call('PEXPIRE', KEYS[i * 2 - 1], ARGV[1])
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
"""

# KEYS: subscriptions, hash. ARGV: uri, limit, key lifetime ms. 1, or 0 at the limit.
_SUBSCRIBE = """
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 and redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""


def _pairs(flat: list[bytes]) -> dict[str, str]:
    return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}


class RedisSessionStore:
    """The sessions every process sharing the Redis serves.

    Args:
        redis: the connection.
        node: this process's node (its bus carries the ends of sessions).
        settings: ``max_sessions`` (for the whole deployment), ``session_ttl``, ``instance``.
        on_end: called as ``on_end(session, why)`` in every process that holds the session
            when it ended.
        new_streams: ``new_streams(session_id)`` makes a session's stream logs.
        waiting: the waiting calls of this process, whose waits a cancellation relayed from
            another process ends.

    Attributes:
        shared: True: sessions outlive this process, which ends none of them as it stops.
    """

    shared = True

    def __init__(
        self,
        redis: Redis,
        node: Node,
        settings: Settings,
        on_end: Callable[[Session, str], None],
        new_streams: Callable[[str], StreamLogs],
        waiting: WaitingCalls,
    ):
        self.redis = redis
        self.node = node
        self.instance = settings.instance
        self.max_sessions = settings.max_sessions
        self.ttl = settings.session_ttl
        self._ttl_ms = round(settings.session_ttl * 1000)
        self._keep_ms = round((settings.session_ttl + MARGIN) * 1000)
        self._on_end = on_end
        self._new_streams = new_streams
        self._waiting = waiting
        self._lock = threading.Lock()
        self._local: dict[str, RedisSession] = {}
        self._index = redis.key("sessions")
        client = redis.client
        self._create = client.register_script(_CREATE)
        self._touch = client.register_script(_TOUCH)
        self._end = client.register_script(_END)
        self._idle = client.register_script(_IDLE)
        self._keep = client.register_script(_KEEP)
        self._subscribe = client.register_script(_SUBSCRIBE)
        self._sweep_every = min(30.0, max(0.5, self.ttl / 4))
        self._last_sweep = time.monotonic()
        node.on_bus("end", self._ended_elsewhere)
        node.on_bus("cancel", self._cancelled_elsewhere)
        node.every_heartbeat(self._maintain)

    def _keys(self, session_id: str) -> list[str]:
        return [self._index, self.redis.key("session", session_id), self.redis.key("subs", session_id)]

    # -- the SessionStore interface -----------------------------------------------------------

    def create(
        self,
        protocol_version: str,
        client_info: dict[str, Any],
        capabilities: dict[str, Any],
        principal: str | None = None,
    ) -> Session:
        """Create a session in Redis (bound to ``principal`` when given).

        Raises:
            SessionLimitReached: ``max_sessions`` sessions are live in the whole deployment.
            StateUnavailable: Redis cannot be reached.
        """
        self.node.ensure()
        fields = {
            "v": protocol_version,
            "ci": json.dumps(client_info, separators=(",", ":")),
            "caps": json.dumps(capabilities, separators=(",", ":")),
            "p": principal or "",
            "c": repr(time.time()),
            "lvl": "info",
            "init": "0",
        }
        session_id = new_session_id(self.instance)
        flat = [item for pair in fields.items() for item in pair]
        with self.redis.guard():
            made = self._create(
                keys=self._keys(session_id)[:2],
                args=[session_id, self.max_sessions, self._ttl_ms, self._keep_ms, *flat],
            )
        if not made:
            raise SessionLimitReached(
                f"this deployment holds its maximum of {self.max_sessions} sessions (ZEMCP_MAX_SESSIONS); retry "
                f"later or end unused sessions with DELETE"
            )
        session = RedisSession(self, session_id, fields, self._new_streams(session_id))
        with self._lock:
            self._local[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session:
        """The live session named ``session_id``, its last traffic set to now.

        Raises:
            SessionRequired: ``session_id`` is None.
            SessionNotFound: no live session has that id (it ended, expired, or Redis lost it).
            StateUnavailable: Redis cannot be reached.
        """
        if session_id is None:
            raise SessionRequired(
                "Bad Request: the Mcp-Session-Id header is required; send initialize first and "
                "repeat the Mcp-Session-Id it returns on every later request"
            )
        self.node.ensure()
        with self._lock:
            session = self._local.get(session_id)
        if session is not None and time.monotonic() - session.verified < RECHECK:
            # Served here a moment ago: its end would have come on the bus.
            return session
        with self.redis.guard():
            flat = self._touch(
                keys=self._keys(session_id),
                args=[session_id, self._ttl_ms, self._keep_ms, "0" if session is not None else "1"],
            )
        if not flat:
            if session is not None:
                self._end_here(session_id, "expired")
            raise SessionNotFound(UNKNOWN_SESSION)
        fields = _pairs(flat)
        if session is not None:
            session.refresh(fields)
            return session
        made = RedisSession(self, session_id, fields, self._new_streams(session_id))
        with self._lock:
            session = self._local.setdefault(session_id, made)
        return session

    def end(self, session_id: str, why: str) -> bool:
        """End a session everywhere: its record goes, and every process that holds it ends
        its waits and streams; False when it was not live.

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        with self.redis.guard():
            flat = self._end(keys=self._keys(session_id), args=[session_id])
        if not flat:
            return False
        self._announce_end(session_id, why, _pairs(flat))
        return True

    def sweep(self, now: float | None = None) -> int:
        """Keep the sessions this process is busy with alive, end every session of the
        deployment idle longer than the TTL (``now``: ``time.monotonic()`` seconds), and
        forget the local objects of sessions not served here for a while; returns how many
        sessions this process ended.

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        mono = time.monotonic()
        offset_ms = 0 if now is None else round((now - mono) * 1000)
        with self._lock:
            local = list(self._local.values())
        busy = [s.id for s in local if s.busy()]
        ended = 0
        with self.redis.guard():
            if busy:
                keys = [self._index] + [k for sid in busy for k in self._keys(sid)[1:]]
                self._keep(keys=keys, args=[self._keep_ms, *busy])
            idle = [raw.decode() for raw in self._idle(keys=[self._index], args=[self._ttl_ms, offset_ms])]
            for session_id in idle:
                if session_id in busy:
                    continue
                flat = self._end(keys=self._keys(session_id), args=[session_id, "idle", self._ttl_ms, offset_ms])
                if flat:
                    self._announce_end(session_id, "expired", _pairs(flat))
                    ended += 1
        with self._lock:
            for session in local:
                if (
                    self._local.get(session.id) is session
                    and not session.busy()
                    and mono - session.verified > LOCAL_IDLE
                ):
                    del self._local[session.id]
        return ended

    def sessions(self) -> list[Session]:
        """The live sessions of the whole deployment, oldest first (at most ``max_sessions``).

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        with self.redis.guard():
            ids = [text(raw) for raw in self.redis.client.zrange(self._index, 0, self.max_sessions - 1)]
            pipe = self.redis.client.pipeline(transaction=False)
            for session_id in ids:
                pipe.hgetall(self.redis.key("session", session_id))
            records = pipe.execute()
        found: list[Session] = []
        # Read, not touched: listing sessions must not keep idle ones alive.
        for session_id, record in zip(ids, records):
            with self._lock:
                session = self._local.get(session_id)
            if session is None and record:
                fields = {key.decode(): value.decode() for key, value in record.items()}
                session = RedisSession(self, session_id, fields, self._new_streams(session_id))
            if session is not None and record:
                found.append(session)
        return sorted(found, key=lambda s: s.created)

    def local(self) -> list[Session]:
        """The sessions this process holds objects of (those it served lately)."""
        with self._lock:
            return list(self._local.values())

    def __contains__(self, session_id: object) -> bool:
        if not isinstance(session_id, str):
            return False
        with self.redis.guard():
            return self.redis.client.zscore(self._index, session_id) is not None

    def __len__(self) -> int:
        with self.redis.guard():
            return int(self.redis.client.zcount(self._index, f"({time.time() * 1000 - self._ttl_ms}", "+inf"))

    def close(self) -> None:
        """This process stops: stop its node (the sessions live on)."""
        self.node.close()

    # -- what a RedisSession writes through ------------------------------------------------

    def write(self, session_id: str, field: str, value: str) -> None:
        """Set one changing field of a live session's record.

        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        with self.redis.guard():
            self.redis.client.hset(self.redis.key("session", session_id), field, value)

    def initialized(self, session_id: str) -> bool:
        """True when the record says the client sent ``notifications/initialized``."""
        with self.redis.guard():
            return self.redis.client.hget(self.redis.key("session", session_id), "init") == b"1"

    def subscribe(self, session_id: str, uri: str, limit: int) -> bool:
        """Add ``uri`` to the session's subscriptions; False at ``limit``."""
        with self.redis.guard():
            return bool(self._subscribe(keys=[self.redis.key("subs", session_id)], args=[uri, limit, self._keep_ms]))

    def unsubscribe(self, session_id: str, uri: str) -> None:
        """Remove ``uri`` from the session's subscriptions."""
        with self.redis.guard():
            self.redis.client.srem(self.redis.key("subs", session_id), uri)

    def publish_cancel(self, session_id: str, request_id: Any, reason: str | None) -> None:
        """Tell every process: the one running ``request_id`` of the session cancels it."""
        self.node.publish("cancel", session=session_id, request=request_id, reason=reason)

    def is_subscribed(self, session_id: str, uri: str) -> bool:
        """True when ``uri`` is among the session's subscriptions."""
        with self.redis.guard():
            return bool(self.redis.client.sismember(self.redis.key("subs", session_id), uri))

    # -- ends --------------------------------------------------------------------------------

    def _announce_end(self, session_id: str, why: str, fields: dict[str, str]) -> None:
        try:
            self.node.publish("end", session=session_id, why=why)
        except Exception:
            log.warning("session %s ended, but the other processes could not be told", fingerprint(session_id))
        with self._lock:
            session = self._local.get(session_id)
        if session is None and fields.get("v"):
            # Run the end here even for a session this process never served: its streams
            # and its standalone stream's registration are in Redis.
            session = RedisSession(self, session_id, fields, self._new_streams(session_id))
            with self._lock:
                self._local.setdefault(session_id, session)
        self._end_here(session_id, why)

    def _end_here(self, session_id: str, why: str) -> None:
        with self._lock:
            session = self._local.pop(session_id, None)
        if session is None:
            return
        session.close(why)
        self._on_end(session, why)

    def _ended_elsewhere(self, message: dict[str, Any]) -> None:
        session_id, why = message.get("session"), message.get("why")
        if isinstance(session_id, str) and isinstance(why, str):
            self._end_here(session_id, why)

    def _cancelled_elsewhere(self, message: dict[str, Any]) -> None:
        session_id, reason = message.get("session"), message.get("reason")
        with self._lock:
            session = self._local.get(session_id) if isinstance(session_id, str) else None
        call = session.call(message.get("request")) if session is not None else None
        if call is None:
            return
        cancelled = RequestCancelled(reason if isinstance(reason, str) else None)
        if call.abort(cancelled):
            self._waiting.end_call(call, cancelled)

    def _end_lost(self) -> None:
        with self._lock:
            running = [session.id for session in self._local.values() if session.calls()]
        if not running:
            return
        with self.redis.guard():
            pipe = self.redis.client.pipeline(transaction=False)
            for session_id in running:
                pipe.exists(self.redis.key("session", session_id))
            found = pipe.execute()
        lost = [session_id for session_id, exists in zip(running, found) if not exists]
        if lost:
            log.warning(
                "Redis at %s no longer has %d session(s) whose calls run here (it lost its data, or they were "
                "ended meanwhile): their calls end now",
                self.redis.where,
                len(lost),
            )
        for session_id in lost:
            self._end_here(session_id, LOST)

    def _maintain(self) -> None:
        self._end_lost()
        now = time.monotonic()
        if now - self._last_sweep < self._sweep_every:
            return
        self._last_sweep = now
        ended = self.sweep()
        if ended:
            log.info("ended %d idle session(s)", ended)
