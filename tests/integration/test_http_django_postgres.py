"""A Django site on a real PostgreSQL, its MCP endpoint a view (``zemcp.django.view``), under gunicorn.

tests/apps/django_project is a ``startproject`` site (the stock middleware and
``LoginRequiredMiddleware``, ``ATOMIC_REQUESTS``, ``CONN_MAX_AGE = 60``,
``CONN_HEALTH_CHECKS``) with a notes app, served by ``gunicorn -c gunicorn.conf.py`` with two
workers sharing Redis, on a PostgreSQL cluster the tests start. Its users sign in at Django's
login page and the MCP clients of both eras carry the session cookie. Shown here:

- an eliciting call saves its row for the signed-in user, and while the user is asked no
  connection of the site is ``idle in transaction`` (a plain view under ``ATOMIC_REQUESTS``,
  which holds its transaction open, shows that the check finds one when there is one);
- a request without a session gets 401 with a challenge, never the login page;
- the handler threads' connections are recycled as Django's request cycle recycles its own:
  after PostgreSQL drops them all, the next calls work (``CONN_HEALTH_CHECKS``), and with
  ``CONN_MAX_AGE = 0`` none stays open after the calls;
- a Django permission hides a tool from users without it;
- an ``async def`` tool that calls the ORM gets Django's ``SynchronousOnlyOperation`` as its
  tool error, naming the fix, and the tool written with ``sync_to_async`` works.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from tests.support.clients import HandshakeClient, ModernClient
from tests.support.djangosite import (
    APPLICATION,
    saved_notes,
    session_cookie,
    sign_in,
    site_connections,
    site_settings,
    terminate_site_connections,
)
from tests.support.gunicorn import GunicornServer
from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT
from tests.support.postgres import Database, PostgresServer

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("django") is None, reason="django is not installed (pip install 'zemcp[django]')"
)

#: The note tools a signed-in user sees; ``all_notes`` is for holders of notes.view_note.
USER_TOOLS = {"add_note", "my_notes", "count_notes", "count_notes_unsafe", "export_notes"}
#: Calls made at once to spread over the workers' handler threads.
SPREAD = 6
#: The application name of the site's connections with CONN_MAX_AGE = 0.
UNKEPT = "conn_max_age_0"
#: [seconds] how long PostgreSQL may take to list a change of the site's connections.
SETTLE = 10.0


@pytest.fixture
def site(notes_site: GunicornServer) -> GunicornServer:
    return notes_site


def handshake(site: GunicornServer, username: str | None) -> HandshakeClient:
    """A handshake-era session of ``username`` (signed in at the login page), or anonymous."""
    headers = session_cookie(sign_in(site.base, username)) if username else None
    client = HandshakeClient(site.url, headers=headers)
    response = client.initialize()
    assert response.status_code == 200, (response.status_code, response.text)
    return client


def text_of(result: dict) -> str:
    assert result.get("isError") is False, result
    return result["content"][0]["text"]


def wait_for(condition, what: str, deadline: float = SETTLE) -> Any:
    """Poll ``condition()`` until it returns something true; that value."""
    end = time.monotonic() + deadline
    while not (value := condition()):
        assert time.monotonic() < end, f"{what} within {deadline} s"
        time.sleep(0.05)
    return value


def in_transaction(postgres: PostgresServer, database: Database) -> list[dict]:
    return [c for c in site_connections(postgres, database) if c["state"] == "idle in transaction"]


def test_a_handshake_eliciting_call_saves_the_note_for_the_user_and_holds_no_transaction_while_asking(
    site, postgres, django_project_db
):
    client = handshake(site, "alice")
    request_id, response, stream = client.open_call("add_note", {})
    assert stream is not None, response.headers
    ask = stream.next_message()
    assert ask is not None and ask["method"] == "elicitation/create", ask
    assert ask["params"]["message"].startswith("You have "), ask
    # The handler queried (the count in its question) and now waits for the user: its
    # connection, and the request's, hold no transaction.
    assert site_connections(postgres, django_project_db), "the site has connections open"
    assert in_transaction(postgres, django_project_db) == []
    assert client.accept(ask["id"], {"text": "asked in the handshake era"}).status_code == 202
    final = stream.next_message()
    assert final is not None and final["id"] == request_id, final
    assert text_of(final["result"]).endswith("saved for alice"), final
    assert ("alice", "asked in the handshake era") in saved_notes(postgres, django_project_db)


def test_a_2026_eliciting_call_saves_the_note_for_the_user_and_holds_no_transaction_between_rounds(
    site, postgres, django_project_db
):
    cookie = session_cookie(sign_in(site.base, "bob"))
    client = ModernClient(site.url)
    first = client.result(client.call_tool("add_note", headers=cookie)[1])
    assert first["resultType"] == "input_required", first
    assert in_transaction(postgres, django_project_db) == []
    answer = {"text": {"action": "accept", "content": {"text": "asked in 2026-07-28"}}}
    final = client.result(client.answer("add_note", first, answer, headers=cookie)[1])
    assert final["resultType"] == "complete" and text_of(final).endswith("saved for bob"), final
    assert ("bob", "asked in 2026-07-28") in saved_notes(postgres, django_project_db)


def test_the_transaction_check_finds_the_one_a_plain_view_holds_under_atomic_requests(
    site, postgres, django_project_db
):
    """The check of the two tests above can fail: a view that waits inside ATOMIC_REQUESTS'
    transaction shows as ``idle in transaction`` while it waits."""
    cookie = session_cookie(sign_in(site.base, "alice"))
    answers: list[requests.Response] = []

    def hold() -> None:
        answers.append(
            requests.get(site.base + "/held?seconds=3", headers=cookie, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
        )

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        # Waited for past the transaction's BEGIN, which psycopg sends before the view's query:
        # for a moment the connection is idle in transaction with BEGIN as its last query.
        held = wait_for(
            lambda: [c for c in in_transaction(postgres, django_project_db) if c["query"] != "BEGIN"],
            "the held transaction shows",
            3,
        )
        assert "notes_note" in held[0]["query"], held
    finally:
        holder.join()
    assert answers[0].status_code == 200 and answers[0].text.endswith("notes"), answers[0].text
    assert in_transaction(postgres, django_project_db) == []


def test_a_request_without_a_session_gets_401_never_the_login_page(site):
    """``LoginRequiredMiddleware`` sends the site's pages to its login page; the MCP endpoint
    (its ``authentication=`` reading DRF and django-oauth-toolkit tokens) answers 401 with their
    challenges instead, in both eras."""
    page = requests.get(site.base + "/", allow_redirects=False, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    assert page.status_code == 302 and page.headers["Location"].startswith("/accounts/login/"), page.headers

    init = HandshakeClient(site.url).initialize()
    assert init.status_code == 401 and "Location" not in init.headers, (init.status_code, init.headers)
    assert init.headers["WWW-Authenticate"] == 'Token, Bearer realm="api"', init.headers
    assert init.headers["Content-Type"].startswith("application/json"), init.headers

    modern = ModernClient(site.url)
    request_id, response = modern.call_tool("my_notes")
    assert response.status_code == 401 and "Location" not in response.headers, (response.status_code, response.headers)
    assert response.headers["WWW-Authenticate"] == 'Token, Bearer realm="api"', response.headers


def spread_calls(site: GunicornServer, cookie: dict[str, str], tool: str = "my_notes") -> list[str]:
    """:data:`SPREAD` calls of ``tool`` in each era at once (so that many handler threads of
    both workers run one); the texts they answered."""
    handshakes = [HandshakeClient(site.url, headers=cookie) for _ in range(SPREAD)]
    for client in handshakes:
        assert client.initialize().status_code == 200

    def one(index: int) -> str:
        if index % 2:
            return text_of(handshakes[index // 2].rpc("tools/call", {"name": tool, "arguments": {}}))
        modern = ModernClient(site.url)
        return text_of(modern.result(modern.call_tool(tool, headers=cookie)[1]))

    try:
        with ThreadPoolExecutor(2 * SPREAD) as pool:
            return list(pool.map(one, range(2 * SPREAD)))
    finally:
        for client in handshakes:
            client.close()


def test_after_postgresql_drops_every_connection_of_the_site_the_next_calls_work(site, postgres, django_project_db):
    cookie = session_cookie(sign_in(site.base, "alice"))
    before = spread_calls(site, cookie)
    # The async tool's ORM calls run on asgiref's thread of each worker, inside recycled_connections.
    counts = spread_calls(site, cookie, "count_notes")
    # CONN_MAX_AGE = 60: the connections stay open for the next calls.
    assert site_connections(postgres, django_project_db)
    assert terminate_site_connections(postgres, django_project_db) > 0
    wait_for(lambda: not site_connections(postgres, django_project_db), "every connection ended")
    # Each handler run begins as a Django request does: the dropped connection is found
    # (CONN_HEALTH_CHECKS) and replaced, on every thread that had one.
    for _ in range(3):
        assert spread_calls(site, cookie) == before
        assert spread_calls(site, cookie, "count_notes") == counts


def test_with_conn_max_age_0_the_handler_threads_keep_no_connection(
    start_server, postgres, django_project_db, _shared_redis
):
    environ = {**django_project_db.environ(), "SITE_CONN_MAX_AGE": "0", "SITE_DB_APPLICATION": UNKEPT}
    site = start_server(app=APPLICATION, environ=environ, **site_settings(_shared_redis))
    cookie = session_cookie(sign_in(site.base, "alice"))
    for _ in range(3):
        spread_calls(site, cookie)
    # Each run closes what it opened, as a request of the site does.
    wait_for(lambda: not site_connections(postgres, django_project_db, UNKEPT), "no connection left open")


def test_a_django_permission_hides_the_staff_tool_from_other_users(site):
    alice = handshake(site, "alice")
    assert {tool["name"] for tool in alice.list_tools()} == USER_TOOLS
    refused = alice.rpc_error("tools/call", {"name": "all_notes", "arguments": {}})
    assert refused["message"] == "Unknown tool: 'all_notes'; tools/list names the available tools", refused
    modern = ModernClient(site.url)
    alice_cookie = session_cookie(sign_in(site.base, "alice"))
    assert modern.error(modern.call_tool("all_notes", headers=alice_cookie)[1], 400, -32602)["message"].startswith(
        "Unknown tool: 'all_notes'"
    )

    staff = handshake(site, "staff")
    assert {tool["name"] for tool in staff.list_tools()} == USER_TOOLS | {"all_notes"}
    text_of(staff.rpc("tools/call", {"name": "all_notes", "arguments": {}}))
    staff_cookie = session_cookie(sign_in(site.base, "staff"))
    text_of(modern.result(modern.call_tool("all_notes", headers=staff_cookie)[1]))


def test_an_async_tool_gets_djangos_refusal_of_the_orm_and_the_sync_to_async_tool_works(
    site, postgres, django_project_db
):
    client = handshake(site, "alice")
    unsafe = client.rpc("tools/call", {"name": "count_notes_unsafe", "arguments": {}})
    assert unsafe["isError"] is True, unsafe
    assert unsafe["content"][0]["text"] == (
        "You cannot call this from an async context - use a thread or sync_to_async."
    ), unsafe
    mine = [text for owner, text in saved_notes(postgres, django_project_db) if owner == "alice"]
    assert text_of(client.rpc("tools/call", {"name": "count_notes", "arguments": {}})) == str(len(mine))
