"""What became of a client's answer handed to :meth:`zemcp.state.interfaces.WaitingCalls.resolve`.

MCP basic/transports: the client POSTs its response to a server-to-client request, and the
server answers 202 Accepted once it accepts it, or an HTTP error status. A transport maps each
:class:`Delivery` to its answer; only :attr:`Delivery.TAKEN` is an acceptance.
"""

from __future__ import annotations

import enum


class Delivery(enum.Enum):
    """The outcome of handing one answer to the waiting calls.

    A :class:`Delivery` is true only for :attr:`TAKEN`, so ``if resolve(...)`` reads as "the
    waiting call has it".
    """

    #: The waiting request has the answer: its handler goes on with it.
    TAKEN = "taken"
    #: No request of that session waits for that id: never sent in the session (another
    #: session's, unknown, not a string), answered already, timed out, cancelled or ended, or
    #: its process is known to be gone. The answer was not used; the session goes on.
    NOT_WAITING = "not waiting"
    #: (Redis) A request waited in another process, which did not confirm within
    #: :data:`zemcp.state.redis.waiting.HANDOVER_TIMEOUT` that it took the answer: it died
    #: (its heartbeat has not lapsed yet) or stalls. The answer was not used, and no request
    #: waits for that id any more; the call it belonged to ends with an error.
    UNCONFIRMED = "unconfirmed"

    def __bool__(self) -> bool:
        return self is Delivery.TAKEN
