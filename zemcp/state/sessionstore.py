"""The sessions seam: the live handshake-era sessions, found by ``Mcp-Session-Id``.

MCP basic/transports, "Session Management": a server may assign a session id at
``initialize``; every later request carries it in ``Mcp-Session-Id``, and a request naming
no live session is answered 404. :class:`SessionStore` is how the server creates, finds,
ends and sweeps its sessions, whichever backend keeps them (in-process:
:class:`zemcp.state.registry.SessionRegistry`; Redis:
:class:`zemcp.state.redis.sessions.RedisSessionStore`); the record it keeps is
:class:`zemcp.state.session.Session`. The lookup errors here are the ones every store raises.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

#: The session record a :class:`SessionStore` keeps (:class:`zemcp.state.session.Session`).
S = TypeVar("S")


class SessionError(Exception):
    """Base of the session lookup failures; the transport maps each to an HTTP status."""


class SessionRequired(SessionError):
    """A request other than ``initialize`` came without ``Mcp-Session-Id`` (HTTP 400)."""


class SessionNotFound(SessionError):
    """The ``Mcp-Session-Id`` names no live session (HTTP 404)."""


class SessionLimitReached(SessionError):
    """``initialize`` found ``max_sessions`` live sessions (HTTP 429 with ``Retry-After``)."""


class SessionStore(Protocol[S]):
    """The live sessions (records of type ``S``).

    Attributes:
        instance: the name of this process's instance, the prefix of the session ids it creates.
        max_sessions: live sessions at most.
        ttl: [seconds] idle time after which a session is ended.
        shared: True when sessions outlive this process (other processes serve them), so a
            stopping process ends only its own calls, not the sessions.
    """

    instance: str
    shared: bool
    max_sessions: int
    ttl: float

    def create(
        self,
        protocol_version: str,
        client_info: dict[str, Any],
        capabilities: dict[str, Any],
        principal: str | None = None,
    ) -> S:
        """Create and register a session, bound to ``principal`` (a principal key) when given.

        Raises:
            SessionLimitReached: ``max_sessions`` sessions are live.
        """

    def get(self, session_id: str | None) -> S:
        """The live session named ``session_id``, its idle timer reset.

        Raises:
            SessionRequired: ``session_id`` is None.
            SessionNotFound: no live session has that id.
        """

    def end(self, session_id: str, why: str) -> bool:
        """End a session (its ``on_end`` callback runs); False when it was not live."""

    def sweep(self, now: float | None = None) -> int:
        """End every session idle longer than ``ttl`` (``now``: ``time.monotonic()``
        seconds); returns how many ended."""

    def sessions(self) -> list[S]:
        """The live sessions, oldest first."""

    def local(self) -> list[S]:
        """The sessions this process holds now (all of them, where sessions live in one process)."""

    def close(self) -> None:
        """This process stops using the store (its background work ends)."""

    def __contains__(self, session_id: object) -> bool: ...

    def __len__(self) -> int: ...
