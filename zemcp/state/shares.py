"""Fair shares: how much of one budget of threads a single client may hold.

Every kind of request that holds a thread (a running call, a pending elicitation, a listen
stream, a standalone or resumed GET stream) is bounded per process; without a bound per
client, one client with a handful of sessions could take a whole budget and leave every other
client 503s. So each budget is also shared out: one client holds at most
``Settings.client_share`` of it (at least one place), and the rest stays for the others. A
client is the user (the token's issuer and subject) when authorization is on, else the client
address (:mod:`zemcp.http.forwarded`); a stdio server has one client and no shares.
"""

from __future__ import annotations

import math
from collections import Counter

#: [seconds] ``Retry-After`` of a request refused because its client holds its share.
SHARE_RETRY_AFTER = 2


def share_of(budget: int, share: float) -> int:
    """The places of ``budget`` one client may hold: ``floor(budget * share)``, at least 1.

    Args:
        budget: places the process has (threads for running calls, pending elicitations, ...).
        share: ``Settings.client_share``, above 0 and at most 1.
    """
    return max(1, math.floor(budget * share + 1e-9))


class ShareTaken(Exception):
    """The client of a request holds its fair share of a budget (HTTP 429 with ``Retry-After``).

    Attributes:
        retry_after: [seconds] when to try again.
    """

    status = 429
    #: The reason it is counted under (the refusals metric of zemcp.observe).
    reason = "share"

    def __init__(self, client: str, held: int, budget: int, what: str):
        super().__init__(
            f"Too Many Requests: this client ({client}) already holds {held} of this process's {budget} {what}, "
            f"its fair share (ZEMCP_CLIENT_SHARE); let some finish or cancel them, and retry in "
            f"{SHARE_RETRY_AFTER} s"
        )
        self.retry_after = SHARE_RETRY_AFTER


class Shares:
    """Places of one budget held per client. Not locked: callers hold the lock that guards the budget.

    Args:
        budget: the budget's places in the process.
        share: ``Settings.client_share``.
        what: what a place is, for messages (``"threads for running calls and streams"``).
    """

    def __init__(self, budget: int, share: float, what: str):
        self.budget = budget
        self.cap = share_of(budget, share)
        self.what = what
        self._held: Counter[str] = Counter()

    def check(self, client: str | None) -> None:
        """Raise :class:`ShareTaken` if ``client`` holds its share already (None: no client, no share).

        The client name in the message is the request's own (its address or principal), so it
        tells the client nothing about others.
        """
        if client is not None and self.full(client):
            raise ShareTaken(client_label(client), self._held[client], self.budget, self.what)

    def full(self, client: str | None) -> bool:
        """True when ``client`` holds its whole share (never for None, nor when the share is
        the whole budget, which leaves nothing to share out)."""
        return client is not None and self.cap < self.budget and self._held[client] >= self.cap

    def take(self, client: str | None) -> None:
        """Count a place for ``client`` (call :meth:`check` first, under the same lock)."""
        if client is not None:
            self._held[client] += 1

    def give(self, client: str | None) -> None:
        """Give back a place of ``client`` taken with :meth:`take`."""
        if client is None:
            return
        self._held[client] -= 1
        if self._held[client] <= 0:
            del self._held[client]

    def held(self, client: str) -> int:
        """Places ``client`` holds now."""
        return self._held[client]

    def clients(self) -> int:
        """Clients holding at least one place."""
        return len(self._held)


def client_key(principal_key: str | None, address: str) -> str:
    """The key a request's shares are counted under: its principal, else its client address.

    Args:
        principal_key: ``Principal.user`` (issuer and subject) with authorization on, else None.
        address: the client address (:class:`zemcp.http.forwarded.ClientAddresses`).
    """
    if principal_key is not None:
        return f"principal {principal_key}"
    return f"address {address or 'unknown'}"


def client_label(key: str) -> str:
    """``key`` as a message shows it (a principal's key is clipped: it may be long)."""
    return key if len(key) <= 80 else key[:77] + "..."
