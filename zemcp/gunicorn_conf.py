"""gunicorn settings and hooks for zemcp: ``gunicorn -c python:zemcp.gunicorn_conf wsgi:app``,
or ``from zemcp.gunicorn_conf import *`` in a config file.

A stable path of the public API; the settings are defined in :mod:`zemcp.http.gunicorn_conf`.
"""

from zemcp.http.gunicorn_conf import *  # noqa: F403 (gunicorn reads the names of this module)
from zemcp.http.gunicorn_conf import __all__ as __all__
