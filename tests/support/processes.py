"""Stopping what a test started: a process and every process it spawned."""

from __future__ import annotations

import os
import signal
import subprocess


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to the process group of ``proc`` (started with ``start_new_session=True``)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def stop_group(proc: subprocess.Popen, grace: float) -> None:
    """Stop ``proc`` and everything it spawned.

    SIGTERM to the group, up to ``grace`` seconds for the leader to exit, then SIGKILL to
    whatever is left of the group, also when the leader is already gone.
    """
    if proc.poll() is None:
        signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    signal_group(proc, signal.SIGKILL)
    proc.wait()
