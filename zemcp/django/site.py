"""The site's settings and its server: ``settings.ZEMCP`` and ``zemcp.django.server``.

``settings.ZEMCP`` holds zemcp's settings under the names of the ``ZEMCP_*`` variables without
``ZEMCP_`` (``{"THREADS": 16, "AUDIT_LOG": True}``; docs/configuration.md), the environment's
variables winning, plus ``"SERVER"``: the dotted path of the site's own :class:`zemcp.Server`
(or :class:`zemcp.McpApp`), as ``AdminConfig.default_site`` names an admin site. Without it,
the site's server is made on first use, named after the project (the package of the settings
module), with those settings. Installed apps register their tools on it in their ``mcp.py``
(:mod:`zemcp.django.apps`), the endpoint serves it (``view()``), the commands describe and
serve it (``manage.py zemcp``).
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from zemcp.config import Settings
from zemcp.core.server import Server
from zemcp.django.connections import recycle_connections
from zemcp.http.transport import McpApp

#: The key of ``settings.ZEMCP`` that names the site's own server; every other key is a setting.
SERVER = "SERVER"

_lock = threading.Lock()
_server: Server | None = None


def settings() -> Settings:
    """zemcp's settings for this site: ``settings.ZEMCP``, then the ``ZEMCP_*`` variables over it.

    Returns:
        the settings (the environment's alone when the site has no ``ZEMCP``).
    Raises:
        ImproperlyConfigured: ``settings.ZEMCP`` is not a dict, names no setting, or holds a
            value of the wrong form (the message names the key and what it expects).
    """
    configured = _configured()
    try:
        return Settings.from_site({k: v for k, v in configured.items() if k != SERVER}, "settings.ZEMCP")
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None


def server() -> Server:
    """The site's server (``zemcp.django.server``): the one ``settings.ZEMCP["SERVER"]`` names,
    else one made on first use with :func:`settings`, named after the project.

    Raises:
        ImproperlyConfigured: ``SERVER`` does not import, or names no Server or McpApp.
    """
    global _server
    with _lock:
        if _server is None:
            _server = _load()
            # Its handlers use the site's database on zemcp's threads, whoever serves it.
            recycle_connections(_server)
        return _server


def _load() -> Server:
    path = _configured().get(SERVER)
    if path is None:
        project = (getattr(django_settings, "SETTINGS_MODULE", None) or "django").split(".")[0]
        return Server(project, settings=settings())
    try:
        found = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"settings.ZEMCP['SERVER']={path!r} does not import: {exc}") from None
    if isinstance(found, McpApp):
        return found.server
    if not isinstance(found, Server):
        raise ImproperlyConfigured(
            f"settings.ZEMCP['SERVER']={path!r} is a {type(found).__name__}, not a zemcp.Server or zemcp.McpApp"
        )
    return found


def _configured() -> dict[str, Any]:
    configured = getattr(django_settings, "ZEMCP", {})
    if not isinstance(configured, dict):
        raise ImproperlyConfigured(
            f"settings.ZEMCP is a {type(configured).__name__}: make it a dict of zemcp's settings "
            '({"THREADS": 16, ...}; docs/configuration.md)'
        )
    return configured
