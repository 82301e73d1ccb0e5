"""The audit example of docs/django.md (docs/examples/django_site) run in a Django process of its own.

``python -m tests.apps.django_example`` (from the checkout, with ``docs/examples/django_site`` on
``PYTHONPATH``) configures Django with an in-memory SQLite database shared by the process's
threads, migrates, logs a user in, calls the site's eliciting tool through the MCP endpoint
(the site's view) with the in-process clients of both eras, lists the tools of a user without
its permission, then reads the admin's changelist of the stored calls as a superuser. It prints one JSON object: the rows and the changelist's
status and text. Django's settings are process-wide, hence a process of its own.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import django
from django.conf import settings

#: One in-memory database for every thread of the process (zemcp's hook writes on its own threads).
DATABASE = "file:zemcp-audit-example?mode=memory&cache=shared"


def configure() -> None:
    """Django settings as ``startproject`` makes them, with zemcp's app and the example's."""
    settings.configure(
        SECRET_KEY="zemcp-tests-django-audit",
        DEBUG=False,
        ALLOWED_HOSTS=["localhost", "testserver"],
        ROOT_URLCONF="mysite.urls",
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "zemcp.django",
            "mcp_audit",
            "trips",
        ],
        MIDDLEWARE=[
            "django.middleware.security.SecurityMiddleware",
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.common.CommonMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True,
                "OPTIONS": {
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages",
                    ]
                },
            }
        ],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DATABASE}},
        USE_TZ=True,
    )
    django.setup()


#: The header the session cookie travels under to :func:`with_cookie`.
SESSION_COOKIE = "X-Session-Cookie"


def with_cookie(app: Any) -> Any:
    """The WSGI ``app``, given the ``Cookie`` a request carried as :data:`SESSION_COOKIE`:
    werkzeug's test client sets ``Cookie`` from its own jar, empty here, on every request."""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        cookie = environ.pop("HTTP_X_SESSION_COOKIE", None)
        if cookie:
            environ["HTTP_COOKIE"] = cookie
        return app(environ, start_response)

    return wrapped


def main() -> None:
    configure()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application
    from django.test import Client
    from mcp_audit.models import ToolCall

    from tests.support.clients import HandshakeClient, ModernClient
    from tests.support.wires import InProcessWire

    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import Permission

    ada = User.objects.create_user("ada", password="not-used")
    ada.user_permissions.add(Permission.objects.get(content_type__app_label="trips", codename="add_trip"))
    User.objects.create_user("bob", password="not-used")
    User.objects.create_superuser("root", password="not-used")
    site = Client()
    site.force_login(User.objects.get(username="ada"))
    cookie = {SESSION_COOKIE: f"sessionid={site.cookies['sessionid'].value}"}
    wire = InProcessWire(with_cookie(get_wsgi_application()), "/mcp")

    modern = ModernClient(wire)
    first = modern.result(modern.call_tool("book", {"city": "Oslo"}, headers=cookie)[1])
    answer = {"date": {"action": "accept", "content": {"date": "May 1"}}}
    final = modern.result(modern.answer("book", first, answer, {"city": "Oslo"}, headers=cookie)[1])

    session = HandshakeClient(wire, headers=cookie)
    assert session.initialize().status_code == 200
    _, _, stream = session.open_call("book", {"city": "Bergen"})
    ask = stream.next_message()
    session.answer(ask["id"], {"action": "decline"})
    declined = stream.rest()[-1]

    from trips.models import Trip

    trips = [(trip.traveller.get_username(), trip.city, trip.date) for trip in Trip.objects.order_by("id")]
    # bob may not add trips: book is not among his tools.
    other = Client()
    other.force_login(User.objects.get(username="bob"))
    bob = ModernClient(wire)
    bob_tools = [
        tool["name"]
        for tool in bob.result(
            bob.post(
                bob.message("tools/list", {}), headers={SESSION_COOKIE: f"sessionid={other.cookies['sessionid'].value}"}
            )
        )["tools"]
    ]

    admin = Client()
    admin.force_login(User.objects.get(username="root"))
    changelist = admin.get("/admin/mcp_audit/toolcall/")
    rows = [
        {
            "method": row.method,
            "tool": row.tool,
            "arguments": row.arguments,
            "outcome": row.outcome,
            "reason": row.reason,
            "user": row.user,
            "protocol_version": row.protocol_version,
            "duration": row.duration,
        }
        for row in ToolCall.objects.order_by("started", "id")
    ]
    json.dump(
        {
            "final": final,
            "declined": declined,
            "trips": trips,
            "bob_tools": bob_tools,
            "rows": rows,
            "changelist": {"status": changelist.status_code, "text": changelist.content.decode()},
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
