"""The exchange of a handler that runs as a task: how it asks the user, in either era.

MCP 2025-11-25 basic/utilities/tasks, "Input Required", and the 2026-07-28 tasks extension:

- 2025-11-25 (a session): the task goes ``input_required`` and each question goes out as a
  server-to-client request carrying the related-task ``_meta``, on the streams of the open
  ``tasks/result`` requests, in any process (:class:`TaskOutlet`: kept in the task's record
  until the question is over); the client POSTs the answer as for any request of its
  session, and the handler's thread waits in the table of waiting calls;
- 2026-07-28: the task goes ``input_required`` and its questions are the ``inputRequests``
  of ``tasks/get``; ``tasks/update`` hands in the answers, and the handler's thread waits on
  the task's record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zemcp.core.exchange import Abortable
from zemcp.protocol import jsonrpc
from zemcp.protocol.elicitation import RequestCancelled
from zemcp.protocol.inputs import fallback_key
from zemcp.protocol.tasks import INPUT_REQUIRED, RELATED_TASK, WORKING, related

if TYPE_CHECKING:
    from zemcp.protocol.capabilities import ClientView
    from zemcp.protocol.inputs import InputRequest
    from zemcp.state.session import Session
    from zemcp.state.tasks import TaskRecord
    from zemcp.state.waitingcalls import Withdrawal

#: [seconds] how often a task waiting for answers looks at its record, and for an abort.
WAIT_STEP = 0.25
#: Server-to-client requests of one task that wait for an open ``tasks/result`` stream, at most.
MAX_QUEUED = 64


class TaskOutlet:
    """Where a 2025-11-25 task's messages go, as the table of waiting calls sees its ``sink``.

    A server-to-client request (the question being asked) goes into the task's record
    (``outbox``), which every ``tasks/result`` stream of the task sends, in whichever process
    it is open, also one opened later (a client that lost its stream calls ``tasks/result``
    again and still sees the question); :meth:`settled` clears it when the question is over.
    Notifications reach the streams of this process open at the time.

    Args:
        store: the task store.
        task_id: the task.
    """

    #: [seconds] how often the waiting handler calls :meth:`tick` (nothing to do: each stream's own request ticks it).
    tick_interval = 1.0

    def __init__(self, store: Any, task_id: str) -> None:
        self._store = store
        self._task_id = task_id
        self._lock = threading.Lock()
        self._streams: list[Any] = []

    def send(self, message: dict[str, Any]) -> bool:
        """Put a request in the task's outbox; send a notification on the attached streams."""
        if "id" in message and "method" in message:

            def post(record: TaskRecord) -> bool:
                if record.terminal or len(record.outbox) >= MAX_QUEUED:
                    return False
                record.outbox.append(message)
                return True

            self._store.update(self._task_id, post)
            return True
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            stream.send(message)
        return True

    def tick(self) -> None:
        """Nothing to do: each stream is watched by its own request."""

    def settled(self) -> None:
        """The question is over (answered or given up): no stream sends its requests any more."""
        self._store.update(self._task_id, _empty_outbox)

    def attach(self, stream: Any) -> Callable[[], None]:
        """Send the task's notifications on ``stream`` from now on; returns the function that detaches it."""
        with self._lock:
            self._streams.append(stream)

        def detach() -> None:
            with self._lock:
                if stream in self._streams:
                    self._streams.remove(stream)

        return detach


