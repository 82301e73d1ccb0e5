"""Settings of the test Django project: no database, the apps' templates, the stock middleware (sessions in signed
cookies, so that none is needed) with ``LoginRequiredMiddleware``, one middleware of its own,
and zemcp's settings and server in ``ZEMCP``."""

# A fixed key is fine for a test site that signs nothing a client keeps.
SECRET_KEY = "zemcp-tests-django-site"
DEBUG = False
# mcp.example.test: a name the site serves that zemcp's own loopback Host check would refuse.
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "mcp.example.test"]
ROOT_URLCONF = "tests.apps.django_site.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "zemcp.django",
    "tests.apps.django_site.catalogue",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "tests.apps.django_site.middleware.header_user",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "tests.apps.django_site.middleware.mark",
]
# The apps' templates (catalogue/templates), for the catalogue's MCP App.
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
DATABASES: dict = {}
USE_TZ = True
ZEMCP = {
    "SERVER": "tests.apps.django_site.mcp.server",
    # Pages of this origin may call the endpoint (zemcp's Origin check reads the site's settings).
    "ALLOWED_ORIGINS": ["https://pages.example.test"],
}
