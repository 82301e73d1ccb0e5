"""``async def`` handlers: recognised at registration, run to completion on their request's thread.

zemcp runs every handler on its request's thread (under gunicorn) or on its handler pool, and
so it runs an ``async def`` handler (tool, resource or template, prompt, completion provider):
:func:`call` runs its coroutine in an event loop of its own, created for the call and closed
when the coroutine returns (``asyncio.run``), so no loop is ever shared between calls or
threads and nothing of asyncio outlives the call. :func:`handler_is_async` tells at
registration which handlers need that, and refuses async generators, which have no single
result to send.

The awaitable methods of :class:`zemcp.Context` (``aelicit``, ``asample`` ...) wait for the
client's answer through :func:`waiting`: the blocking wait of the handshake era runs on a
thread of its own while the handler's loop goes on with its other tasks.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def handler_is_async(handler: Callable[..., Any], what: str) -> bool:
    """Whether ``handler`` is a coroutine function, whose calls :func:`call` must run in a loop.

    A function or method declared ``async def``, a ``functools.partial`` of one, and an object
    whose ``__call__`` is ``async def`` count.

    Args:
        handler: the function being registered.
        what: how error messages name the registration (``"tool 'search'"``).
    Returns:
        True for a coroutine function, False for a plain one.
    Raises:
        TypeError: ``handler`` is an async generator function (``async def`` with ``yield``):
            an MCP result is one value, so the message says to return it from an ``async def``.
    """
    candidates: list[Any] = [handler]
    if not (inspect.isroutine(handler) or inspect.isclass(handler) or isinstance(handler, functools.partial)):
        # A callable object: what runs is its __call__.
        candidates.append(type(handler).__call__)
    for candidate in candidates:
        if inspect.isasyncgenfunction(candidate):
            raise TypeError(
                f"{what}: its handler is an async generator (async def with yield), and an MCP request "
                "has one result, not a stream of them; return the whole value from an async def (report "
                "how far it got with ctx.report_progress or ctx.log)"
            )
    return any(inspect.iscoroutinefunction(candidate) for candidate in candidates)


def call(handler: Callable[..., Any], is_async: bool, what: str, /, *args: Any, **kwargs: Any) -> Any:
    """Call ``handler(*args, **kwargs)`` to completion on this thread and return its value.

    A coroutine function (``is_async``, from :func:`handler_is_async`) runs in an event loop
    created for this call and closed after it, whatever the coroutine raises: the exceptions
    of the handler, of its context (a cancelled request, the end of a 2026-07-28 round) and
    ``SystemExit`` propagate as they would from a plain function.

    Args:
        handler: the registered function.
        is_async: whether it is a coroutine function.
        what: how error messages name it (``"tool 'search'"``).
        args, kwargs: its arguments, the context included.
    Returns:
        what the handler returned (a coroutine's result, awaited).
    Raises:
        TypeError: a plain ``def`` handler returned an awaitable (a coroutine, a task, a
            future): it was meant to be ``async def``, which the message says; a coroutine
            is closed first, so it leaves no "never awaited" warning behind.
        RuntimeError: the handler's coroutine was cancelled inside its loop before it returned.
        whatever the handler raised.
    """
    if not is_async:
        value = handler(*args, **kwargs)
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()
            raise TypeError(
                f"{what} returned an awaitable ({type(value).__name__}) from a plain def, and zemcp does not "
                "await what a plain def returns; declare the handler async def, or return the value itself"
            )
        return value
    try:
        return asyncio.run(handler(*args, **kwargs))
    except asyncio.CancelledError:
        # A BaseException: it would pass the handler's error answers by; say what happened instead.
        raise RuntimeError(f"{what}: its coroutine was cancelled before it returned") from None


async def waiting(wait: Callable[[], T], name: str) -> T:
    """Run the blocking ``wait()`` on a thread of its own and await its outcome.

    The awaiting loop goes on meanwhile. The thread is a plain one, not the loop's default
    executor: ``asyncio.run`` joins that executor's threads when the handler returns, and a
    wait the handler stopped awaiting (a sibling of a failed ``asyncio.gather``) would then
    hold the request's thread until the client answered; this thread instead ends with its
    wait, which the end of the call ends too.

    Args:
        wait: the blocking call (a handshake-era ask of the client).
        name: the thread's name, for thread dumps.
    Returns:
        what ``wait()`` returned.
    Raises:
        what ``wait()`` raised.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return  # the awaiting task was cancelled
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def run() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = wait()
        except BaseException as exc:
            error = exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:
            pass  # the loop is closed: the handler returned without this answer

    threading.Thread(target=run, name=name, daemon=True).start()
    return await future