class TaskExchange(Abortable):
    """The :class:`zemcp.core.exchange.Exchange` of a handler that runs as a task.

    Args:
        runner: the :class:`zemcp.core.tasks.TaskRunner` (its ``store``, ``table`` and ``write``).
        task_id: the task.
        client: what the creating request declared (a session in the handshake era).
        session: the handshake-era session, None in 2026-07-28.
        request_id: the id of the ``tools/call`` that created the task.
        progress_token: its ``_meta.progressToken`` (valid for the task's whole life, 2025-11-25), or None.
        timeout: [seconds] the longest wait for the answers to one question.
        client_key: whose fair shares its pending requests count in (handshake era), or None.
        ttl_end: [seconds since the epoch] when the task's ttl ends (None: it has none).
    """

    can_wait = True

    def __init__(
        self,
        runner: Any,
        task_id: str,
        client: ClientView,
        session: Session | None,
        request_id: jsonrpc.RequestId,
        progress_token: jsonrpc.RequestId | None,
        timeout: float,
        client_key: str | None = None,
        ttl_end: float | None = None,
    ):
        super().__init__()
        self._runner = runner
        self.task_id = task_id
        self.client = client
        self.session = session
        self.request_id = request_id
        # 2026-07-28 sends no progress or log notifications for tasks: only the status message shows it.
        self.progress_token = progress_token
        self.timeout = timeout
        self.client_key = client_key
        self.ttl_end = ttl_end
        self.sink = TaskOutlet(runner.store, task_id)

    def ask(
        self, requests: list[InputRequest], timeout: float | None = None, withdrawal: Withdrawal | None = None
    ) -> list[jsonrpc.Response]:
        """The client's answers to ``requests``, in order; the task is ``input_required`` meanwhile.

        Raises:
            zemcp.state.waitingcalls.CapacityError: (handshake) a pending cap is reached; nothing was sent.
            TimeoutError: not every answer arrived within ``timeout`` (at most :attr:`timeout`).
            zemcp.ElicitAborted: the task was cancelled, or the process is stopping.
        """
        self.raise_if_aborted()
        wait = self.timeout if timeout is None else min(timeout, self.timeout)
        if self.session is None:
            return self._ask_by_update(requests, wait)
        return self._ask_on_stream(requests, wait, withdrawal)

    def _ask_on_stream(
        self, requests: list[InputRequest], wait: float, withdrawal: Withdrawal | None
    ) -> list[jsonrpc.Response]:
        store = self._runner.store
        store.update(self.task_id, _to(INPUT_REQUIRED))
        try:
            asked = [
                (r.method, {**r.params, "_meta": {**r.params.get("_meta", {}), **related(self.task_id)}})
                for r in requests
            ]
            answers: list[jsonrpc.Response] = self._runner.table.ask_all(self, asked, wait, withdrawal)
            return answers
        finally:
            self.sink.settled()
            store.update(self.task_id, _back_to_work)

    def _ask_by_update(self, requests: list[InputRequest], wait: float) -> list[jsonrpc.Response]:
        store = self._runner.store
        keys: list[str] = []

        def register(record: TaskRecord) -> bool:
            # Called again when a shared store retries the change: start afresh each time.
            keys.clear()
            if record.terminal:
                return False
            for request in requests:
                base = request.key or fallback_key(request.method, len(record.keys) + 1)
                key, n = base, 2
                # Keys are never reused in a task's life (the extension's rule).
                while key in record.keys:
                    key, n = f"{base}-{n}", n + 1
                record.keys.append(key)
                keys.append(key)
                record.inputs[key] = {"method": request.method, "params": request.params}
            record.status = INPUT_REQUIRED
            return True

        record = store.update(self.task_id, register)
        deadline = time.monotonic() + wait
        taken = False
        try:
            while True:
                self.raise_if_aborted()
                if record is None or record.terminal:
                    raise RequestCancelled("the task ended while it waited for answers")
                if all(key in record.answers for key in keys):
                    answers = [jsonrpc.Response(key, record.answers[key], None) for key in keys]
                    taken = True
                    return answers
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(wait)
                record = store.wait(self.task_id, record.version, min(WAIT_STEP, remaining))
        finally:

            def forget(record: TaskRecord) -> bool:
                held = [key for key in keys if key in record.inputs or key in record.answers]
                for key in held:
                    record.inputs.pop(key, None)
                    record.answers.pop(key, None)
                back = not taken and record.status == INPUT_REQUIRED and not record.inputs
                if back:
                    record.status = WORKING
                return bool(held) or back

            store.update(self.task_id, forget)

    def notify(self, message: dict[str, Any]) -> None:
        """Send a notification of the task (2025-11-25: on its open ``tasks/result`` streams,
        with the related-task ``_meta``; 2026-07-28 sends none).

        Raises:
            zemcp.ElicitAborted: the task was cancelled, or the process is stopping.
        """
        self.raise_if_aborted()
        if self.session is not None:
            params = message.get("params", {})
            meta = {**params.get("_meta", {}), RELATED_TASK: {"taskId": self.task_id}}
            self.sink.send({**message, "params": {**params, "_meta": meta}})

    def show_status(self, message: str) -> None:
        """Make ``message`` the task's ``statusMessage`` (``tasks/get`` shows it); while the
        store does not answer, the latest one is kept and written when it answers again."""
        self._runner.write(self, "status", lambda r: _note(r, message))

    def end_stream(self) -> None:
        """Nothing to do: a task has no stream of its own."""

    def note_missing(self, required: dict[str, Any]) -> None:
        """Nothing to do: the handler gets ``CapabilityMissing`` or ``ElicitUnsupported`` and decides."""


def _empty_outbox(record: TaskRecord) -> bool:
    if not record.outbox:
        return False
    record.outbox.clear()
    return True


def _to(status: str) -> Callable[[TaskRecord], bool]:
    def change(record: TaskRecord) -> bool:
        if record.terminal or record.status == status:
            return False
        record.status = status
        return True

    return change


def _back_to_work(record: TaskRecord) -> bool:
    return _to(WORKING)(record) if record.status == INPUT_REQUIRED else False


def _note(record: TaskRecord, text: str) -> bool:
    if record.terminal or record.message == text:
        return False
    record.message = text
    return True
