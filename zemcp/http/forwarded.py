"""Who a request comes from: the client address, through the proxies the settings trust.

A request's fair share of the threads (:mod:`zemcp.state.shares`) belongs to its client: the
principal with authorization on, else the client's address. Behind a reverse proxy every
connection comes from the proxy, so the address is read from ``X-Forwarded-For`` (the de facto
standard header, which HAProxy's ``option forwardfor`` and nginx's
``$proxy_add_x_forwarded_for`` write) when, and only when, the connection comes from a proxy
``Settings.forwarded_allow_ips`` lists, as gunicorn's setting of the same name does for the
scheme. The header is read from the right: each trusted proxy appends the address it saw, and
the first address from the right that is not a trusted proxy is the client (anything to its
left was written by the client and is not believed). An entry that is not an IP address ends
the walk: it was written by whoever the hop to its right names, which is then the client.
``*`` trusts the peer, whatever its address, for one hop: the client is the last address the
header names, so that a client behind it cannot claim another by writing the header itself.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Collection, Mapping
from typing import Any

log = logging.getLogger("zemcp.http")

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def trusted_networks(entries: Collection[str]) -> tuple[IPNetwork, ...] | None:
    """Parse ``Settings.forwarded_allow_ips``: addresses and CIDR networks, or ``*`` for any peer.

    Args:
        entries: strings such as ``"127.0.0.1"``, ``"10.0.0.0/8"``, ``"::1"``, ``"*"``.
    Returns:
        the networks; None for ``*`` (every peer trusted).
    Raises:
        ValueError: an entry is neither an address, a network nor ``*`` (``Settings`` checks
            them first, with a message that names the setting).
    """
    if "*" in entries:
        return None
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


class ClientAddresses:
    """Finds the client address of requests, believing ``X-Forwarded-For`` only from trusted proxies.

    Args:
        trusted: the proxies' networks (:func:`trusted_networks`); None trusts every peer;
            empty trusts none (the default: the peer's address is the client's).
    """

    def __init__(self, trusted: tuple[IPNetwork, ...] | None):
        self._trusted = trusted
        self._warned = False

    def _is_trusted(self, address: str) -> bool:
        if self._trusted is None:
            return True
        try:
            ip = ipaddress.ip_address(address.strip().strip("[]"))
        except ValueError:
            return False
        return any(ip in network for network in self._trusted)

    def of(self, environ: Mapping[str, Any]) -> str:
        """The client address of the request whose WSGI environ is ``environ``.

        Returns:
            an address string (the peer's ``REMOTE_ADDR``, or the one a trusted proxy
            forwarded); ``""`` for a request with no peer address (a unix socket without a proxy).
        """
        peer = str(environ.get("REMOTE_ADDR") or "")
        forwarded = environ.get("HTTP_X_FORWARDED_FOR")
        if not forwarded:
            return peer
        if not self._is_trusted(peer):
            if not self._warned and self._trusted == ():
                self._warned = True
                # Once per process: behind an unlisted proxy every client shares one fair share.
                log.warning(
                    "requests arrive with X-Forwarded-For from %s, which ZEMCP_FORWARDED_ALLOW_IPS does not "
                    "list: every client behind it counts as one client in the fair shares of threads, the rate "
                    "limits and ZEMCP_METRICS_ALLOW; list "
                    "the proxy's address there if it is yours",
                    peer or "a unix socket",
                )
            return peer
        client = peer
        for hop in reversed([hop.strip() for hop in str(forwarded).split(",")]):
            if not _is_address(hop):
                break  # not what a proxy writes: the hop to its right wrote it, and is the client
            client = hop
            if self._trusted is None or not self._is_trusted(hop):
                break
        return client


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True
