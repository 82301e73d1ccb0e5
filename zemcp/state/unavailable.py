"""The failure every shared-state seam can meet: the service that keeps the state is out of reach.

Any seam of a backend that keeps its state in a service (Redis) raises
:class:`StateUnavailable` when the service does not answer; the transport answers it with
HTTP 503 and ``Retry-After``. The in-process backend never raises it.
"""

from __future__ import annotations


class StateUnavailable(Exception):
    """The service that keeps the shared state (Redis) cannot be reached or did not answer in
    time; the message says which and what to check (HTTP 503 with ``Retry-After``).

    Attributes:
        retry_after: [seconds] when to try again.
    """

    def __init__(self, message: str, retry_after: int = 2):
        super().__init__(message)
        self.retry_after = retry_after
