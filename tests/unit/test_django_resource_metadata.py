"""zemcp's own OAuth authorization behind a Django view under a path prefix (``FORCE_SCRIPT_NAME``):
the challenge names the metadata of the resource URL with the prefix, the site serves that
document with ``zemcp.django.metadata_view``, and a resource URL without the prefix is said
once in the log. Each case runs Django's test client in a process of its own (Django's
settings are process-wide)."""

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

SITE = r"""
import json, logging, sys
import django
from django.conf import settings
from django.urls import path

resource = sys.argv[1]
settings.configure(
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["zemcp.django"],
    ALLOWED_HOSTS=["testserver"],
    FORCE_SCRIPT_NAME="/app",
    MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
    ZEMCP={
        "AUTH": "introspection",
        "AUTH_RESOURCE": resource,
        "AUTH_ISSUER": "https://as.example.test",
        # Never asked: no request here carries a token.
        "AUTH_INTROSPECTION_URL": "https://as.example.test/introspect",
        "AUTH_CLIENT_ID": "site",
    },
)
django.setup()
import zemcp.django
from django.test import Client

urlpatterns = [
    path("mcp", zemcp.django.view()),
    path(".well-known/oauth-protected-resource/app/mcp", zemcp.django.metadata_view()),
]
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
client = Client()
call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
refused = client.post(
    "/mcp", json.dumps(call), content_type="application/json", headers={"Accept": "application/json, text/event-stream"}
)
client.post("/mcp", json.dumps(call), content_type="application/json", headers={"Accept": "application/json, text/event-stream"})
document = client.get("/.well-known/oauth-protected-resource/app/mcp")
print(json.dumps({
    "status": refused.status_code,
    "challenge": refused.headers.get("WWW-Authenticate"),
    "metadata_status": document.status_code,
    "metadata": document.json() if document.status_code == 200 else None,
}))
"""


def serve(resource: str) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZEMCP_")}
    done = subprocess.run(
        [sys.executable, "-c", SITE, resource],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_the_challenge_and_the_metadata_name_the_resource_with_the_sites_prefix():
    seen, log = serve("http://testserver/app/mcp")
    assert seen["status"] == 401
    assert 'resource_metadata="http://testserver/.well-known/oauth-protected-resource/app/mcp"' in seen["challenge"]
    assert seen["metadata_status"] == 200
    assert seen["metadata"]["resource"] == "http://testserver/app/mcp"
    assert seen["metadata"]["authorization_servers"] == ["https://as.example.test"]
    assert "the MCP endpoint is served at" not in log


def test_a_resource_url_without_the_prefix_is_said_once():
    seen, log = serve("http://testserver/mcp")
    assert seen["status"] == 401
    assert (
        log.count(
            "the MCP endpoint is served at /app/mcp but the resource URL (ZEMCP_AUTH_RESOURCE) is "
            "http://testserver/mcp, whose path is /mcp"
        )
        == 1
    ), log
