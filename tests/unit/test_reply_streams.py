"""The event-stream bodies (zemcp/replies/streams.py) without HTTP: finding a client that went away."""

import os
import socket

import pytest

from zemcp.replies.streams import peer_closed


@pytest.fixture
def high_fd_pair():
    """A connected socket pair whose first end sits above descriptor 1024 (select() cannot watch it)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(2048, hard), hard))
    a, b = socket.socketpair()
    high = os.dup2(a.fileno(), 1100)
    a.close()
    yield socket.socket(fileno=high), b
    b.close()


def test_peer_closed_sees_a_live_and_a_closed_peer_above_fd_1024(high_fd_pair):
    """A live peer is not mistaken for a closed one, even on a high descriptor; a closed one is seen."""
    ours, theirs = high_fd_pair
    assert ours.fileno() >= 1024
    assert peer_closed(ours) is False
    theirs.sendall(b"x")
    assert peer_closed(ours) is False, "pending bytes are not a close"
    theirs.close()
    ours.recv(1)
    assert peer_closed(ours) is True
    ours.close()
