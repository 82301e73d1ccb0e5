"""Running a Click command in-process with its output captured: :func:`invoke`.

What a command writes to ``sys.stdout`` and ``sys.stderr`` (``click.echo``, ``print``) is the
call's output. Tools run on several threads at once, and ``click.testing.CliRunner`` swaps
the process's streams (two concurrent calls get each other's output), so the streams are
replaced instead, while any call runs, by proxies that send each write to the buffer of the
call running on the writing thread, and everything else to the stream they replaced. Output
of threads that a command starts itself is not captured: it goes to the process's streams.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import click


@dataclass(frozen=True)
class ClickResult:
    """The outcome of one in-process run of a Click command.

    Attributes:
        output: what the run wrote to stdout and stderr, interleaved in the order written.
        exit_code: 0 on success; Click's code of a refused command line (2 for a usage
            error, 1 for other ``ClickException`` and ``Abort``); the code of
            ``ctx.exit(code)``, ``click.exceptions.Exit`` or ``SystemExit``.
        failure: None on success, else one line saying why, with the exit code:
            ``Missing option '--name'. (exit code 2)``, ``Aborted! (exit code 1)``,
            ``exit code 3``.
    """

    output: str
    exit_code: int
    failure: str | None

    def error_text(self) -> str:
        """The failure line, then the output when there is any (the text of an error result)."""
        output = self.output.rstrip("\n")
        return f"{self.failure}\n{output}" if output else str(self.failure)


def invoke(root: click.Command, argv: Sequence[str], *, prog_name: str | None = None) -> ClickResult:
    """Run ``root`` with the command line ``argv`` in this thread, capturing its output.

    Safe to call from several threads at once: each call gets its own output and an empty
    stdin (a prompt sees end of input, which Click turns into ``Abort``).

    Args:
        root: the command or group, as the console script would run it.
        argv: the arguments after the program name, e.g. ``["db", "migrate", "--dry-run"]``.
        prog_name: the program name in usage and help texts; ``root.name`` when omitted.
    Returns:
        the output, exit code and failure (see :class:`ClickResult`).
    Raises:
        Exception: whatever the command's callback raises other than Click's exceptions,
            ``EOFError`` and ``SystemExit``, unchanged (a tool call turns it into an
            ``isError`` result and logs the traceback).
    """
    with _captured() as capture:
        code, failure = 0, None
        try:
            # As Command.main does, but catching Exit itself: main(standalone_mode=False)
            # returns an exit code and a callback's return value alike.
            with root.make_context(prog_name or root.name or "cli", list(argv)) as ctx:
                root.invoke(ctx)
        except click.exceptions.Exit as exc:
            code = exc.exit_code
        except click.ClickException as exc:
            code, failure = exc.exit_code, f"{exc.format_message()} (exit code {exc.exit_code})"
        except (click.Abort, EOFError):
            code, failure = 1, "Aborted! (exit code 1)"
        except SystemExit as exc:
            # sys.exit("message") is exit code 1 with that message, as for Python itself.
            if isinstance(exc.code, str):
                code, failure = 1, f"{exc.code} (exit code 1)"
            else:
                code = exc.code or 0
        if code and failure is None:
            failure = f"exit code {code}"
        return ClickResult(capture.text(), code, failure)


class _CaptureText(io.TextIOBase):
    """One side (stdout or stderr) of a call's output, appended to the call's chunks."""

    # Constant, so that Click takes it as a proper text stream and does not re-wrap it.
    encoding = "utf-8"
    errors = "replace"

    def __init__(self, chunks: list[str], name: str):
        self._chunks = chunks
        self.name = name
        self.buffer = _CaptureBytes(chunks)

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        # Refusing bytes is how click.echo tells a text stream from a binary one.
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._chunks.append(text)
        return len(text)


class _CaptureBytes(io.RawIOBase):
    """The ``buffer`` of a :class:`_CaptureText`, for ``click.echo(b"...")``."""

    def __init__(self, chunks: list[str]):
        self._chunks = chunks

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        data = bytes(data)
        self._chunks.append(data.decode("utf-8", "replace"))
        return len(data)


class _Capture:
    """The streams of one call: its stdout and stderr (one ordered record) and an empty stdin."""

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self.stdout = _CaptureText(self._chunks, "<stdout>")
        self.stderr = _CaptureText(self._chunks, "<stderr>")
        self.stdin = io.StringIO()

    def text(self) -> str:
        return "".join(self._chunks)


# The capture of the call running in this thread (a ContextVar is per thread, and per task).
_CURRENT: contextvars.ContextVar[_Capture | None] = contextvars.ContextVar("zemcp_click_capture", default=None)


class _Routed:
    """Stands in for ``sys.stdout``, ``sys.stderr`` or ``sys.stdin`` while calls run: the
    current thread's capture if it has one, else the stream it replaced."""

    # Click caches its view of sys.stdout per stream object and decides once whether to
    # re-wrap it, so these must not depend on the thread that asks first.
    encoding = "utf-8"
    errors = "replace"

    def __init__(self, replaced: Any, side: str):
        self._replaced = replaced
        self._side = side

    def _stream(self) -> Any:
        capture = _CURRENT.get()
        return self._replaced if capture is None else getattr(capture, self._side)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream(), name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._stream())


_SIDES = ("stdout", "stderr", "stdin")
_routing_lock = threading.Lock()
_routing_users = 0
_routing: dict[str, _Routed] = {}


@contextlib.contextmanager
def _captured() -> Iterator[_Capture]:
    """Route this thread's standard streams to a new capture for the duration of the block."""
    global _routing_users
    capture = _Capture()
    with _routing_lock:
        if _routing_users == 0:
            for side in _SIDES:
                _routing[side] = _Routed(getattr(sys, side), side)
                setattr(sys, side, _routing[side])
        _routing_users += 1
    token = _CURRENT.set(capture)
    try:
        yield capture
    finally:
        _CURRENT.reset(token)
        with _routing_lock:
            _routing_users -= 1
            if _routing_users == 0:
                for side in _SIDES:
                    # Someone who replaced the stream meanwhile keeps it.
                    if getattr(sys, side) is _routing[side]:
                        setattr(sys, side, _routing[side]._replaced)
                _routing.clear()
