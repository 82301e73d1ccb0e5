"""The MCP endpoint as a view of a real Django site (``zemcp.django.view``), served by gunicorn.

tests/apps/django_site routes ``/site/mcp`` to ``zemcp.django.view`` of the reference server,
behind Django's stock middleware (SecurityMiddleware, CommonMiddleware, CsrfViewMiddleware,
XFrameOptionsMiddleware) and a middleware of the site's own that marks every response it
sees. An eliciting call completes through the view in both eras, its event stream passing
through the middleware; a POST without a CSRF token is served; the site's ``ALLOWED_HOSTS``,
not zemcp's loopback Host rule, decides which hosts are served.
"""

import importlib.util

import pytest
import requests

from tests.support.clients import HandshakeClient, ModernClient, handshake_session
from tests.support.net import CONNECT_TIMEOUT, READ_TIMEOUT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("django") is None, reason="django is not installed (pip install 'zemcp[django]')"
)

#: Response header the site's own middleware adds to every response it sees.
SITE_HEADER = "X-Served-By"
#: The view's path in the site's URLconf.
VIEW = "/site/mcp"


@pytest.fixture
def site(start_server):
    """gunicorn serving the Django site (``-c gunicorn.conf.py``, zemcp's worker)."""
    return start_server(app="tests.apps.django_site.wsgi:application")


def test_a_handshake_eliciting_call_streams_through_the_sites_middleware(site):
    client = handshake_session(site.base + VIEW, protocol_version="2025-06-18")
    init = client.init_response
    assert init.headers.get(SITE_HEADER) == "django", "the site's middleware runs on MCP requests"
    # Django's own middleware ran too (XFrameOptionsMiddleware's header).
    assert init.headers.get("X-Frame-Options") == "DENY", init.headers

    call, response, stream, elicitation = client.start_elicitation()
    assert response.headers["Content-Type"].split(";")[0].strip() == "text/event-stream"
    assert response.headers.get(SITE_HEADER) == "django", "the event stream passes through the middleware"
    assert elicitation["params"]["requestedSchema"]["required"] == ["command"]
    # No CSRF token anywhere: the view is exempt.
    answer = client.accept(elicitation["id"], {"command": "help"})
    assert answer.status_code == 202, answer.text
    final = stream.next_message()
    assert final is not None and final["id"] == call["id"] and final["result"]["isError"] is False, final
    assert "server status" in final["result"]["content"][0]["text"]
    assert stream.next_message() is None and stream.ended


def test_a_2026_eliciting_call_completes_through_the_view(site):
    client = ModernClient(site.base + VIEW)
    first = client.ask_command()
    assert first["inputRequests"]["command"]["params"]["requestedSchema"]["required"] == ["command"]
    final = client.answer_command(first, "help")
    assert final.get("resultType") == "complete" and final.get("isError") is False, final


@pytest.mark.parametrize(("host", "status"), [("mcp.example.test", 200), ("elsewhere.example", 400)])
def test_the_sites_allowed_hosts_decide_which_hosts_are_served(site, host, status):
    """A host the site allows is served, though zemcp's own rule for a loopback bind refuses it
    at the mount beside the site; one the site does not allow gets Django's 400."""
    ping = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": ModernClient(site.url).meta()}}
    headers = {**ModernClient(site.url).headers(ping), "Host": host}
    with requests.Session() as http:
        response = http.post(site.base + VIEW, json=ping, headers=headers, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    assert response.status_code == status, response.text
    if status == 200:
        assert response.json()["result"]["resultType"] == "complete"
    # The same Host at the mount beside the site (zemcp's own check, loopback bind) is refused.
    with requests.Session() as http:
        mounted = http.post(site.url, json=ping, headers=headers, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    assert mounted.status_code == 403 and "not a loopback name" in mounted.text, mounted.text


def test_handlers_see_the_sites_user_and_request_and_permissions_follow_the_user(site):
    anonymous = handshake_session(site.base + VIEW)
    assert "payroll" not in {tool["name"] for tool in anonymous.list_tools()}
    unknown = anonymous.rpc_error("tools/call", {"name": "payroll", "arguments": {}})
    assert unknown["message"] == "Unknown tool: 'payroll'; tools/list names the available tools", unknown
    assert anonymous.rpc("tools/call", {"name": "whoami", "arguments": {}})["content"][0]["text"] == (
        "anonymous at /site/mcp"
    )

    alice = {"X-Site-User": "alice", "X-Site-Permissions": "site.view_payroll"}
    client = HandshakeClient(site.base + VIEW, headers=alice)
    assert client.initialize().status_code == 200
    assert "payroll" in {tool["name"] for tool in client.list_tools()}
    assert client.rpc("tools/call", {"name": "payroll", "arguments": {}})["content"][0]["text"] == "the payroll"
    assert client.rpc("tools/call", {"name": "whoami", "arguments": {}})["content"][0]["text"] == "alice at /site/mcp"

    modern = ModernClient(site.base + VIEW)
    request_id, response = modern.call_tool("whoami", headers=alice)
    assert modern.result(response)["content"][0]["text"] == "alice at /site/mcp"
    request_id, response = modern.call_tool("payroll", headers={"X-Site-User": "bob"})
    assert modern.error(response, 400, -32602)["message"].startswith("Unknown tool: 'payroll'")
