"""zemcp mounted inside a real Flask site and a real Django project, served by gunicorn.

Each site (tests/apps/flask_site.py, tests/apps/django_site/) mounts the reference server
under ``/mcp`` with werkzeug's ``DispatcherMiddleware`` as the README's "Mounting in Flask or
Django" shows, and runs under ``gunicorn -c gunicorn.conf.py`` like the reference server.
The tests check that the site keeps its own routes (and its middleware never sees MCP
requests), that ``/mcp/`` is the endpoint too, that an eliciting call completes through the
mount in both eras (the handshake era's in-place event stream, answered on a second
connection, and the two rounds of a 2026-07-28 call), and that a client without the
elicitation capability is answered without a question in both.
"""

import importlib.util

import pytest
import requests

from tests.support.clients import ModernClient
from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT

#: Response header each site adds to what its framework served (the apps' ``SITE_HEADER``).
SITE_HEADER = "X-Served-By"
#: What ze_execute answers a client that can neither give a command nor be asked for one.
MISSING = "Error: missing required argument: command"


def _needs(module: str) -> pytest.MarkDecorator:
    """Skip the parameter, saying so, where the framework is not installed."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=f"{module} is not installed (pip install {module})"
    )


#: (framework, gunicorn app, the text of the site's own page).
SITES = [
    pytest.param(("flask", "tests.apps.flask_site:app", "the flask site"), id="flask", marks=_needs("flask")),
    pytest.param(
        ("django", "tests.apps.django_site.wsgi:application", "the django site"), id="django", marks=_needs("django")
    ),
]


@pytest.fixture(params=SITES)
def site(request, start_server):
    """A gunicorn serving one of the sites; ``(server, framework, page text)``."""
    framework, app, page = request.param
    return start_server(app=app), framework, page


def _get(url: str) -> requests.Response:
    with requests.Session() as http:
        return http.get(url, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))


def test_site_keeps_its_own_routes(site):
    """The site's page and its 404s stay with the framework; under the prefix only the endpoint exists."""
    server, framework, page = site
    home = _get(server.base + "/")
    assert home.status_code == 200, home.text
    assert home.text == page
    assert home.headers.get(SITE_HEADER) == framework

    elsewhere = _get(server.base + "/no-such-page")
    assert elsewhere.status_code == 404
    assert elsewhere.headers.get(SITE_HEADER) == framework, "a path outside the prefix must reach the framework"

    below = _get(server.base + "/mcp/no-such-page")
    assert below.status_code == 404
    assert SITE_HEADER not in below.headers, "a path under the prefix must reach the MCP app, not the framework"
    assert below.json()["error"]["message"] == "Not Found: the MCP endpoint is /mcp"


def test_handshake_eliciting_call_through_the_mount(site):
    """A 2025-06-18 session elicits through the mount: event stream, answer 202 on a second connection, result."""
    server, _, _ = site
    client = server.session(protocol_version="2025-06-18", name="mounted-client")
    init = client.init_response
    assert init.json()["result"]["protocolVersion"] == "2025-06-18"
    assert SITE_HEADER not in init.headers, "the framework's middleware must not see MCP requests"

    call, response, stream, elicitation = client.start_elicitation()
    assert response.headers["Content-Type"].split(";")[0].strip() == "text/event-stream"
    assert SITE_HEADER not in response.headers
    assert elicitation["params"]["requestedSchema"]["required"] == ["command"]

    # The answer travels on the client's plain connection, not on the stream's.
    answer = client.post(
        {"jsonrpc": "2.0", "id": elicitation["id"], "result": {"action": "accept", "content": {"command": "help"}}},
        headers={"Mcp-Session-Id": client.session_id},
    )
    assert answer.status_code == 202, answer.text

    final = stream.next_message()
    assert final is not None and final["id"] == call["id"], final
    assert final["result"]["isError"] is False, final
    assert "server status" in final["result"]["content"][0]["text"]
    assert stream.next_message() is None and stream.ended, "the result must be the stream's last event"


def test_trailing_slash_reaches_the_endpoint(site):
    """``/mcp/`` is the endpoint too: a session starts there and runs a command."""
    server, _, _ = site
    client = server.client()
    client.url = server.base + "/mcp/"
    init = client.initialize()
    assert init.status_code == 200, init.text
    assert "server status" in client.command_text("help")


def test_modern_eliciting_call_through_the_mount(site):
    """A 2026-07-28 eliciting call through the mount: input_required with a requestState, then the retry completes."""
    server, _, _ = site
    client = ModernClient(server.url)
    first = client.ask_command()
    assert first["inputRequests"]["command"]["params"]["requestedSchema"]["required"] == ["command"]

    final = client.answer_command(first, "help")
    assert final.get("resultType") == "complete" and final.get("isError") is False, final
    assert "server status" in final["content"][0]["text"]


def test_client_without_elicitation_gets_missing_argument_through_the_mount(site):
    """Without the capability, ze_execute {} is a plain JSON isError result in both eras: nothing is asked."""
    server, _, _ = site
    session = server.session(elicitation=False)
    response, stream = session.open_stream(session.call_message({}))
    assert response.status_code == 200 and stream is None
    assert response.headers["Content-Type"].startswith("application/json")
    result = response.json()["result"]
    assert result["isError"] is True and result["content"][0]["text"] == MISSING, result

    modern = ModernClient(server.url, capabilities={})
    response, reply = modern.call({})
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("application/json")
    result = reply["result"]
    assert result.get("resultType") == "complete", result
    assert result["isError"] is True and result["content"][0]["text"] == MISSING, result
