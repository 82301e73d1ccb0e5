"""Server-to-client requests waiting for answers that may arrive at any process (a
:class:`zemcp.state.waitingcalls.WaitingCalls`).

A handler waits in its own process, in the process's correlation table
(:class:`zemcp.state.correlation.CorrelationTable`), as without Redis. What Redis adds is the
way there: every waiting request is also listed in a hash of its session (request id ->
the node id of the waiting process), which caps the waiting requests of one session across
every process (``max_pending_per_session``); the process cap stays per process, since it
protects this process's threads. An answer POSTed to another process claims the waiting
request there, in one script: its listing goes (so a second answer finds nothing to claim)
and the answer goes to the waiting node's inbox (:mod:`zemcp.state.redis.node`), which hands
it to the waiting thread, even one whose wait runs out at that moment, and says so in the
answer's receipt (a list the POST waits on with ``BLPOP``, at most :data:`HANDOVER_TIMEOUT`).
A waiting node that says nothing in time died (its heartbeat lives on for up to
:data:`zemcp.state.redis.node.HEARTBEAT_TTL` seconds) or stalls; the POST then gives up on the
answer, and one key set only once (the receipt's turn) decides between that and a late
taking, so the answer is either taken and the POST told so, or not used at all; in the
latter case the waiting node, once it reads the answer, ends its call at once
(:class:`zemcp.protocol.elicitation.AnswerLost`): no answer can reach it any more. So the
POST's 202 means the waiting call has the answer, and no answer is lost, duplicated or given
to another call. Only what the waiting call needs travels: the answer, once, through lists
that the waiting node and the POST empty and that expire.
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING, Any

from zemcp.protocol import jsonrpc
from zemcp.protocol.elicitation import AnswerLost
from zemcp.state.correlation import CorrelationTable, Pending
from zemcp.state.redis.client import Redis
from zemcp.state.redis.node import Node
from zemcp.state.unavailable import StateUnavailable
from zemcp.state.waitingcalls import CapacityError, Delivery

if TYPE_CHECKING:
    from zemcp.state.waitingcalls import Identified, RunningCall

log = logging.getLogger("zemcp.redis")

#: [seconds] the longest an answer POSTed to another process waits for the waiting process to
#: say it took the answer (twice this when that process takes its turn as the wait runs out).
HANDOVER_TIMEOUT = 2.0
#: [seconds] how long a listing outlives its timeout, for a process that died before it
#: could remove it.
MARGIN = 10.0

# KEYS: the session's hash of waiting requests. ARGV: request id, node id, cap, lifetime ms.
_LIST = """
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""

# The handover of an answer, in one round trip. KEYS: the session's hash of waiting requests.
# ARGV: request id, this node's id, the inbox key prefix, the heartbeat key prefix, the
# message, the inbox's lifetime ms, "force" to skip the heartbeat check. Returns false when
# nothing waits for that id, "here" when this node does, {"dead", node} when the waiting
# node's heartbeat is missing (the caller looks again before it believes it), else claims
# the answer for the waiting request (its listing goes, so no other answer can claim it),
# puts it in the waiting node's inbox and returns {"sent", node}.
_HAND_OVER = """
local owner = redis.call('HGET', KEYS[1], ARGV[1])
if not owner then return false end
if owner == ARGV[2] then return 'here' end
if ARGV[7] ~= 'force' and redis.call('EXISTS', ARGV[4] .. owner) == 0 then return {'dead', owner} end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('RPUSH', ARGV[3] .. owner, ARGV[5])
redis.call('PEXPIRE', ARGV[3] .. owner, ARGV[6])
return {'sent', owner}
"""

# The POST gives up on an answer whose receipt did not come in time. KEYS: the receipt's turn,
# the receipt. ARGV: lifetime ms. Returns "dropped" when the POST took the turn (the waiting
# node will drop the answer), else what the waiting node said (nil: not yet).
_GIVE_UP = """
if redis.call('SET', KEYS[1], 'dropped', 'NX', 'PX', ARGV[1]) then return 'dropped' end
return redis.call('LPOP', KEYS[2])
"""


