"""Choosing the Redis backend: its settings, the optional extra, credentials kept out of sight,
and an unreachable Redis answered with 503 at once."""

import json
import subprocess
import sys
import time

import pytest
from werkzeug.test import Client

import zemcp
from tests.support import REPO
from tests.support.net import free_port
from zemcp import logsafe
from zemcp.config import Settings


def test_a_redis_url_chooses_the_redis_backend_and_memory_stays_the_default():
    assert Settings().state_backend == "memory"
    assert Settings(redis_url="redis://127.0.0.1:6379/0").state_backend == "redis"
    assert Settings(redis_url="redis://127.0.0.1:6379/0", state_backend="memory").state_backend == "memory"
    with pytest.raises(ValueError, match="needs redis_url"):
        Settings(state_backend="redis")


def test_a_bad_redis_url_or_prefix_is_refused_without_echoing_the_url():
    with pytest.raises(ValueError, match="must start with redis://") as info:
        Settings(redis_url="http://user:s3cret@host:6379")
    assert "s3cret" not in str(info.value)
    with pytest.raises(ValueError, match="redis_prefix"):
        Settings(redis_prefix="has space")
    settings = Settings(redis_url="redis://user:s3cret@127.0.0.1:6379/0")
    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize(
    "url, shown",
    [
        ("redis://user:s3cret@cache.internal:6380/2", "redis://cache.internal:6380/2"),
        ("rediss://:s3cret@[::1]:6379/0", "rediss://[::1]:6379/0"),
        ("redis://s3cret@cache.internal/0", "redis://cache.internal/0"),
        ("redis://cache.internal:6379/0?password=s3cret&username=user", "redis://cache.internal:6379/0"),
        ("unix://user:s3cret@/run/redis.sock?db=1", "unix:///run/redis.sock"),
        ("redis://user:s3cret@cache.internal:port/0", "redis://cache.internal/0"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ],
)
def test_messages_name_the_redis_without_its_credentials(url, shown):
    """The user name and password, in the URL or its query, never reach a message or a log line."""
    assert logsafe.without_credentials(url) == shown
    assert "s3cret" not in shown and "user" not in shown


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        # A bare environment, and no bytecode written into the checkout it imports zemcp from.
        env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_default_install_never_imports_redis():
    done = _python("import sys, zemcp; zemcp.Server('x'); print('redis' in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_rate_limits_without_a_redis_url_never_import_redis():
    code = (
        "import sys, zemcp\n"
        "from zemcp.eras.requestcontext import RequestContext\n"
        "from zemcp.pipeline.ratelimits import RateLimits\n"
        "from zemcp.protocol import jsonrpc\n"
        "settings = zemcp.Settings(rate_limit='5/minute', rate_limit_tools='x=1/s')\n"
        "limits = RateLimits(zemcp.Server('x', settings=settings), lambda message, context: None)\n"
        "limits(jsonrpc.Request(1, 'tools/list', {}), RequestContext('tcp', None, client='address a'))\n"
        "print('redis' in sys.modules)"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_without_the_extra_a_redis_url_says_what_to_install():
    blocked = "import sys; sys.modules['redis'] = None\nimport zemcp\ntry:\n    zemcp.Server('x')\nexcept ImportError as exc:\n    print(exc)"
    done = _python(blocked, ZEMCP_REDIS_URL="redis://127.0.0.1:6379/0")
    assert done.returncode == 0, done.stderr
    assert "pip install redis (or pip install '.[redis]' in a zemcp checkout)" in done.stdout, done.stdout


def test_an_unreachable_redis_is_a_503_at_once_and_2026_requests_go_on():
    pytest.importorskip("redis", reason="the redis package is not installed (pip install '.[redis]')")
    port = free_port()  # nothing listens there
    server = zemcp.Server("x", settings=Settings(redis_url=f"redis://:pw@127.0.0.1:{port}/0", redis_timeout=0.5))

    @server.tool
    def hello() -> str:
        return "hi"

    client = Client(zemcp.McpApp(server))
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    try:
        started = time.monotonic()
        response = client.post("/mcp", data=json.dumps(initialize), headers=headers)
        assert time.monotonic() - started < 2.5
        assert response.status_code == 503 and response.headers["Retry-After"] == "2", response.get_data(as_text=True)
        assert response.json["id"] == 1, response.json  # the request's id, read before the state was asked
        message = response.json["error"]["message"]
        assert f"redis://127.0.0.1:{port}/0" in message and "ZEMCP_REDIS_URL" in message and "pw" not in message
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        }
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hello", "_meta": meta}}
        modern = client.post(
            "/mcp",
            data=json.dumps(call),
            headers={**headers, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "hello"},
        )
        assert modern.status_code == 200 and modern.json["result"]["content"][0]["text"] == "hi", modern.json
    finally:
        server.sessions.close()


def test_redis_is_an_extra_not_a_requirement():
    import configparser

    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    assert "redis" not in setup["options"]["install_requires"]
    assert "redis" in setup["options.extras_require"]["redis"]


def test_refused_credentials_say_to_check_the_password_not_to_wait():
    redis = pytest.importorskip("redis", reason="the redis package is not installed (pip install '.[redis]')")
    from zemcp.state.redis.client import Redis

    client = Redis(Settings(redis_url="redis://:s3cret@127.0.0.1:6379/0"))
    try:
        message = str(client.unavailable(redis.AuthenticationError("invalid username-password pair")))
    finally:
        client.close()
    assert "refused this server's credentials" in message and "password in ZEMCP_REDIS_URL" in message
    assert "s3cret" not in message and "retry" not in message
