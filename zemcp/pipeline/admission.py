"""The admission layer: a call whose handler runs takes a place in the call budget, then starts.

An era answers a message whose handler may talk to the client with a
:class:`zemcp.eras.requestcontext.Running` call that has not started. This layer admits it to
the threads of the call budget and the client's fair share of them
(:meth:`zemcp.core.admission.Admission.enter`: :class:`zemcp.core.admission.Busy`, HTTP 503,
or :class:`zemcp.state.shares.ShareTaken`, HTTP 429, and then the era withdraws what it set
up), starts its job (on the request's thread under gunicorn, else on the handler pool) and
gives the place back when the call ends. Streams that hold a thread without running a handler
(``subscriptions/listen``, a session's GET streams) are admitted where they open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zemcp.core.admission import Busy
from zemcp.eras.requestcontext import Running
from zemcp.state.shares import ShareTaken

if TYPE_CHECKING:
    from zemcp.core.server import Server
    from zemcp.eras.requestcontext import Outcome, RequestContext, Serve
    from zemcp.protocol import jsonrpc


class Admission:
    """Admits and starts the running calls of one server.

    Args:
        server: the :class:`zemcp.core.server.Server` (its :class:`zemcp.core.admission.Admission`).
        next: serves the message.
    """

    def __init__(self, server: Server, next: Serve):
        self._admission = server.admission
        self._next = next

    def __call__(self, message: jsonrpc.Message, context: RequestContext) -> Outcome:
        """Serve ``message``; a running call it gives is admitted and started.

        Raises:
            Busy: the call budget is taken; the call was withdrawn and never runs.
            ShareTaken: the message's client holds its share of the call budget; likewise.
        """
        outcome = self._next(message, context)
        if isinstance(outcome, Running):
            try:
                release = self._admission.enter(context.client)
            except (Busy, ShareTaken):
                outcome.withdraw()
                raise
            context.on_finish(lambda _response: release())
            self._admission.run(outcome.job, outcome.sink)
        return outcome
