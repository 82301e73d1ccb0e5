"""Handlers that are not plain functions: ``functools.partial`` objects and callable objects.

A handler may be any callable: a function or method, a ``functools.partial`` of one, or an
object whose class defines ``__call__``. Its arguments are those ``inspect.signature`` gives
(a partial's bound ones left out, a callable object's ``self`` too), and their types and
descriptions come from the function that runs: the partial's function, the object's
``__call__``. :func:`described` gives a plain function that shows exactly that, for the
schema derivation (:mod:`zemcp.core.schemas`), which reads functions; :func:`handler_name`
says what a registration is called. Pure Python: no HTTP here.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from zemcp.core.docstrings import doc_source
from zemcp.core.type_schemas import type_hints


def underlying(handler: Callable[..., Any]) -> Callable[..., Any]:
    """The function that runs when ``handler`` is called: a partial's function (its own
    partials unwrapped), a callable object's ``__call__``, else ``handler`` itself."""
    while isinstance(handler, functools.partial):
        handler = handler.func
    if inspect.isroutine(handler) or inspect.isclass(handler):
        return handler
    call: Callable[..., Any] = type(handler).__call__
    return call


def described(handler: Callable[..., Any]) -> Callable[..., Any]:
    """``handler`` itself when it is a function or method; else a plain function standing for
    it in the schema derivation: ``handler``'s signature, the type hints of its
    :func:`underlying` function for those parameters (and the return), its docstring
    (:func:`zemcp.core.docstrings.doc_source`) and its name. Calling the stand-in calls
    ``handler``.

    Raises:
        TypeError: the underlying function's annotations cannot be resolved.
    """
    if inspect.isroutine(handler):
        return handler
    target = underlying(handler)
    signature = inspect.signature(handler)
    hints = type_hints(target)

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        return handler(*args, **kwargs)

    stand_in.__signature__ = signature  # type: ignore[attr-defined]
    stand_in.__annotations__ = {k: v for k, v in hints.items() if k in signature.parameters or k == "return"}
    stand_in.__doc__ = getattr(doc_source(handler), "__doc__", None)
    stand_in.__name__ = getattr(target, "__name__", type(handler).__name__)
    stand_in.__qualname__ = getattr(target, "__qualname__", stand_in.__name__)
    stand_in.__module__ = getattr(target, "__module__", __name__)
    return stand_in


def handler_name(handler: Callable[..., Any], name: str | None, what: str) -> str:
    """The name of a registration: ``name`` when given, else the handler's ``__name__``.

    Args:
        handler: the registered callable.
        name: the name given at registration, or None.
        what: the kind of registration, for the message (``"tool"``, ``"prompt"`` ...).
    Raises:
        TypeError: no name was given and the handler has no ``__name__`` (a
            ``functools.partial``, a callable object): the message says to pass ``name=``.
    """
    if name is not None:
        return name
    own = getattr(handler, "__name__", None)
    if isinstance(own, str):
        return own
    raise TypeError(
        f"a {what} made from a {type(handler).__name__} object has no __name__ to be named after; "
        f"give its name at registration: @server.{what}(name=...)"
    )
