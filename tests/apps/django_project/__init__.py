"""A Django project as ``startproject`` makes it, on PostgreSQL, with the MCP endpoint as a view.

The stock middleware stack plus ``LoginRequiredMiddleware``, ``ATOMIC_REQUESTS``, persistent
connections with health checks (settings.py, the database from ``SITE_DB_*`` variables that
tests/support/djangosite.py sets), Django's session login, and an app of its own, ``notes``
(a note per row, owned by a user), whose tools (notes/mcp.py) the site's zemcp server
(``zemcp.django.server``) offers at ``/mcp`` to signed-in users. gunicorn serves it as ``tests.apps.django_project.wsgi:application``.
"""
