"""The Django view across gunicorn workers sharing a real Redis: the site's MCP endpoint
(tests/apps/django_site, ``/site/mcp``) keeps a session on every worker, an elicitation's
answer posted to another worker reaches the waiting call, and a stream dropped on one worker
resumes on another, all through the site's middleware."""

import importlib.util

import pytest

from tests.support.clients import HandshakeClient
from tests.support.placement import answer_on, redis_settings, resume_on, start_call, worker_connection

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("django") is None, reason="django is not installed (pip install 'zemcp[django]')"
)

APP = "tests.apps.django_site.wsgi:application"
VIEW = "/site/mcp"
#: Response header the site's own middleware adds to every response it sees.
SITE_HEADER = "X-Served-By"


@pytest.fixture
def site(start_server, redis_server):
    return start_server(app=APP, **redis_settings(redis_server.url))


def session(site) -> HandshakeClient:
    client = HandshakeClient(site.base + VIEW)
    assert client.initialize().status_code == 200
    client.notify_initialized()
    return client


def test_an_answer_posted_to_another_worker_reaches_the_call_waiting_in_the_view(site):
    client = session(site)
    runner, runner_pid = worker_connection(client)
    call, stream, ask = start_call(client, runner)
    other, other_pid = worker_connection(client, {runner_pid})
    accepted = answer_on(client, other, ask["id"], "session show")
    assert accepted.status_code == 202, accepted.text
    assert accepted.headers.get(SITE_HEADER) == "django"
    result = stream.next_message()
    assert result["id"] == call["id"] and "protocol version:" in result["result"]["content"][0]["text"], result
    assert other_pid != runner_pid


def test_a_stream_dropped_on_one_worker_resumes_through_the_view_on_another(site):
    client = session(site)
    runner, runner_pid = worker_connection(client)
    call, stream, ask = start_call(client, runner)
    last_id = stream.last_event_id
    stream.close()
    resumer, resumer_pid = worker_connection(client, {runner_pid})
    response, resumed = resume_on(client, resumer, last_id)
    assert response.headers.get(SITE_HEADER) == "django", "the resumed stream passes through the middleware"
    answerer, _ = worker_connection(client, {runner_pid, resumer_pid})
    assert answer_on(client, answerer, ask["id"], "server status").status_code == 202
    result = resumed.next_message()
    assert result["id"] == call["id"] and "thread budget:" in result["result"]["content"][0]["text"], result
