"""The request pipeline: the concerns every message meets on its way to an era, one layer each.

A transport (:mod:`zemcp.http`, :mod:`zemcp.cli.stdio`) hands each message with its
:class:`zemcp.eras.requestcontext.RequestContext` to the pipeline of the message's era, which
:func:`compose` builds once per era from :data:`LAYERS`, outermost first:

1. :mod:`zemcp.pipeline.ratelimits`: the rate limits (``RateLimited``, 429);
2. :mod:`zemcp.pipeline.telemetry`: the message's operation (span, duration, record);
3. :mod:`zemcp.pipeline.audit`: the audit record of a use of a tool, prompt or resource;
4. :mod:`zemcp.pipeline.authorization`: what the principal may see and use;
5. :mod:`zemcp.pipeline.admission`: a running call's place in the call budget, and its start.

Each layer is a class built with the server and the next step (``Layer(server, next)``) and
called as the next step is, ``layer(message, context) -> outcome``; it acts before and after
the steps inside it, and hears of a running call's end through
:meth:`zemcp.eras.requestcontext.RequestContext.on_finish`. A layer with nothing to do for a
server (its static ``applies(server)`` is false: telemetry that records nothing, the audit log
off) is left out of its pipeline, so that it costs a plain call nothing. Adding a concern is one module
and its line in :data:`LAYERS`; the eras do not change. The same pipeline serves both eras and
both transports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from zemcp.pipeline.admission import Admission
from zemcp.pipeline.audit import Audit
from zemcp.pipeline.authorization import Authorization
from zemcp.pipeline.ratelimits import RateLimits
from zemcp.pipeline.telemetry import Telemetry

if TYPE_CHECKING:
    from zemcp.core.server import Server
    from zemcp.eras.requestcontext import Serve

#: The layers, outermost first: each is ``Layer(server, next)``, a ``Serve`` itself.
LAYERS: tuple[Callable[[Server, Serve], Serve], ...] = (RateLimits, Telemetry, Audit, Authorization, Admission)


def compose(server: Server, serve: Serve) -> Serve:
    """``serve`` (an era's entry point) inside the layers of :data:`LAYERS`.

    Args:
        server: the server whose settings, budget, telemetry and registrations the layers use.
        serve: ``serve(message, context) -> outcome``, the era's entry point.
    Returns:
        the pipeline: called as ``serve`` is.
    """
    for layer in reversed(LAYERS):
        applies = getattr(layer, "applies", None)
        if applies is None or applies(server):
            serve = layer(server, serve)
    return serve
