"""The test Django project (tests/apps/django_project) on the tests' PostgreSQL: its database,
its users, signing in through its login page, and what PostgreSQL says of its connections.

Everything Django does here runs in subprocesses (``python -m django ... --settings``), as an
operator would run ``manage.py``: the test process never configures Django itself.

Fixtures:
    notes_site: the project under ``gunicorn -c gunicorn.conf.py`` with two workers sharing
        the run's Redis, for the whole run (per pytest-xdist worker); its log goes into the
        report of a test that fails.
    django_project_db: the project's database for the whole run (per pytest-xdist worker),
        migrated, with the users of :data:`USERS`, each with a Django REST framework token
        (:data:`DRF_TOKENS`) and a django-oauth-toolkit access token (:data:`OAUTH_TOKENS`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support import REPO
from tests.support.gunicorn import GunicornServer, lend
from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT
from tests.support.postgres import Database, PostgresServer
from tests.support.redisserver import RedisServer

#: The settings module of the test project.
SETTINGS = "tests.apps.django_project.settings"
#: The WSGI application gunicorn serves.
APPLICATION = "tests.apps.django_project.wsgi:application"
#: The project's users: name -> (password, is_staff). Staff users hold ``notes.view_note``.
USERS = {"alice": ("alice-password", False), "bob": ("bob-password", False), "staff": ("staff-password", True)}
#: The Django REST framework token of each user (``Authorization: Token <key>``).
DRF_TOKENS = {name: f"{name}-drf-token" for name in USERS}
#: The django-oauth-toolkit access token of each user (``Authorization: Bearer <token>``).
OAUTH_TOKENS = {name: f"{name}-oauth-access-token" for name in USERS}
#: The project's login page (Django's ``LoginView``).
LOGIN_PATH = "/accounts/login/"
#: The name the site's connections carry in ``pg_stat_activity`` unless ``SITE_DB_APPLICATION`` says.
DEFAULT_APPLICATION = "django_project"
#: [seconds] how long a ``manage.py`` command of the project may take.
COMMAND_TIMEOUT = 120.0

_MAKE_USERS = """
from datetime import timedelta
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application
from rest_framework.authtoken.models import Token
view_note = Permission.objects.get(content_type__app_label="notes", codename="view_note")
application = Application.objects.create(
    name="mcp clients", client_type="public", authorization_grant_type="authorization-code",
    redirect_uris="http://127.0.0.1/callback",
)
for name, (password, staff) in {users!r}.items():
    user = User.objects.create_user(name, password=password, is_staff=staff)
    if staff:
        user.user_permissions.add(view_note)
    Token.objects.create(user=user, key={drf!r}[name])
    AccessToken.objects.create(
        user=user, application=application, token={oauth!r}[name], scope="read write",
        expires=timezone.now() + timedelta(days=1),
    )
"""


def manage(database: Database, *args: str) -> str:
    """Run ``python -m django <args> --settings=<the project's>`` against ``database``; its output.

    Raises:
        pytest.fail: the command failed (its output in the message).
    """
    env = {**os.environ, **database.environ(), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "django", *args, f"--settings={SETTINGS}"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
    )
    if done.returncode != 0:
        pytest.fail(f"django {' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


@pytest.fixture(scope="session")
def django_project_db(postgres: PostgresServer) -> Iterator[Database]:
    """The test project's database, migrated, with the users of :data:`USERS`."""
    database = postgres.create_database("notes_site")
    manage(database, "migrate", "--no-input", "--verbosity", "0")
    manage(database, "shell", "--no-imports", "-c", _MAKE_USERS.format(users=USERS, drf=DRF_TOKENS, oauth=OAUTH_TOKENS))
    yield database


def site_settings(redis: RedisServer) -> dict[str, Any]:
    """zemcp's settings of the notes site: two workers sharing ``redis``."""
    return {"workers": 2, "redis_url": redis.url, "elicitation_timeout": 30}


@pytest.fixture(scope="session")
def _notes_site(_log_dir: Path, django_project_db: Database, _shared_redis: RedisServer) -> Iterator[GunicornServer]:
    site = GunicornServer(site_settings(_shared_redis), _log_dir, app=APPLICATION, environ=django_project_db.environ())
    yield site
    site.stop()


@pytest.fixture
def notes_site(request: pytest.FixtureRequest, _notes_site: GunicornServer) -> Iterator[GunicornServer]:
    """The notes site of the run (its log in a failed test's report; its clients closed after the test)."""
    yield from lend(request, _notes_site)


def sign_in(base: str, username: str) -> str:
    """Sign ``username`` in at the site's login page, as a browser does (the form's CSRF token
    and cookie included); returns the value of the session cookie.

    Raises:
        AssertionError: the site did not accept the login (the page's answer in the message).
    """
    password, _ = USERS[username]
    timeout = (CONNECT_TIMEOUT, READ_TIMEOUT)
    with requests.Session() as http:
        page = http.get(base + LOGIN_PATH, timeout=timeout)
        assert page.status_code == 200, (page.status_code, page.text)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token is not None, page.text
        form = {"username": username, "password": password, "csrfmiddlewaretoken": token.group(1)}
        done = http.post(base + LOGIN_PATH, data=form, allow_redirects=False, timeout=timeout)
        assert done.status_code == 302, (done.status_code, done.text)
        return http.cookies["sessionid"]


def session_cookie(session_id: str) -> dict[str, str]:
    """The ``Cookie`` header of requests made in the signed-in session ``session_id``."""
    return {"Cookie": f"sessionid={session_id}"}


def site_connections(
    postgres: PostgresServer, database: Database, application: str = DEFAULT_APPLICATION
) -> list[dict[str, Any]]:
    """The connections of the site named ``application`` (``SITE_DB_APPLICATION``) to
    ``database`` that PostgreSQL lists in ``pg_stat_activity``: each a dict of ``pid``,
    ``state`` (``idle``, ``active``, ``idle in transaction`` ...) and ``query`` (the last one)."""
    with postgres.connect() as connection:
        rows = connection.execute(
            "SELECT pid, state, query FROM pg_stat_activity WHERE datname = %s AND usename = %s"
            " AND application_name = %s",
            (database.name, database.user, application),
        ).fetchall()
    return [{"pid": pid, "state": state, "query": query} for pid, state, query in rows]


def terminate_site_connections(postgres: PostgresServer, database: Database) -> int:
    """``pg_terminate_backend`` every connection of the site to ``database``; how many there were."""
    with postgres.connect() as connection:
        rows = connection.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND usename = %s",
            (database.name, database.user),
        ).fetchall()
    return len(rows)


def saved_notes(postgres: PostgresServer, database: Database) -> list[tuple[str, str]]:
    """Every note in ``database``, oldest first, as (owner's username, text), read by PostgreSQL's
    superuser beside the site."""
    with postgres.connect(database.name) as connection:
        rows = connection.execute(
            "SELECT u.username, n.text FROM notes_note n JOIN auth_user u ON u.id = n.owner_id ORDER BY n.id"
        ).fetchall()
    return [(username, text) for username, text in rows]