class RedisWaitingCalls(CorrelationTable):
    """The waiting requests of this process, reachable from every process.

    Args:
        redis: the connection.
        node: this process's node (its inbox receives answers POSTed elsewhere).
        max_pending: requests waiting in this process at most.
        max_per_session: requests of one session waiting at once at most, in all processes.
        timeout: [seconds] the longest wait of one request (``elicitation_timeout``), which
            bounds how long its listing lives.
        client_share: the share of ``max_pending`` one client may hold in this process (the
            threads it shares out are this process's).
    """

    def __init__(
        self,
        redis: Redis,
        node: Node,
        max_pending: int,
        max_per_session: int,
        timeout: float,
        client_share: float = 1.0,
    ):
        # The local table caps the process and the client; the per-session cap is counted in Redis.
        super().__init__(max_pending, max_pending, client_share)
        self.max_per_session = max_per_session
        self.redis = redis
        self.node = node
        self._lifetime_ms = round((timeout + MARGIN) * 1000)
        self._list = redis.client.register_script(_LIST)
        self._hand_over = redis.client.register_script(_HAND_OVER)
        self._give_up = redis.client.register_script(_GIVE_UP)
        # A receipt and its turn outlive both sides' waits by far: a late node finds the turn taken.
        self._receipt_ms = round((2 * HANDOVER_TIMEOUT + MARGIN) * 1000)
        # An answer in an inbox lives as long as its turn decides: a node that stalled past the
        # POST's wait still reads it, and then either takes it or ends its call (_answer_here).
        self._inbox_ms = self._receipt_ms
        # Ids of waiting requests whose answer was claimed elsewhere (their listing is gone).
        self._handed: set[str] = set()
        node.on_inbox("answer", self._answer_here)

    def _listing(self, session_id: str) -> str:
        return self.redis.key("waiting", session_id)

    def register(self, session: Identified, call: RunningCall) -> Pending:
        """Reserve a slot here and a listing in Redis for a new request of ``call``.

        Raises:
            CapacityError: the process's cap, or the session's cap across processes, is reached.
            StateUnavailable: Redis cannot be reached.
        """
        pending = super().register(session, call)
        try:
            with self.redis.guard():
                listed = self._list(
                    keys=[self._listing(session.id)],
                    args=[pending.id, self.node.ensure(), self.max_per_session, self._lifetime_ms],
                )
        except BaseException:
            super().discard(pending)
            raise
        if not listed:
            super().discard(pending)
            raise CapacityError(
                f"this session already has {self.max_per_session} (the per-session cap, across every process)"
            )
        return pending

    def discard(self, pending: Pending) -> None:
        """Free the slot of ``pending`` here and its listing in Redis (unless an answer claimed
        elsewhere removed the listing already)."""
        super().discard(pending)
        if pending.id in self._handed:
            self._handed.discard(pending.id)
            return
        try:
            with self.redis.guard():
                self.redis.client.hdel(self._listing(pending.session_id), pending.id)
        except StateUnavailable:
            pass  # the listing expires on its own

    def wait(self, pending: Pending, timeout: float) -> jsonrpc.Response:
        """Block until ``pending`` is resolved or abandoned (see the in-process table); an
        answer that another process claimed for it as the wait ran out is still taken.

        Raises:
            TimeoutError: nothing arrived in time, and no answer was claimed for it.
            the reason given to :meth:`end_session` or :meth:`end_call`.
        """
        try:
            return super().wait(pending, timeout)
        except TimeoutError:
            if not self._claimed(pending):
                raise
        # Claimed: its answer is on its way through the inbox, a moment behind the claim.
        with self._lock:
            if isinstance(pending._outcome, TimeoutError):
                pending._outcome = None
        return super().wait(pending, HANDOVER_TIMEOUT)

    def _claimed(self, pending: Pending) -> bool:
        # Removing our own listing fails only when an answer's handover removed it first.
        try:
            with self.redis.guard():
                removed = self.redis.client.hdel(self._listing(pending.session_id), pending.id)
        except StateUnavailable:
            return False
        if removed:
            self._handed.add(pending.id)  # nothing left to remove in discard
        return not removed

    def resolve(self, session_id: str, answer: jsonrpc.Response) -> Delivery:
        """Hand the client's answer to the request it answers, in whichever process waits.

        Another process's request is claimed in Redis (its listing goes, atomically, so one
        answer only is taken) and the answer put in that process's inbox, which it takes
        even if its wait runs out meanwhile (:meth:`wait`); this waits until that process
        says whether its call took it, at most :data:`HANDOVER_TIMEOUT` seconds (twice that
        when it takes its turn just as the wait runs out).

        Returns:
            ``Delivery.TAKEN`` once the waiting call has the answer (here, or in the process
            that said so); ``Delivery.NOT_WAITING`` when no request of that session with that
            id waits anywhere (already answered, timed out, ended, or its process is known to
            be gone); ``Delivery.UNCONFIRMED`` when another process's request was claimed but
            that process did not say in time that it took the answer (it died before its
            heartbeat lapsed, or stalls): the answer is not used, and the claim stands.
        Raises:
            StateUnavailable: Redis cannot be reached.
        """
        if not isinstance(answer.id, str):
            return Delivery.NOT_WAITING
        if super().resolve(session_id, answer):
            return Delivery.TAKEN
        receipt = self.redis.key("receipt", secrets.token_urlsafe(12))
        outcome = self._hand(session_id, answer.id, _encode(answer), receipt, "")
        if outcome and outcome[0] == b"dead":
            # A missing heartbeat may be one Redis lost a moment ago: look again before giving up.
            if not self.node.alive(outcome[1].decode()):
                return Delivery.NOT_WAITING
            outcome = self._hand(session_id, answer.id, _encode(answer), receipt, "force")
        if not outcome or outcome == b"here" or outcome[0] != b"sent":
            return Delivery.NOT_WAITING
        return self._receipt(receipt)

    def _receipt(self, receipt: str) -> Delivery:
        # What the waiting node says of the answer. If it says nothing in time, the turn decides
        # between giving up here and its late taking, whose word then follows at once.
        with self.redis.guard():
            said = self.redis.blocking.blpop([receipt], timeout=HANDOVER_TIMEOUT)
            if said is not None:
                word = said[1]
            else:
                word = self._give_up(keys=[receipt + ":turn", receipt], args=[self._receipt_ms])
            if word is None:
                said = self.redis.blocking.blpop([receipt], timeout=HANDOVER_TIMEOUT)
                word = said[1] if said is not None else None
        if word == b"taken":
            return Delivery.TAKEN
        if word == b"missed":
            return Delivery.NOT_WAITING
        if word is None:
            log.warning(
                "an answer went to the process that waits for it, which did not say within %g s whether its call "
                "took it (Redis trouble?); the POST is told that it was not taken",
                2 * HANDOVER_TIMEOUT,
            )
        return Delivery.UNCONFIRMED

    def _hand(self, session_id: str, request_id: str, answer: dict[str, Any], receipt: str, force: str) -> Any:
        message = self.node.message(
            "answer", self._receipt_ms / 1000, session=session_id, answer=answer, receipt=receipt
        )
        with self.redis.guard():
            return self._hand_over(
                keys=[self._listing(session_id)],
                args=[
                    request_id,
                    self.node.ensure(),
                    self.redis.key("inbox", ""),
                    self.redis.key("node", ""),
                    message,
                    self._inbox_ms,
                    force,
                ],
            )

    def _answer_here(self, message: dict[str, Any]) -> None:
        session_id, raw, receipt = message.get("session"), message.get("answer"), message.get("receipt")
        if not (isinstance(session_id, str) and isinstance(raw, dict) and isinstance(receipt, str)):
            return
        if not isinstance(raw.get("id"), str):
            return
        request_id: str = raw["id"]
        try:
            with self.redis.guard():
                # The turn: the POST gave up on the answer if it took it first, and told its client
                # that the answer was not used. The claim removed the request's listing, so no
                # answer can reach it any more: it ends now rather than at its timeout.
                if not self.redis.client.set(receipt + ":turn", b"taken", nx=True, px=self._receipt_ms):
                    self._handed.add(request_id)
                    if not self._abandon(lambda p: p.session_id == session_id and p.id == request_id, AnswerLost()):
                        self._handed.discard(request_id)
                    return
            # Its listing went with the claim: the waiting thread skips it in discard. Marked
            # before the waiter can wake, unmarked when nothing here waits for it any more.
            self._handed.add(request_id)
            taken = super().resolve(session_id, jsonrpc.Response(request_id, raw.get("result"), raw.get("error")))
            if not taken:
                self._handed.discard(request_id)
            with self.redis.guard():
                pipe = self.redis.client.pipeline(transaction=True)
                pipe.rpush(receipt, b"taken" if taken else b"missed")
                pipe.pexpire(receipt, self._receipt_ms)
                pipe.execute()
        except StateUnavailable:
            pass  # the POST, told nothing, says the answer was not taken (logged by the guard)

    def count(self, session_id: str | None = None) -> int:
        """Requests waiting: in the whole process (None), or of one session in every process.

        Raises:
            StateUnavailable: Redis cannot be reached (only when ``session_id`` is given).
        """
        if session_id is None:
            return super().count()
        with self.redis.guard():
            return int(self.redis.client.hlen(self._listing(session_id)))


def _encode(answer: jsonrpc.Response) -> dict[str, Any]:
    return {"id": answer.id, "result": answer.result, "error": answer.error}
