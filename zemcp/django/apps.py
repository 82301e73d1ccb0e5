"""``zemcp.django`` as an installed app: ``INSTALLED_APPS = [..., "zemcp.django"]``.

Once the app registry is ready, each installed app's ``mcp`` module is imported, as the admin
imports each ``admin`` module: there an app registers its tools, resources and prompts on the
site's server (``from zemcp.django import server``). The app also brings the ``manage.py
zemcp`` command (:mod:`zemcp.django.management.commands.zemcp`).
"""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class ZemcpConfig(AppConfig):
    """The app ``zemcp`` (its label): discovers ``mcp.py`` modules when Django is ready."""

    name = "zemcp.django"
    label = "zemcp"
    verbose_name = "MCP (zemcp)"

    def ready(self) -> None:
        """Import every installed app's ``mcp`` module (an app without one is skipped)."""
        autodiscover_modules("mcp")
