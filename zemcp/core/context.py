"""The context a handler gets to talk to the client during its request, in either era.

A handler declares a parameter annotated :class:`Context` (or named ``ctx``) to receive it.
Notifications (log messages, progress) go on the request's own reply sink: MCP
basic/transports says messages related to a request ride that request's response stream, so
the first of them upgrades the response to ``text/event-stream``. Questions for the client
(elicitation, sampling, roots) are checked against the capabilities the client declared
before anything is sent, then handed to the request's exchange (:mod:`zemcp.core.exchange`), which
pushes them on the stream (handshake era) or asks by multi-round-trip (2026-07-28). The
questions are defined in :mod:`zemcp.core.questions`, the exceptions of asking in
:mod:`zemcp.core.errors`.

Every method that waits for the client has an awaitable form for ``async def`` handlers
(``aelicit``, ``aelicit_url``, ``asample``, ``alist_roots``, ``aask_all``), which leaves the
handler's event loop free while it waits (:func:`zemcp.core.coroutines.waiting`). The other
methods only write on the request's stream and stay plain calls in either kind of handler.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, TypeVar

from zemcp.core.coroutines import waiting
from zemcp.core.errors import CannotWait, CapabilityMissing, new_elicitation_id
from zemcp.core.questions import Ask, Elicit, ElicitURL, ListRoots, Sample
from zemcp.protocol import elicitation, jsonrpc, versions
from zemcp.protocol.apps import client_supports_apps
from zemcp.protocol.capabilities import LOG_LEVELS
from zemcp.state.waitingcalls import CapacityError, Withdrawal

if TYPE_CHECKING:
    from collections.abc import Callable

    from zemcp.auth.principal import Principal
    from zemcp.core.exchange import Exchange
    from zemcp.protocol.capabilities import ClientView
    from zemcp.protocol.inputs import InputRequest
    from zemcp.state.session import Session

T = TypeVar("T")

#: The ``notifications/cancelled`` reason of questions whose awaiting task stopped awaiting them.
STOPPED_WAITING = "the handler stopped waiting for the answer"


class Context:
    """What a handler gets to talk to the client during its request.

    The same handler code serves both eras: in the handshake era a question is pushed on
    the request's stream and the handler waits for the answer; in the 2026-07-28 era the
    handler is run again for every round, each question answered in an earlier round
    returns its recorded answer, and the first new question ends the round (so ask before
    doing side effects, and ask the same questions in the same order for the same
    arguments: docs/elicitation.md, "Replay").

    An ``async def`` handler awaits the forms whose names start with ``a`` (``aelicit`` for
    ``elicit`` ...), which leave its event loop free while they wait; the plain forms work
    there too, but hold the loop until the client answers.

    Attributes:
        client: what the client declared for this request (``protocol_version``,
            ``client_info``, ``capabilities``): see :class:`zemcp.protocol.capabilities.ClientView`.
        session: the handshake-era session, or None for a 2026-07-28 request (no sessions).
        request_id: the JSON-RPC id of the request being handled.
        auth: who the request's access token names (:class:`zemcp.auth.Principal`:
            ``subject``, ``client_id``, ``scopes``, ``claims``); with authorization off, the
            principal of the site's user under a framework view (``issuer`` ``"site"``, the
            username as ``subject``, no scopes) or of ``stdio --user``; else None.
        task_id: the ``taskId`` when the call runs as a task (MCP tasks, docs/tasks.md),
            else None.
        user: whom the request acts for: the site's user (Django's ``request.user``) when a
            framework view serves the endpoint, else :attr:`auth`; None without either. A task
            keeps the user of the call that created it.
        request: the site's request (Django's ``HttpRequest``) of the round being served when a
            framework view serves the endpoint; None elsewhere, and in a task, which outlives
            its request.
    """

    def __init__(self, exchange: Exchange, auth: Principal | None = None, user: Any = None):
        self._exchange = exchange
        self._operation = exchange.operation
        self.auth = auth
        self.user = user
        self.request: Any = exchange.site_request
        self._last_progress: float | None = None
        self.client: ClientView = exchange.client
        self.session: Session | None = exchange.session
        self.request_id = exchange.request_id
        self.task_id: str | None = getattr(exchange, "task_id", None)

    def client_supports_elicit(self, mode: str = "form") -> bool:
        """True when the client declared elicitation in ``mode`` (``form`` or ``url``); check before eliciting."""
        return self.client.client_supports_elicit(mode)

    def client_supports(self, capability: str) -> bool:
        """True when the client declared ``capability`` (``sampling``, ``roots``, ``elicitation``)."""
        return self.client.client_supports(capability)

    @property
    def client_supports_apps(self) -> bool:
        """True when the client renders MCP Apps: it declared the ``io.modelcontextprotocol/ui``
        extension with ``text/html;profile=mcp-app`` among its ``mimeTypes`` (MCP Apps
        2026-01-26, "Client (Host) Capabilities"), at ``initialize`` or, at 2026-07-28, in this
        request's ``params._meta``. A tool with a UI answers a fuller text when it is False."""
        return client_supports_apps(self.client.capabilities)

    def elicit(
        self,
        message: str,
        requested_schema: dict[str, Any] | type[T],
        *,
        key: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any] | T:
        """Ask the user for information (MCP client/elicitation, form mode).

        Ask before doing side effects: the wait can end in decline, cancel, timeout or the
        client going away, and the handler should then leave nothing half done.

        Args:
            message: the question shown to the user.
            requested_schema: a flat ``{"type": "object", "properties": {...}}`` schema, or a
                dataclass, TypedDict or pydantic model of primitive fields (the schema is
                derived from it).
            key: the ``inputRequests`` key in the 2026-07-28 era (``elicitation-N`` by
                position when omitted).
            timeout: [seconds] the longest wait for this answer in the handshake era, at
                most the process-wide ``elicitation_timeout`` (a larger value is clipped to
                it); that setting when None. A 2026-07-28 round never waits, so there it
                only bounds nothing: the answer counts while the ``requestState`` is valid
                (``elicitation_timeout`` after the round). See :meth:`ask_all`.
        Returns:
            the accepted content, validated; an instance of the class when a class was given.
        Raises:
            zemcp.ElicitError: a subclass names the outcome (declined, cancelled, malformed,
                unsupported, too many pending, schema invalid, timeout, request cancelled,
                session ended, client disconnected).
        """
        content: dict[str, Any] | T = self.ask_all(Elicit(message, requested_schema, key), timeout=timeout)[0]
        return content

    def elicit_url(self, message: str, url: str, elicitation_id: str | None = None, *, key: str | None = None) -> str:
        """Ask the user to open ``url`` for an interaction outside MCP (URL mode, 2025-11-25 on).

        Use it for what form mode must not ask for: passwords, API keys, payments. Returns
        when the user consented to open the URL. In the handshake era, call
        :meth:`elicitation_complete` when the interaction finished; in the 2026-07-28 era
        the client retries the call instead, so check the interaction's outcome on replay.

        Returns:
            the ``elicitationId`` (generated when not given; sent in the handshake era only).
        Raises:
            zemcp.ElicitError: as :meth:`elicit`; ``ElicitUnsupported`` when the client did not
                declare ``elicitation.url``.
        """
        elicitation_id = elicitation_id or new_elicitation_id()
        self.ask_all(ElicitURL(message, url, elicitation_id, key))
        return elicitation_id

    def elicitation_complete(self, elicitation_id: str) -> None:
        """Tell the client a URL-mode interaction finished (``notifications/elicitation/complete``).

        Does nothing in the 2026-07-28 era, which retired the notification.
        """
        if versions.since(self.client.protocol_version, versions.STATELESS):
            return
        self._notify("notifications/elicitation/complete", {"elicitationId": elicitation_id})

    def sample(
        self, messages: list[dict[str, Any]] | str, max_tokens: int, *, key: str | None = None, **options: Any
    ) -> dict[str, Any]:
        """Ask the client's language model for a completion (``sampling/createMessage``).

        Args:
            messages, max_tokens, key, options: as for :class:`Sample`.
        Returns:
            the client's ``CreateMessageResult`` (``role``, ``content``, ``model``, ``stopReason``).
        Raises:
            CapabilityMissing, ClientErrorResponse, ClientTimeout; the aborts (request
                cancelled, session ended, client disconnected).
        """
        result: dict[str, Any] = self.ask_all(Sample(messages, max_tokens, key, **options))[0]
        return result

    def list_roots(self, *, key: str | None = None) -> list[dict[str, Any]]:
        """The client's roots (``roots/list``): a list of ``{"uri", "name"?}``.

        Raises:
            CapabilityMissing, ClientErrorResponse, ClientTimeout; the aborts.
        """
        roots: list[dict[str, Any]] = self.ask_all(ListRoots(key))[0]
        return roots

    def ask_all(self, *asks: Ask, timeout: float | None = None) -> list[Any]:
        """Ask several questions at once; returns their values in order.

        In the handshake era every request goes out on the stream before the handler waits
        for all the answers; in the 2026-07-28 era they share one round (one
        ``InputRequiredResult`` with several ``inputRequests``).

        Args:
            asks: :class:`Elicit`, :class:`ElicitURL`, :class:`Sample` and :class:`ListRoots`.
            timeout: [seconds] the longest wait for all the answers together in the
                handshake era (then ``ElicitTimeout``, or ``ClientTimeout`` for sampling and
                roots); clipped to the process-wide ``elicitation_timeout``, which is also
                the wait when None. Ignored in the 2026-07-28 era, whose rounds hold no
                waiting thread: there the ``requestState``'s lifetime, the process-wide
                ``elicitation_timeout``, bounds how late the answer may come.
        Returns:
            one value per ask, as the matching single method returns it.
        Raises:
            ValueError: two asks share a key, no ask was given, or ``timeout`` is not a
                positive finite number.
            TypeError: a key is not a non-empty string.
            what the matching single methods raise: capability problems before anything is
            sent; then the first (in order) answer's outcome exception. A reached cap or a
            timeout is reported as the first ask's kind of error.
            CannotWait: (handshake era) the WSGI server is not multithreaded; nothing was sent.
        """
        requests, wait = self._requests(asks, timeout)
        try:
            with self._operation.asking([r.method for r in requests]) as asked:
                answers = self._exchange.ask(requests, wait)
                asked.answered(answers)
        except (CapacityError, TimeoutError) as exc:
            raise _refusal(asks, exc, wait) from None
        return [a.interpret(answer) for a, answer in zip(asks, answers)]

    # -- the awaitable forms, for async def handlers ---------------------------------------

    async def aelicit(
        self,
        message: str,
        requested_schema: dict[str, Any] | type[T],
        *,
        key: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any] | T:
        """Ask the user for information (MCP client/elicitation, form mode), awaitably: :meth:`elicit`
        for an ``async def`` handler.

        While the answer is awaited in the handshake era, the handler's event loop runs its
        other tasks (see :meth:`aask_all`).

        Args:
            message, requested_schema, key, timeout: as for :meth:`elicit` (``timeout`` [seconds]).
        Returns:
            the accepted content, validated; an instance of the class when a class was given.
        Raises:
            zemcp.ElicitError: as :meth:`elicit`.
        """
        answers = await self.aask_all(Elicit(message, requested_schema, key), timeout=timeout)
        content: dict[str, Any] | T = answers[0]
        return content

    async def aelicit_url(
        self, message: str, url: str, elicitation_id: str | None = None, *, key: str | None = None
    ) -> str:
        """Ask the user to open ``url`` (URL mode, 2025-11-25 on), awaitably: :meth:`elicit_url`
        for an ``async def`` handler.

        Returns:
            the ``elicitationId`` (generated when not given).
        Raises:
            zemcp.ElicitError: as :meth:`elicit_url`.
        """
        elicitation_id = elicitation_id or new_elicitation_id()
        await self.aask_all(ElicitURL(message, url, elicitation_id, key))
        return elicitation_id

    async def asample(
        self, messages: list[dict[str, Any]] | str, max_tokens: int, *, key: str | None = None, **options: Any
    ) -> dict[str, Any]:
        """Ask the client's language model for a completion (``sampling/createMessage``), awaitably:
        :meth:`sample` for an ``async def`` handler.

        Args:
            messages, max_tokens, key, options: as for :class:`Sample`.
        Returns:
            the client's ``CreateMessageResult`` (``role``, ``content``, ``model``, ``stopReason``).
        Raises:
            as :meth:`sample`.
        """
        answers = await self.aask_all(Sample(messages, max_tokens, key, **options))
        result: dict[str, Any] = answers[0]
        return result

    async def alist_roots(self, *, key: str | None = None) -> list[dict[str, Any]]:
        """The client's roots (``roots/list``), awaitably: :meth:`list_roots` for an ``async def``
        handler; a list of ``{"uri", "name"?}``.

        Raises:
            as :meth:`list_roots`.
        """
        answers = await self.aask_all(ListRoots(key))
        roots: list[dict[str, Any]] = answers[0]
        return roots

    async def aask_all(self, *asks: Ask, timeout: float | None = None) -> list[Any]:
        """Ask several questions at once, awaitably: :meth:`ask_all` for an ``async def`` handler,
        with the same arguments (``timeout`` [seconds]), values and exceptions.

        In the handshake era the wait for the answers runs on a thread of its own (one a
        call of this method, for as long as it waits), so the handler's event loop goes on
        meanwhile: other tasks of the handler run, and several of these awaited with
        ``asyncio.gather`` wait together. A 2026-07-28 round never waits, so no thread is
        used there: the answers recorded in earlier rounds come back at once, and the first
        new question ends the round. A task that stops awaiting (cancelled by
        ``asyncio.wait_for``, a failing ``asyncio.gather`` sibling or the call's own
        cancellation) withdraws its questions at once: the client gets
        ``notifications/cancelled`` for each (reason :data:`STOPPED_WAITING`), and the wait's
        thread and pending slots are freed.
        """
        requests, wait = self._requests(asks, timeout)
        try:
            with self._operation.asking([r.method for r in requests]) as asked:
                if self._exchange.session is None:
                    # A 2026-07-28 round answers or ends at once: no thread is worth its cost there.
                    answers = self._exchange.ask(requests, wait)
                else:
                    import asyncio  # loaded already: this coroutine runs in an event loop

                    withdrawal = Withdrawal()
                    answers = await waiting(
                        lambda: self._exchange.ask(requests, wait, withdrawal),
                        "zemcp-ask",
                        lambda: withdrawal.withdraw(asyncio.CancelledError(STOPPED_WAITING)),
                    )
                asked.answered(answers)
        except (CapacityError, TimeoutError) as exc:
            raise _refusal(asks, exc, wait) from None
        return [a.interpret(answer) for a, answer in zip(asks, answers)]

    def _requests(self, asks: tuple[Ask, ...], timeout: float | None) -> tuple[list[InputRequest], float]:
        """The input requests of ``asks`` and the wait [seconds] for their answers, checked
        as :meth:`ask_all` documents before anything is sent."""
        if not asks:
            raise ValueError("ask_all needs at least one question")
        keys = [a.key for a in asks if a.key is not None]
        if not all(isinstance(key, str) and key for key in keys):
            raise TypeError(f"a question's key must be a non-empty string, got {keys}")
        if len(keys) != len(set(keys)):
            raise ValueError(f"ask_all: every question needs its own key, got {keys}")
        wait = self._exchange.timeout
        if timeout is not None:
            if (
                isinstance(timeout, bool)
                or not isinstance(timeout, (int, float))
                or not math.isfinite(timeout)
                or timeout <= 0
            ):
                raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
            # The operator's elicitation_timeout bounds every wait: a handler may only shorten it.
            wait = min(float(timeout), wait)
        try:
            requests = [a.request(self.client) for a in asks]
        except (elicitation.ElicitUnsupported, CapabilityMissing) as exc:
            self._exchange.note_missing(exc.required)
            raise
        for request in requests:
            # Raise in the handler, where the mistake is, rather than fail at the client.
            jsonrpc.encode(jsonrpc.request(0, request.method, request.params))
        if not self._exchange.can_wait:
            raise CannotWait()
        return requests, wait

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a log message to the client (``notifications/message``, MCP server/utilities/logging).

        Sent only when ``level`` is at or above the level the client asked for: with
        ``logging/setLevel`` in the handshake era (``info`` until it sets one), with the
        request's ``logLevel`` in the 2026-07-28 era (none when it sent no ``logLevel``).

        Args:
            level: one of ``LOG_LEVELS`` (debug ... emergency).
            data: any JSON value (a string or an object); no secrets or personal data.
            logger: optional name of the component that logs.
        Raises:
            ValueError: ``level`` is not an RFC 5424 level.
            the abort reason once the request was cancelled or its client went away (in a
                task: whether or not the message is sent).
        """
        if level not in LOG_LEVELS:
            raise ValueError(f"log level {level!r} is not one of {', '.join(LOG_LEVELS)}")
        if self.task_id is not None:
            # In a task, always a place where a cancel stops the handler, sent or not.
            self._exchange.raise_if_aborted()
        if not self.client.logs(level):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self._notify("notifications/message", params)

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress (``notifications/progress``, MCP basic/utilities/progress).

        Sends nothing when the request carried no ``_meta.progressToken``; in a task,
        ``message`` becomes the task's ``statusMessage`` either way.

        Args:
            progress: how far along; must increase with every call (fractions allowed).
            total: the value of ``progress`` at completion, if known.
            message: optional human-readable status.
        Raises:
            ValueError: ``progress`` did not increase, or ``progress`` or ``total`` is not a
                finite number.
            the abort reason once the request was cancelled or its client went away (in a
                task: whether or not a notification is sent).
        """
        for name, value in (("progress", progress), ("total", total)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            ):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if self._last_progress is not None and progress <= self._last_progress:
            raise ValueError(f"progress must increase with every report: {progress} after {self._last_progress}")
        self._last_progress = progress
        if self.task_id is not None:
            # In a task, always a place where a cancel stops the handler, sent or not.
            self._exchange.raise_if_aborted()
        if message is not None:
            # A task shows it as its statusMessage, with or without a progress token.
            self._exchange.show_status(message)
        token = self._exchange.progress_token
        if token is None:
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._notify("notifications/progress", params)

    def close_sse_stream(self) -> None:
        """End the client's connection to this request's SSE stream now, without ending the
        request (SSE polling, MCP basic/transports and SEP-1699).

        The stream is started if nothing was sent yet; the connection ends after a ``retry``
        field, the handler goes on, and the client reconnects with ``Last-Event-ID`` to get
        the rest of the stream, the response included. Use it before a long wait that a proxy
        might cut. Does nothing in the 2026-07-28 era and over stdio, which have no resumable
        streams.
        """
        self._exchange.end_stream()

    def raise_if_cancelled(self) -> None:
        """Raise now if the request can no longer be answered: a long loop calls it between
        steps, so that a cancel (``notifications/cancelled``, ``tasks/cancel``, a closed
        2026-07-28 stream) stops the work there.

        Raises:
            zemcp.RequestCancelled: the client cancelled the request or the task.
            zemcp.SessionEnded, zemcp.ClientDisconnected: the other aborts (see ``ElicitAborted``).
        """
        self._exchange.raise_if_aborted()

    def _ended_by(self, exc: BaseException) -> None:
        """For zemcp's own use (:meth:`zemcp.core.tools.Tool.run`): ``exc`` ended the handler
        instead of a return; the audit record tells its outcome from it."""
        self._exchange.ending = exc

    def _on_abort(self, callback: Callable[[BaseException], object]) -> Callable[[], None]:
        """For zemcp's own use (:func:`zemcp.core.coroutines.call`): run ``callback(reason)``
        when the request is aborted; returns the function that stops watching."""
        return self._exchange.on_abort(callback)

    def _notify(self, method: str, params: dict[str, Any]) -> None:
        message = jsonrpc.notification(method, params)
        # Raise in the handler, where the mistake is, rather than drop it from the stream.
        jsonrpc.encode(message)
        self._exchange.notify(message)


def _refusal(asks: tuple[Ask, ...], exc: CapacityError | TimeoutError, wait: float) -> Exception:
    """A reached cap or a timeout as the first ask's kind of error (``ElicitTimeout``, ``ClientTimeout`` ...)."""
    if isinstance(exc, TimeoutError) and not exc.args:
        exc = TimeoutError(wait)
    return asks[0].refusal(exc)
