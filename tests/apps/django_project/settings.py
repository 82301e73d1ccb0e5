"""Settings of the test Django project: ``startproject``'s, on the PostgreSQL the tests start.

The database comes from the environment (``SITE_DB_NAME``, ``SITE_DB_USER``,
``SITE_DB_PASSWORD``, ``SITE_DB_HOST``, ``SITE_DB_PORT``; ``SITE_CONN_MAX_AGE`` overrides the
60 s connection age, and ``SITE_DB_APPLICATION`` names the site's connections in PostgreSQL's
``pg_stat_activity``, to tell two sites on one database apart). Lists are plain lists, so a test settings module can extend them.
"""

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent


def environment(name: str) -> str:
    """The variable ``name`` of the environment, required."""
    try:
        return os.environ[name]
    except KeyError:
        raise ImproperlyConfigured(
            f"{name} is not set: the test Django project reads its database from SITE_DB_NAME, SITE_DB_USER, "
            "SITE_DB_PASSWORD, SITE_DB_HOST and SITE_DB_PORT (tests/support/djangosite.py sets them)"
        ) from None


# A fixed key is fine for a test site whose sessions live as long as a test run.
SECRET_KEY = "zemcp-tests-django-project"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "oauth2_provider",
    "zemcp.django",
    "tests.apps.django_project.notes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
]

ROOT_URLCONF = "tests.apps.django_project.urls"
WSGI_APPLICATION = "tests.apps.django_project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": environment("SITE_DB_NAME"),
        "USER": environment("SITE_DB_USER"),
        "PASSWORD": environment("SITE_DB_PASSWORD"),
        "HOST": environment("SITE_DB_HOST"),
        "PORT": environment("SITE_DB_PORT"),
        "ATOMIC_REQUESTS": True,
        "CONN_MAX_AGE": int(os.environ.get("SITE_CONN_MAX_AGE", "60")),
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": {"application_name": os.environ.get("SITE_DB_APPLICATION", "django_project")},
    }
}

# The tests log users in many times; the default hasher's iterations are for real passwords.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# zemcp's settings (the names of the ZEMCP_* variables without ZEMCP_): every tool call leaves
# a zemcp.audit record in the log.
ZEMCP = {"AUDIT_LOG": True}
