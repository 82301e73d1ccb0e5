"""Which worker process created a session id, and whether that worker is a live sibling of this one.

A session id is ``<instance>.<worker>.<random>``: the worker tag is the creating process's
pid in base 36 (at most 5 characters for Linux pids, so the longest id still fits the
80-character stick table of deploy/haproxy.cfg). The workers of one gunicorn share its
instance name, so the tag is what tells the worker that created a session from the one a
request of it reached: a live sibling worker (the session is alive, in the other process)
or a process that has stopped (its sessions ended with it).
"""

from __future__ import annotations

import os
import re

_TAG = re.compile(r"^[0-9a-z]{1,7}$")
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def tag(pid: int | None = None) -> str:
    """The worker tag of ``pid`` (this process when omitted): the pid in base 36, lowercase."""
    n = os.getpid() if pid is None else pid
    digits = ""
    while True:
        n, digit = divmod(n, 36)
        digits = _DIGITS[digit] + digits
        if n == 0:
            return digits


def creator(session_id: str) -> int | None:
    """The pid named by the worker tag of ``session_id`` (``<instance>.<worker>.<random>``).

    Returns:
        the pid, or None when the id has no worker tag (another shape, a tag that is no base-36
        pid).
    """
    parts = session_id.split(".")
    if len(parts) != 3 or not _TAG.match(parts[1]):
        return None
    return int(parts[1], 36)


def is_sibling(pid: int) -> bool:
    """True when ``pid`` is another live process forked by this process's parent that runs the
    same program: another worker of this gunicorn.

    On Linux this reads ``/proc/<pid>/stat`` (parent, state, command name); elsewhere, where
    there is no ``/proc``, it is a best effort: a live process of this user with that pid
    counts as a sibling.
    """
    if pid <= 0 or pid == os.getpid():
        return False
    mine = _stat("self")
    if mine is not None:
        theirs = _stat(str(pid))
        # The command name guards against a pid that an unrelated child of the same parent
        # reused (under pid 1, every orphan is such a child); a zombie has stopped already.
        return theirs is not None and theirs[0] == os.getppid() and theirs[1] != "Z" and theirs[2] == mine[2]
    if os.name != "posix":
        # Signal 0 would not test for life on Windows, and gunicorn does not run there.
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        # Gone (ProcessLookupError), or another user's process (PermissionError), which a
        # sibling worker is not.
        return False
    return True


def _stat(pid: str) -> tuple[int, str, str] | None:
    """``(parent pid, state, command name)`` of ``/proc/<pid>/stat``; None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": the command name may hold spaces and parentheses.
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    if len(fields) < 2 or not fields[1].isdigit():
        return None
    return int(fields[1]), fields[0], head.partition("(")[2]
