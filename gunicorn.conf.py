"""gunicorn settings for zemcp: gthread workers sized from the ZEMCP_* settings.

Run: ``gunicorn -c gunicorn.conf.py wsgi:app``. The settings and hooks live in the package
(:mod:`zemcp.http.gunicorn_conf`), so that ``zemcp run`` and ``gunicorn -c
python:zemcp.http.gunicorn_conf`` behave the same without this file.
"""

from zemcp.http.gunicorn_conf import *  # noqa: F403 (gunicorn reads the names of this module)
