"""The MCP endpoint as a view of a real Django site (``zemcp.django.view``), served by gunicorn.

tests/apps/django_site routes ``/site/mcp`` to ``zemcp.django.view`` of the reference server,
behind Django's stock middleware (SecurityMiddleware, CommonMiddleware, CsrfViewMiddleware,
XFrameOptionsMiddleware) and a middleware of the site's own that marks every response it
sees. An eliciting call completes through the view in both eras, its event stream passing
through the middleware; a POST without a CSRF token is served; the site's ``ALLOWED_HOSTS``,
not zemcp's loopback Host rule, decides which hosts are served.
"""

import importlib.util
import time

import pytest
import requests

from tests.support.apphost import APP_MIME_TYPE, APPS_CAPABILITIES, EXTENSION_ID
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


#: The view that reads tokens the site issued (a DRF authentication class, then a callable).
TOKEN_VIEW = "/site/mcp-token"


def _post(url: str, message: dict, headers: dict) -> requests.Response:
    with requests.Session() as http:
        return http.post(
            url, json=message, headers=headers, allow_redirects=False, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)
        )


def test_login_required_middleware_redirects_pages_but_never_an_mcp_client(site):
    with requests.Session() as http:
        page = http.get(site.base + "/account", allow_redirects=False, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    assert page.status_code == 302 and "/accounts/login/" in page.headers["Location"], "the site's pages need a login"

    # The endpoint that says login_required=False serves an anonymous client.
    assert handshake_session(site.base + VIEW).list_tools()
    # view() under LoginRequiredMiddleware needs a user: 401, not the login page; a user is served.
    anonymous = HandshakeClient(site.base + "/site/mcp-login").initialize()
    assert anonymous.status_code == 401 and anonymous.headers["WWW-Authenticate"] == "Bearer", anonymous.text
    signed_in = HandshakeClient(site.base + "/site/mcp-login", headers={"X-Site-User": "carol"})
    assert signed_in.initialize().status_code == 200

    # The endpoint that needs a user answers 401 with the site's challenges, never a redirect.
    client = HandshakeClient(site.base + TOKEN_VIEW)
    initialize = client.initialize()
    assert initialize.status_code == 401, initialize.text
    assert initialize.headers["WWW-Authenticate"] == "SiteToken, Bearer"
    error = initialize.json()["error"]
    assert error["code"] == -32600 and "needs a user; send the token the site issued you" in error["message"]
    modern = ModernClient(site.base + TOKEN_VIEW)
    ping = modern.message("tools/list", {})
    assert _post(modern.url, ping, modern.headers(ping)).status_code == 401


@pytest.mark.parametrize(
    ("credentials", "user"),
    [
        ({"Authorization": "Bearer alice-token"}, "alice"),  # the plain callable
        ({"X-Site-Token": "alice-token"}, "alice"),  # the DRF authentication class
    ],
    ids=["callable", "drf"],
)
def test_a_token_the_site_issued_names_the_user_in_both_eras(site, credentials, user):
    client = HandshakeClient(site.base + TOKEN_VIEW, headers=credentials)
    assert client.initialize().status_code == 200
    assert client.rpc("tools/call", {"name": "whoami", "arguments": {}})["content"][0]["text"] == (
        f"{user} at {TOKEN_VIEW}"
    )
    assert "payroll" in {tool["name"] for tool in client.list_tools()}

    modern = ModernClient(site.base + TOKEN_VIEW)
    _, response = modern.call_tool("whoami", headers=credentials)
    assert modern.result(response)["content"][0]["text"] == f"{user} at {TOKEN_VIEW}"
    first = modern.ask_command(headers=credentials)
    final = modern.answer_command(first, "help", headers=credentials)
    assert final.get("resultType") == "complete" and final.get("isError") is False, final


def test_a_token_the_site_refuses_is_answered_401_with_why(site):
    client = HandshakeClient(site.base + TOKEN_VIEW, headers={"X-Site-Token": "stolen"})
    refused = client.initialize()
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"] == "SiteToken, Bearer"
    assert refused.json()["error"]["message"] == "Unauthorized: unknown site token"


def test_permissions_follow_the_tokens_user(site):
    bob = HandshakeClient(site.base + TOKEN_VIEW, headers={"Authorization": "Bearer bob-token"})
    assert bob.initialize().status_code == 200
    assert "payroll" not in {tool["name"] for tool in bob.list_tools()}
    assert bob.rpc_error("tools/call", {"name": "payroll", "arguments": {}})["message"].startswith(
        "Unknown tool: 'payroll'"
    )


def test_a_session_belongs_to_the_user_whose_token_opened_it(site):
    alice = HandshakeClient(site.base + TOKEN_VIEW, headers={"Authorization": "Bearer alice-token"})
    assert alice.initialize().status_code == 200
    # bob, with alice's session id: the session is unknown to him.
    bob = HandshakeClient(site.base + TOKEN_VIEW, headers={"Authorization": "Bearer bob-token"})
    bob.session_id = alice.session_id
    bob.protocol_version = alice.protocol_version
    stolen = bob.post(bob.call_message({}, name="whoami"))
    assert stolen.status_code == 404, stolen.text
    # alice still uses it.
    assert alice.rpc("tools/call", {"name": "whoami", "arguments": {}})["content"][0]["text"].startswith("alice")


def test_an_installed_apps_mcp_module_registers_its_tools_on_the_sites_server(site):
    client = handshake_session(site.base + VIEW)
    assert "catalogue_search" in {tool["name"] for tool in client.list_tools()}
    found = client.rpc("tools/call", {"name": "catalogue_search", "arguments": {"query": "u"}})
    assert found["content"][0]["text"] == '["Dune", "Ulysses"]'


def test_an_app_resource_renders_the_sites_template_at_each_read(site):
    client = handshake_session(site.base + VIEW, capabilities=APPS_CAPABILITIES)
    assert client.wire.json(client.init_response)["result"]["capabilities"]["extensions"] == {EXTENSION_ID: {}}
    tools = {tool["name"]: tool for tool in client.list_tools()}
    assert tools["catalogue_card"]["_meta"] == {"ui": {"resourceUri": "ui://catalogue/card.html"}}
    (content,) = client.rpc("resources/read", {"uri": "ui://catalogue/card.html"})["contents"]
    assert content["mimeType"] == APP_MIME_TYPE
    assert "<ul><li>Dune</li><li>Emma</li><li>Ulysses</li></ul>" in content["text"]


@pytest.mark.parametrize(("origin", "status"), [("https://pages.example.test", 200), ("https://elsewhere.test", 403)])
def test_settings_zemcp_configures_the_sites_server(site, origin, status):
    """settings.ZEMCP["ALLOWED_ORIGINS"] lets pages of that origin call the endpoint; others are refused."""
    modern = ModernClient(site.base + VIEW)
    ping = modern.message("tools/list", {})
    response = _post(modern.url, ping, {**modern.headers(ping), "Origin": origin})
    assert response.status_code == status, response.text


TASKS = {"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}


def test_a_task_belongs_to_the_user_who_created_it_and_runs_for_that_user_without_a_request(site):
    alice, bob = {"Authorization": "Bearer alice-token"}, {"Authorization": "Bearer bob-token"}
    client = ModernClient(site.base + TOKEN_VIEW, capabilities=TASKS)
    _, created = client.call({}, name="report", headers=alice)
    task = created["result"]
    assert task["resultType"] == "task", task

    def get(headers: dict) -> dict:
        message = client.message("tasks/get", {"taskId": task["taskId"]})
        return client.reply(client.post(message, headers=headers), message["id"])

    refused = get(bob)
    assert refused["error"]["code"] == -32602, refused
    deadline = time.monotonic() + 10
    while (found := get(alice)["result"])["status"] == "working" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert found["status"] == "completed", found
    assert found["result"]["content"][0]["text"] == "report for alice, request None"


def test_a_page_of_the_site_itself_may_call_the_endpoint_other_origins_are_refused(site):
    """Same origin as the request's own Host (which ALLOWED_HOSTS judged): served without being
    listed in ALLOWED_ORIGINS; another origin is refused 403, and a 401 to an allowed page
    carries CORS headers so that the page can read its challenge."""
    modern = ModernClient(site.base + VIEW)
    ping = modern.message("tools/list", {})
    host = site.base.removeprefix("http://")
    same = _post(modern.url, ping, {**modern.headers(ping), "Origin": f"http://{host}"})
    assert same.status_code == 200, same.text
    other = _post(modern.url, ping, {**modern.headers(ping), "Origin": "http://elsewhere.test"})
    assert other.status_code == 403 and "ALLOWED_ORIGINS in a Django or Flask site's ZEMCP settings" in other.text
    token = ModernClient(site.base + TOKEN_VIEW)
    refused = _post(token.url, ping, {**token.headers(ping), "Origin": "https://pages.example.test"})
    assert refused.status_code == 401, refused.text
    assert refused.headers["Access-Control-Allow-Origin"] == "https://pages.example.test", refused.headers
    with requests.Session() as http:
        preflight = http.options(
            site.base + TOKEN_VIEW,
            headers={"Origin": "https://pages.example.test", "Access-Control-Request-Method": "POST"},
            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
        )
    assert preflight.status_code == 204, (preflight.status_code, preflight.text)
