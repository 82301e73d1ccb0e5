"""zemcp inside a Django site (docs/django.md).

- :func:`view` (``zemcp.django.views``): the MCP endpoint as an ordinary view of the site's
  URLconf, ``path("mcp", zemcp.django.view())``, through the site's middleware, with the
  site's users (a session, or a token the site's authentication reads).
- ``server``: the site's :class:`zemcp.Server` (``zemcp.django.site``), made on first use from
  ``settings.ZEMCP`` unless ``settings.ZEMCP["SERVER"]`` names the site's own; with
  ``"zemcp.django"`` in ``INSTALLED_APPS`` each app's ``mcp.py`` registers its tools on it, and
  ``manage.py zemcp inspect | stdio | call`` describe and serve it.
- :func:`metadata_view`: the Protected Resource Metadata (RFC 9728) of zemcp's own OAuth
  authorization, for the site to route.
- :func:`recycled_connections`: the database connections of a thread of your own closed or
  recycled as Django's request cycle would (zemcp does it around every handler run).
- :func:`settings`: zemcp's settings from ``settings.ZEMCP`` and the environment, for a site
  that builds its own server.

Needs Django (``pip install 'zemcp[django]'``); imported only by a site that uses it.
"""

from __future__ import annotations

from typing import Any

try:
    import django  # noqa: F401 - said plainly below when the site's own install lacks it
except ImportError as exc:
    raise ImportError(
        f"zemcp.django needs Django ({exc}): pip install 'zemcp[django]' (or '.[django]' in a zemcp checkout)"
    ) from exc

from zemcp.django.connections import recycled_connections
from zemcp.django.site import settings
from zemcp.django.views import metadata_view, view


def __getattr__(name: str) -> Any:
    # The site's server is made on first use: the site's settings are read then, not at import.
    if name == "server":
        from zemcp.django import site

        return site.server()
    raise AttributeError(f"module 'zemcp.django' has no attribute {name!r}")


__all__ = ["metadata_view", "recycled_connections", "server", "settings", "view"]
