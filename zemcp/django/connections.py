"""Database connections on zemcp's threads, recycled as Django's request cycle recycles them.

Django keeps one connection per thread and database, and closes the stale ones only around
its own requests: the ``request_started`` and ``request_finished`` signals call
:func:`django.db.close_old_connections`, which closes a connection past ``CONN_MAX_AGE``, one
whose last query failed and cannot be used, and arranges the ``CONN_HEALTH_CHECKS`` check
before the next query. A zemcp handler runs on the handler pool or on a task thread, where no
Django request starts or finishes: left alone, a connection there would outlive
``CONN_MAX_AGE``, and once PostgreSQL dropped it ("server closed the connection
unexpectedly") every later handler on that thread would fail. :func:`recycle_connections`
registers the same calls around every handler run (:meth:`zemcp.Server.around_handlers`).

Needs Django (``pip install 'zemcp[django]'``); :mod:`zemcp.django` uses it for every view.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from django.db import close_old_connections

from zemcp.core.server import Server

if TYPE_CHECKING:
    from zemcp.core.context import Context


@contextmanager
def recycled_connections() -> Iterator[None]:
    """Close this thread's stale database connections before and after what runs inside.

    Implements around a handler run what Django's ``request_started`` and ``request_finished``
    signal handlers do around a request (Django documentation, "Databases: persistent
    connections"): with ``CONN_MAX_AGE = 0`` the handler's connections close when it ends,
    with a positive age they are reused until it passes, and with ``CONN_HEALTH_CHECKS`` the
    first query of each run checks the connection and reconnects when it was dropped.
    """
    close_old_connections()
    try:
        yield
    finally:
        close_old_connections()


def recycle_connections(server: Server) -> None:
    """Have ``server`` recycle the database connections of the threads its handlers run on.

    Args:
        server: the server a Django view serves; registering it twice changes nothing.
    """
    server.around_handlers(_around_handler)


def _around_handler(ctx: Context) -> AbstractContextManager[None]:
    """:func:`recycled_connections` around a handler run, whatever it serves."""
    return recycled_connections()


__all__ = ["recycle_connections", "recycled_connections"]
