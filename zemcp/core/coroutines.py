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

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from zemcp.core.exchange import RoundEnded
from zemcp.protocol.elicitation import ElicitAborted

log = logging.getLogger("zemcp.coroutines")

T = TypeVar("T")
#: Types of return values that are never awaitable: most handlers return one of them.
_PLAIN_VALUES = frozenset({str, dict, list, int, float, bool, type(None)})


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


class Abortable(Protocol):
    """What :func:`call` watches for the end of a call: a handler's :class:`zemcp.Context`."""

    def _on_abort(self, callback: Callable[[BaseException], object]) -> Callable[[], None]:
        """Run ``callback(reason)`` once when the call is aborted (at once if it was); returns
        the function that stops watching."""


def call(
    handler: Callable[..., Any], is_async: bool, what: str, aborts: Abortable | None, /, *args: Any, **kwargs: Any
) -> Any:
    """Call ``handler(*args, **kwargs)`` to completion on this thread and return its value.

    A coroutine function (``is_async``, from :func:`handler_is_async`) runs in an event loop
    created for this call and closed after it, whatever the coroutine raises: the exceptions
    of the handler, of its context (a cancelled request, the end of a 2026-07-28 round) and
    ``SystemExit`` propagate as they would from a plain function. When the call is aborted
    while the coroutine runs (``notifications/cancelled``, the client gone, the session
    ended), its task is cancelled: the handler gets ``asyncio.CancelledError`` at the await
    it is in, and, when that ends the coroutine, the abort reason is raised here.

    An exception group (``asyncio.TaskGroup``) that holds the end of a 2026-07-28 round or an
    abort is unwrapped to that exception, so the call ends as it would without the group; the
    group's other exceptions are logged, not answered: they happen again when the handler is
    replayed, or do not matter to a call that can no longer be answered.

    Args:
        handler: the registered function.
        is_async: whether it is a coroutine function.
        what: how error messages name it (``"tool 'search'"``).
        aborts: the call's context, whose abort cancels the coroutine; None where nothing
            aborts a call (completion providers).
        args, kwargs: its arguments, the context included.
    Returns:
        what the handler returned (a coroutine's result, awaited).
    Raises:
        TypeError: a plain ``def`` handler returned an awaitable (a coroutine, a task, a
            future), or an ``async def`` returned a coroutine it did not await: the message
            says what to write; a coroutine is closed first, so it leaves no "never awaited"
            warning behind. Also a ``TypeError`` of awaiting None, with a hint when it comes
            from awaiting a plain context method (``await ctx.log(...)``).
        RuntimeError: the handler's coroutine was cancelled inside its loop before it returned.
        the abort reason: the call was aborted, and the handler let the cancellation end it.
        whatever the handler raised.
    """
    if not is_async:
        return plain_value(handler(*args, **kwargs), what)
    # Imported here: a server whose handlers are all plain def never loads asyncio.
    import asyncio

    aborted: list[BaseException] = []
    try:
        value = asyncio.run(_supervised(handler(*args, **kwargs), aborts, aborted))
    except asyncio.CancelledError:
        if aborted:
            raise aborted[0] from None
        # A BaseException: it would pass the handler's error answers by; say what happened instead.
        raise RuntimeError(f"{what}: its coroutine was cancelled before it returned") from None
    except BaseExceptionGroup as group:
        raise _unwrapped(group, what) from None
    except TypeError as exc:
        if "NoneType" in str(exc) and "await" in str(exc):
            raise TypeError(
                f"{what}: {exc}; ctx.log, ctx.report_progress, ctx.elicitation_complete and ctx.close_sse_stream "
                "are plain calls, not awaitable: call them without await"
            ) from exc
        raise
    if inspect.iscoroutine(value):
        value.close()
        raise TypeError(f"{what} returned a coroutine from an async def: await it")
    return value


def plain_value(value: Any, what: str) -> Any:
    """What a plain ``def`` handler returned, once it is known to be no awaitable.

    Callers that run a plain handler themselves (one frame less below the request) pass its
    value here, as :func:`call` does.

    Args:
        value: the handler's return value.
        what: how error messages name the handler (``"tool 'search'"``).
    Returns:
        ``value``.
    Raises:
        TypeError: ``value`` is an awaitable (a coroutine, a task, a future): zemcp does not
            await what a plain def returns; a coroutine is closed first.
    """
    if type(value) in _PLAIN_VALUES:
        return value
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise TypeError(
            f"{what} returned an awaitable ({type(value).__name__}) from a plain def, and zemcp does not "
            "await what a plain def returns; declare the handler async def, or return the value itself"
        )
    return value


async def _supervised(coroutine: Coroutine[Any, Any, T], aborts: Abortable | None, aborted: list[BaseException]) -> T:
    """Await ``coroutine`` as the loop's main task, cancelled when ``aborts`` reports an abort
    (whose reason goes to ``aborted``)."""
    import asyncio

    if aborts is None:
        return await coroutine
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None  # asyncio.run runs this as a task

    def cancel(reason: BaseException) -> None:
        aborted.append(reason)
        try:
            loop.call_soon_threadsafe(task.cancel)
        except RuntimeError:
            pass  # the loop is closed: the handler returned meanwhile

    stop = aborts._on_abort(cancel)
    try:
        return await coroutine
    finally:
        stop()


def _unwrapped(group: BaseExceptionGroup[BaseException], what: str) -> BaseException:
    """The exception that ends the call out of ``group``: the end of a round, else an abort,
    else the group itself (an ``ExceptionGroup`` is the handler's error, as any exception)."""
    for kind in (RoundEnded, ElicitAborted):
        match, rest = group.split(kind)
        if match is not None:
            if rest is not None:
                log.info("%s: exceptions raised beside the end of the call, not answered: %r", what, rest)
            first: BaseException = match
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            return first
    return group


async def waiting(wait: Callable[[], T], name: str, stop: Callable[[], object]) -> T:
    """Run the blocking ``wait()`` on a thread of its own and await its outcome.

    The awaiting loop goes on meanwhile. The thread is a plain one, not the loop's default
    executor: ``asyncio.run`` joins that executor's threads when the handler returns. When
    the awaiting task is cancelled (``asyncio.wait_for``, a failed ``asyncio.gather``, the
    call's cancellation), ``stop()`` ends the wait, and the cancellation goes on once the
    thread has ended, so what ending the wait sends precedes what the handler does next.

    Args:
        wait: the blocking call (a handshake-era ask of the client).
        name: the thread's name, for thread dumps.
        stop: ends ``wait()`` early, from the loop's thread.
    Returns:
        what ``wait()`` returned.
    Raises:
        what ``wait()`` raised; ``asyncio.CancelledError`` when the awaiting task was cancelled.
    """
    import asyncio

    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    ended: asyncio.Future[None] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        ended.set_result(None)
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
    try:
        return await future
    except asyncio.CancelledError:
        stop()
        # The wait's own ending (the client told its questions are withdrawn) comes before the
        # handler's, which may end the call and its stream.
        await ended
        raise
