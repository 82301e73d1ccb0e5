"""How a ``zemcp run`` process meets the program that started it.

A desktop client starts its servers as subprocesses with pipes on stdin and stdout; such a
server should stop when the client does, even when the client was killed and could not say
so (basic/transports/stdio leaves the shutdown to the client, which a crash skips). An HTTP
server started that way was most likely meant for the stdio transport, and one whose port is
taken should say which option moves it.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import threading
import time
from collections.abc import Callable

#: [seconds] how often the parent watcher looks at the parent process id.
PARENT_POLL = 1.0


def stdin_is_pipe() -> bool:
    """True when descriptor 0 is a pipe or a socket, as when another program started this one
    to talk to it (Node-based clients hand their children socket pairs, not pipes); False for a
    terminal, a file, ``/dev/null`` or a closed descriptor."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def watch_parent(on_exit: Callable[[int], None], interval: float = PARENT_POLL) -> threading.Thread:
    """Call ``on_exit(parent_pid)`` once, from a daemon thread, when the parent process is gone.

    A process whose parent exits is given another one (init, or a subreaper), so the parent
    is gone when ``os.getppid()`` no longer returns the value it had when the watch started
    (gunicorn's workers watch their master the same way).

    Args:
        on_exit: what stops this process cleanly (and says why), given the pid the parent
            had; called on the watcher thread.
        interval: [seconds] the time between two looks.
    Returns:
        the started watcher thread.
    """
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        on_exit(parent)

    thread = threading.Thread(target=watch, name="zemcp-parent-watch", daemon=True)
    thread.start()
    return thread


def bind_in_use(address: tuple[str, int]) -> bool:
    """True when another socket listens on the TCP ``(host, port)`` already.

    The probe binds as gunicorn does (IPv6 for an IPv6 literal, else IPv4, with
    ``SO_REUSEADDR``, so a port that only holds connections in TIME_WAIT counts as free).
    Any other failure (an unknown host, a port below 1024) is left to gunicorn to report.
    """
    host, port = address
    family = socket.AF_INET6 if _is_ipv6(host) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
        except (UnicodeError, OverflowError):  # a host IDNA cannot encode, a port over 65535
            return False
    return False


def _is_ipv6(host: str) -> bool:
    try:
        socket.inet_pton(socket.AF_INET6, host)
    except (OSError, ValueError):
        return False
    return True
