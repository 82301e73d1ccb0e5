"""The test Django project's WSGI application, as ``startproject`` writes it."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.apps.django_project.settings")

application = get_wsgi_application()
