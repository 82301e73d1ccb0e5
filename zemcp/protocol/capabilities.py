"""What the server knows of the client while it serves one request: version, identity, capabilities.

In the handshake era this comes from ``initialize`` and lives as long as the session (a
:class:`zemcp.state.session.Session` is a :class:`ClientView`). In the stateless 2026-07-28 era
it comes from the envelope of each request (``params._meta``) and is never remembered
(MCP 2026-07-28 basic/versioning: servers must not infer capabilities from earlier
requests). Everything era-agnostic asks this interface, never the era.
"""

from __future__ import annotations

import json
from typing import Any

from zemcp.protocol.versions import ELICITATION_MODES, since

#: RFC 5424 severities in increasing order (MCP server/utilities/logging).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class ClientView:
    """The client of one request.

    Args:
        protocol_version: the version in force for the request.
        client_info: ``clientInfo`` (``name``, ``version``, ...); ``{}`` when not sent.
        capabilities: the declared ``ClientCapabilities`` object.
        log_level: lowest ``notifications/message`` level to send; None sends none (a
            2026-07-28 request without ``logLevel``).

    Attributes:
        protocol_version, client_info, capabilities, log_level: as given.
    """

    def __init__(
        self,
        protocol_version: str,
        client_info: dict[str, Any],
        capabilities: dict[str, Any],
        log_level: str | None = "info",
    ):
        self.protocol_version = protocol_version
        self.client_info = client_info
        self.capabilities = capabilities
        self.log_level = log_level
        self._elicit_modes = _elicitation_modes(protocol_version, capabilities.get("elicitation"))

    def client_supports_elicit(self, mode: str = "form") -> bool:
        """True when the client declared elicitation in ``mode`` (``form`` or ``url``).

        The capability is ``capabilities.elicitation`` as a JSON object; from 2025-11-25 it
        names its modes (``{"form": {}, "url": {}}``) and an empty object means form only.
        """
        return mode in self._elicit_modes

    def client_supports(self, capability: str) -> bool:
        """True when the client declared ``capabilities.<capability>`` (``sampling``, ``roots``) as an object."""
        return isinstance(self.capabilities.get(capability), dict)

    def logs(self, level: str) -> bool:
        """True when a log message at ``level`` (one of :data:`LOG_LEVELS`) is to be sent."""
        return self.log_level is not None and LOG_LEVELS.index(level) >= LOG_LEVELS.index(self.log_level)


def check_size(name: str, value: object, limit: int) -> None:
    """Refuse a client-declared object larger than ``limit`` bytes as compact JSON.

    Raises:
        ValueError: naming ``name``, its size and the setting (``ZEMCP_MAX_CLIENT_INFO_BYTES``).
    """
    size = len(json.dumps(value, separators=(",", ":")))
    if size > limit:
        raise ValueError(
            f"{name} is {size} bytes as JSON, more than the {limit} this server accepts "
            f"(ZEMCP_MAX_CLIENT_INFO_BYTES); declare only what the client has"
        )


def _elicitation_modes(protocol_version: str, declared: object) -> frozenset[str]:
    if not isinstance(declared, dict):
        return frozenset()
    if not since(protocol_version, ELICITATION_MODES) or not declared:
        return frozenset({"form"})
    return frozenset(mode for mode in ("form", "url") if isinstance(declared.get(mode), dict))
