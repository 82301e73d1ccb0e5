"""Settings of the test Django project: no database, no apps, one middleware."""

# A fixed key is fine for a test site that signs nothing a client keeps.
SECRET_KEY = "zemcp-tests-django-site"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.apps.django_site.urls"
INSTALLED_APPS: list[str] = []
MIDDLEWARE = ["tests.apps.django_site.middleware.mark"]
DATABASES: dict = {}
USE_TZ = True
