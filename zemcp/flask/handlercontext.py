"""The Flask context a handler runs in: a copy of its round's request context, or an app context.

zemcp runs a handler on a thread of its own (the handler pool, a task's thread, the stdio
transport's), where Flask has pushed no context. The view captures the request context of
the request it serves (:func:`capture`); :class:`HandlerContexts` then gives the handler, on
its own thread, a copy of it as Flask's ``copy_current_request_context`` does: the same
``request`` and ``session``, a fresh app context whose ``g`` starts as a shallow copy of the
request's (what ``before_request`` hooks and Flask-Login put there). As for any copy of a
request context, the app's ``teardown_request`` and ``teardown_appcontext`` functions run
when the handler's copy ends. A run with no request (a task, the stdio transport) gets an
app context of the app: ``current_app`` and a fresh ``g``, no ``request``.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from flask import g
from flask.globals import request_ctx

if TYPE_CHECKING:
    from flask import Flask
    from flask.ctx import RequestContext
    from flask.wrappers import Request

    from zemcp.core.context import Context


class Captured(NamedTuple):
    """What a handler of one request gets: the request's context and its ``g`` as the view saw it.

    Attributes:
        context: Flask's request context of the request.
        g: the attributes of the request's ``g`` (name -> value).
    """

    context: RequestContext
    g: dict[str, Any]


def capture() -> Captured:
    """The current request's context and ``g``; call it in the view, inside the request context."""
    # request_ctx is a proxy, typed as what it stands for.
    return Captured(cast(Any, request_ctx)._get_current_object(), {name: g.get(name) for name in g})


class HandlerContexts:
    """The Flask contexts of one app's handlers: register :meth:`scope` with ``server.around_handlers``.

    Args:
        app: the Flask app whose endpoint serves the server.
    """

    def __init__(self, app: Flask):
        self._app = app
        self._lock = threading.Lock()
        # Kept while the request is: a handler holds it as ctx.request.
        self._captured: weakref.WeakKeyDictionary[Request, Captured] = weakref.WeakKeyDictionary()

    def remember(self, request: Request, captured: Captured) -> None:
        """Keep ``captured`` for the handler that will serve ``request`` (``ctx.request``)."""
        with self._lock:
            self._captured[request] = captured

    @contextlib.contextmanager
    def scope(self, ctx: Context) -> Iterator[None]:
        """The Flask context ``ctx``'s handler runs in, on the handler's thread.

        Args:
            ctx: the handler's context; ``ctx.request`` is the Flask request of the round, or
                None (a task, stdio).
        Yields:
            nothing; inside, ``flask.request``, ``g``, ``current_app`` and ``current_user``
            are the round's (a copy of its request context), or only ``current_app`` and a
            fresh ``g`` without a request.
        """
        with self._lock:
            captured = self._captured.get(ctx.request) if ctx.request is not None else None
        if captured is None:
            with self._app.app_context():
                yield
            return
        with captured.context.copy():
            for name, value in captured.g.items():
                setattr(g, name, value)
            yield
