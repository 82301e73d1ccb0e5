"""The event-stream bodies (zemcp/replies/streams.py) without HTTP: finding a client that went away."""

import os
import socket
import time

import pytest

from zemcp.replies.streams import GONE, OPEN, PROBE, PeerWatch


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


@pytest.fixture
def tcp_pair():
    """Both ends of a TCP connection on 127.0.0.1: (the server's, the client's)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        theirs = socket.create_connection(listener.getsockname())
        ours, _ = listener.accept()
    yield ours, theirs
    ours.close()
    theirs.close()


def _look_after_probe(peer: PeerWatch, ours: socket.socket) -> str:
    assert peer.look() == PROBE
    ours.sendall(b": keep-alive\n\n")
    peer.wrote()
    time.sleep(0.05)  # the client's stack answers the probe
    return peer.look()


def test_a_live_peer_is_open_and_a_closed_one_gone_above_fd_1024(high_fd_pair):
    """A live peer is not mistaken for a closed one, even on a high descriptor; a closed one is
    seen (a Unix socket reports the hang-up itself, with no probe)."""
    ours, theirs = high_fd_pair
    assert ours.fileno() >= 1024
    peer = PeerWatch(ours)
    assert peer.look() == OPEN
    theirs.sendall(b"x")
    assert peer.look() == OPEN, "pending bytes are not a close"
    theirs.close()
    ours.recv(1)
    assert peer.look() == GONE
    ours.close()


def test_a_half_closed_client_stays_open_after_the_probe(tcp_pair):
    """shutdown(SHUT_WR) reads as an end of stream; the probe goes through, so the client is still there."""
    ours, theirs = tcp_pair
    peer = PeerWatch(ours)
    theirs.shutdown(socket.SHUT_WR)
    time.sleep(0.05)
    assert _look_after_probe(peer, ours) == OPEN
    assert peer.look() == OPEN, "a half-close asks for one probe only"
    assert theirs.recv(64) == b": keep-alive\n\n"


def test_a_closed_client_is_gone_once_the_probe_was_refused(tcp_pair):
    """close() reads the same as a half-close until the probe is answered with a reset."""
    ours, theirs = tcp_pair
    peer = PeerWatch(ours)
    theirs.close()
    time.sleep(0.05)
    assert _look_after_probe(peer, ours) == GONE
