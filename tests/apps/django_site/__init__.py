"""A minimal Django project with the reference server mounted under ``/mcp``.

gunicorn serves it as ``tests.apps.django_site.wsgi:application``. It has no database and
no installed apps: one view (urls.py), and a middleware that marks the responses Django
served (middleware.py).
"""
