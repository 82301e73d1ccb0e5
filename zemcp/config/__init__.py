"""Settings: every knob of a zemcp server, with safe defaults (:class:`Settings`).

``settings`` holds the dataclass, each field declared once with ``declaration.setting``;
``checks`` what each value may be, ``environment`` how the ``ZEMCP_*`` variables parse, and
``reference`` the settings reference of ``docs/configuration.md``, generated from the declarations.
"""

from zemcp.config.environment import ENV_PREFIX
from zemcp.config.settings import Settings, StreamLimits, is_loopback_host

__all__ = ["ENV_PREFIX", "Settings", "StreamLimits", "is_loopback_host"]
