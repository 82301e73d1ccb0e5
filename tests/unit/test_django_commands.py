"""``manage.py zemcp`` on the test Django site (tests/apps/django_site), each run in a process of
its own (Django's settings are process-wide): inspect, call, and their errors."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.support import REPO

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("django") is None, reason="django is not installed (pip install 'zemcp[django]')"
)


def manage(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.apps.django_site.settings", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "django", "zemcp", *args], capture_output=True, text=True, timeout=60, cwd=REPO, env=env
    )


def test_inspect_lists_the_sites_server_with_the_tools_of_its_apps_and_their_permissions():
    done = manage("inspect")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("zemcp-reference "), done.stdout
    assert (
        "  payroll: For users with the site.view_payroll permission.\n    permission: site.view_payroll\n"
        in done.stdout
    )
    # From the catalogue app's mcp.py, found as the admin finds admin.py.
    assert "  catalogue_search: Search the catalogue" in done.stdout
    described = json.loads(manage("inspect", "--json").stdout)
    assert {tool["name"]: tool["permission"] for tool in described["tools"]} == {
        "ze_execute": None,
        "whoami": None,
        "payroll": "site.view_payroll",
        "report": None,
        "catalogue_search": None,
        "catalogue_size": None,
        "catalogue_card": None,
    }


def test_call_prints_a_tools_result():
    done = manage("call", "catalogue_search", '{"query": "u"}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["content"][0]["text"] == '["Dune", "Ulysses"]'


def test_call_runs_an_async_tool_to_its_end():
    done = manage("call", "catalogue_size")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["content"][0]["text"] == "3"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("call", "payroll"), "CommandError: Unknown tool: 'payroll'; tools/list names the available tools"),
        (("inspect", "whoami"), "CommandError: inspect does not take TOOL (manage.py zemcp --help)"),
        (("stdio", "--json"), "CommandError: stdio does not take --json (manage.py zemcp --help)"),
        (("call",), "CommandError: call needs the TOOL to call"),
        (("call", "whoami", "[1]"), "CommandError: ARGUMENTS is a JSON list: give an object"),
        (("call", "whoami", "{"), "CommandError: ARGUMENTS is not JSON"),
        (("call", "ze_execute", '{"command": "no such command"}'), "answered a tool error (isError), printed above"),
    ],
)
def test_call_says_what_went_wrong(args, message):
    done = manage(*args)
    assert done.returncode == 1 and message in done.stderr, (done.stdout, done.stderr)


SITE_CHECKS = r"""
import json, sys
import django
from django.conf import settings
settings.configure(ZEMCP=json.loads(sys.argv[1]), INSTALLED_APPS=[], ROOT_URLCONF=__name__, SETTINGS_MODULE="shop.settings")
django.setup()
import zemcp, zemcp.django
try:
    if sys.argv[2] == "settings":
        print(zemcp.django.settings().max_sessions)
    elif sys.argv[2] == "server":
        print(zemcp.django.server.name, zemcp.django.server.settings.max_sessions)
    elif sys.argv[2] == "site-view":
        zemcp.django.view()
        print("served")
    elif sys.argv[2] == "unmade-view":
        from django.http import HttpRequest
        zemcp.django.view(HttpRequest())
    else:
        zemcp.django.view(zemcp.Server("other", settings=zemcp.Settings(max_sessions=8)))
        print("served")
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def site(zemcp_settings: object, what: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SITE_CHECKS, json.dumps(zemcp_settings), what],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("ZEMCP_")}, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_settings_zemcp_sets_the_sites_server_named_after_the_project():
    assert site({"MAX_SESSIONS": 12}, "settings") == "12"
    assert site({"MAX_SESSIONS": 12}, "server") == "shop 12"


@pytest.mark.parametrize(
    ("zemcp_settings", "what", "message"),
    [
        (
            {"THREAD": 12},
            "settings",
            "ImproperlyConfigured settings.ZEMCP has no setting 'THREAD': did you mean 'THREADS'?",
        ),
        (
            {"MAX_SESSIONS": "many"},
            "settings",
            "ImproperlyConfigured settings.ZEMCP['MAX_SESSIONS']='many' is not a whole number",
        ),
        (["THREADS"], "settings", "ImproperlyConfigured settings.ZEMCP is a list: make it a dict"),
        (
            {"SERVER": "shop.nowhere.server"},
            "server",
            "ImproperlyConfigured settings.ZEMCP['SERVER']='shop.nowhere.server' does not import",
        ),
        (
            {"SERVER": "json.dumps"},
            "server",
            "ImproperlyConfigured settings.ZEMCP['SERVER']='json.dumps' is a function, not a zemcp.Server",
        ),
        (
            {"MAX_SESSIONS": 12},
            "view",
            "ImproperlyConfigured the server 'other' was built with other settings than settings.ZEMCP and the ZEMCP_* "
            "variables give (MAX_SESSIONS differ): build it with zemcp.Server(..., settings=zemcp.django.settings())",
        ),
        (
            {},
            "site-view",
            "ImproperlyConfigured zemcp.django.view() serves the site's server, whose tools the installed apps' mcp.py "
            'register: add "zemcp.django" to INSTALLED_APPS',
        ),
        (
            {},
            "unmade-view",
            "TypeError zemcp.django.view makes the view: route zemcp.django.view() (or view(server)), not "
            "zemcp.django.view",
        ),
    ],
)
def test_a_sites_zemcp_settings_that_cannot_be_used_say_why(zemcp_settings, what, message):
    assert site(zemcp_settings, what).startswith(message)
