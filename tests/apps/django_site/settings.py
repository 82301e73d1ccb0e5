"""Settings of the test Django project: no database, no apps, the stock middleware that needs none, and one of its own."""

# A fixed key is fine for a test site that signs nothing a client keeps.
SECRET_KEY = "zemcp-tests-django-site"
DEBUG = False
# mcp.example.test: a name the site serves that zemcp's own loopback Host check would refuse.
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "mcp.example.test"]
ROOT_URLCONF = "tests.apps.django_site.urls"
INSTALLED_APPS: list[str] = []
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "tests.apps.django_site.middleware.header_user",
    "tests.apps.django_site.middleware.mark",
]
DATABASES: dict = {}
USE_TZ = True
