"""The Django project's WSGI entry point, with the reference server mounted under ``/mcp``.

This is the README's Django pattern: the dispatcher wraps Django's WSGI application, and
the ``McpApp`` is given ``endpoint="/"`` because the dispatcher moves the prefix out of the
path.
"""

import os

from django.core.wsgi import get_wsgi_application
from werkzeug.middleware.dispatcher import DispatcherMiddleware

import zemcp
from wsgi import create_app

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.apps.django_site.settings")

application = DispatcherMiddleware(get_wsgi_application(), {"/mcp": zemcp.McpApp(create_app().server, endpoint="/")})
