"""The loopback network of the tests: the host, the timeouts, free ports and HTTP sessions."""

from __future__ import annotations

import socket
from typing import Any

import requests
import requests.adapters

#: Every server of the tests listens here, and every request goes here.
HOST = "127.0.0.1"
#: [seconds] connect timeout of every request.
CONNECT_TIMEOUT = 5.0
#: [seconds] read timeout of every plain request and default read timeout of streams.
READ_TIMEOUT = 10.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read, release)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class SourceAddress(requests.adapters.HTTPAdapter):
    """Connects from ``address`` (another loopback address, such as 127.0.0.2), so that the
    server sees a client of its own: Linux routes all of 127.0.0.0/8 to the loopback."""

    def __init__(self, address: str):
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def http_session(source: str | None = None) -> requests.Session:
    """A ``requests.Session``, connecting from the loopback address ``source`` when given."""
    http = requests.Session()
    if source is not None:
        http.mount("http://", SourceAddress(source))
    return http
