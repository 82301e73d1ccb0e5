"""The settings in deploy/ fit together, and deploy/render.py refuses what it cannot render.

These read the files only; no proxy needs to be installed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from types import ModuleType

import pytest

import zemcp
from tests.support.proxies import DEPLOY
from zemcp.state import workers
from zemcp.state.session import Session

#: A requestState key for the instance configuration (every instance needs one, the same).
KEY = "k" * 43
#: The largest pid Linux hands out (PID_MAX_LIMIT on 64-bit systems).
LINUX_PID_MAX = 4194304


def load_instance_config(monkeypatch: pytest.MonkeyPatch, **env: str) -> ModuleType:
    """Execute deploy/gunicorn-instance.conf.py as gunicorn would, with ``env`` as the only ZEMCP_* variables."""
    for name in [n for n in os.environ if n.startswith("ZEMCP_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location("zemcp_gunicorn_instance", DEPLOY / "gunicorn-instance.conf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seconds(directive: str, text: str) -> list[int]:
    """Every ``<directive> <N>s`` value in ``text``, in order."""
    return [int(n) for n in re.findall(rf"^\s*{directive}\s+(\d+)s\b", text, re.M)]


def test_timeouts_and_keepalives_fit_together(monkeypatch):
    """Proxy silence limits leave room for two keep-alive comments; gunicorn outlasts the proxies' idle connections."""
    conf = load_instance_config(monkeypatch, ZEMCP_INSTANCE="a", ZEMCP_REQUEST_STATE_KEY=KEY)
    defaults = zemcp.Settings()
    nginx = (DEPLOY / "nginx.conf").read_text()
    haproxy = (DEPLOY / "haproxy.cfg").read_text()

    assert seconds("proxy_read_timeout", nginx) == [conf.PROXY_READ_TIMEOUT]
    assert seconds(r"timeout (?:client|server)", haproxy) == [conf.PROXY_READ_TIMEOUT] * 2
    assert defaults.keepalive_interval * 2 <= conf.PROXY_READ_TIMEOUT

    upstream_idle = re.findall(r"keepalive_timeout (\d+)s;", nginx)
    assert upstream_idle and {int(s) for s in upstream_idle} == {conf.PROXY_UPSTREAM_IDLE}
    assert conf.keepalive > conf.PROXY_UPSTREAM_IDLE
    assert conf.workers == 1

    expire = re.search(r"^\s*stick-table .* expire (\d+)h\b", haproxy, re.M)
    assert expire and int(expire.group(1)) * 3600 > defaults.session_ttl


def test_the_longest_session_id_fits_the_stick_table():
    """An id of the longest instance name, made by the largest Linux pid, fits HAProxy's stick-table key length."""
    haproxy = (DEPLOY / "haproxy.cfg").read_text()
    key_length = re.search(r"^\s*stick-table type string len (\d+)\b", haproxy, re.M)
    made_here = Session("2025-11-25", {}, {}, "n" * 40).id
    longest = len(made_here) - len(workers.tag()) + len(workers.tag(LINUX_PID_MAX))
    assert key_length and longest <= int(key_length.group(1)), (longest, key_length)


@pytest.mark.parametrize(
    "env, message",
    [
        ({"ZEMCP_REQUEST_STATE_KEY": KEY}, "ZEMCP_INSTANCE is not set"),
        ({"ZEMCP_INSTANCE": "a"}, "ZEMCP_REQUEST_STATE_KEY is not set"),
        (
            {"ZEMCP_INSTANCE": "a", "ZEMCP_REQUEST_STATE_KEY": KEY, "ZEMCP_KEEPALIVE_INTERVAL": "45"},
            "ZEMCP_KEEPALIVE_INTERVAL=45 is too long",
        ),
    ],
)
def test_instance_config_refuses_settings_that_break_routing(monkeypatch, env, message):
    """Without a fixed name, a shared requestState key, or with keep-alive comments too rare for the proxies, gunicorn does not start."""
    with pytest.raises(ValueError, match=message):
        load_instance_config(monkeypatch, **env)


def run_render(*args: str, template: str = "nginx.conf") -> subprocess.CompletedProcess:
    """``python deploy/render.py deploy/<template> ARGS...``."""
    return subprocess.run(
        [sys.executable, str(DEPLOY / "render.py"), str(DEPLOY / template), *args], capture_output=True, text=True
    )


def directives(text: str) -> list[str]:
    """The directives of an nginx file, one per line as written, without comments and indentation."""
    lines = (line.partition("#")[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


#: The directives of deploy/nginx.conf that make streams and upstream keep-alive work.
STREAMING = (
    "proxy_http_version",
    "proxy_set_header",
    "proxy_buffering",
    "gzip",
    "proxy_read_timeout",
    "proxy_send_timeout",
    "proxy_connect_timeout",
    "client_max_body_size",
    "keepalive",
    "keepalive_timeout",
)


def test_roundrobin_nginx_keeps_the_streaming_settings_and_routes_nothing():
    """deploy/nginx-roundrobin.conf has every streaming and keep-alive setting of deploy/nginx.conf,
    one round-robin upstream of all instances, and no routing by session id or fallback."""
    sticky = directives((DEPLOY / "nginx.conf").read_text())
    done = run_render(
        "--set",
        "LISTEN=127.0.0.1:8080",
        "--set",
        "LOG_DIR=/var/log/nginx",
        "--instance",
        "a=127.0.0.1:8001",
        "--instance",
        "b=127.0.0.1:8002",
        template="nginx-roundrobin.conf",
    )
    assert done.returncode == 0, done.stderr
    spread = directives(done.stdout)

    streaming = {d for d in sticky if d.split()[0] in STREAMING and "{" not in d}
    assert {d.split()[0] for d in streaming} == set(STREAMING), streaming
    assert streaming <= set(spread), sorted(streaming - set(spread))
    assert [d for d in spread if d.startswith("proxy_pass")] == ["proxy_pass http://zemcp_roundrobin;"]
    assert re.search(
        r"upstream zemcp_roundrobin \{\n\s*server 127\.0\.0\.1:8001;.*\n\s*server 127\.0\.0\.1:8002;", done.stdout
    ), done.stdout
    assert not [d for d in spread if d.startswith(("error_page", "proxy_next_upstream", "hash", "sticky"))], spread
    assert "{{" not in done.stdout


def test_render_repeats_instance_lines():
    """Every line naming an instance appears once per instance, in order."""
    done = run_render(
        "--set",
        "LISTEN=127.0.0.1:8080",
        "--set",
        "LOG_DIR=/var/log/nginx",
        "--instance",
        "a=127.0.0.1:8001",
        "--instance",
        "b-2=127.0.0.1:8002",
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"~\^a\\\. zemcp_a;\n\s*~\^b-2\\\. zemcp_b-2;", done.stdout), done.stdout
    assert "upstream zemcp_b-2 { server 127.0.0.1:8002;" in done.stdout
    assert "{{" not in done.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "LISTEN=127.0.0.1:8080", "--instance", "a=127.0.0.1:8001"], "no value for {{LOG_DIR}}"),
        (
            ["--set", "LISTEN=x:1", "--set", "LOG_DIR=/l", "--set", "LISTN=y", "--instance", "a=127.0.0.1:8001"],
            "no placeholder {{LISTN}}",
        ),
        (["--set", "LISTEN=x:1", "--set", "LOG_DIR=/l", "--instance", "a.1=127.0.0.1:8001"], "instance name 'a.1'"),
        (["--set", "LISTEN=x:1", "--set", "LOG_DIR=/l", "--instance", "a=8001"], "address '8001'"),
        (["--set", "LISTEN=x:1", "--set", "LOG_DIR=/l", "--instance", "a=h:1", "--instance", "a=h:2"], "given twice"),
        (["--set", "LISTEN=x:1", "--set", "LOG_DIR=/l"], "at least one --instance"),
    ],
)
def test_render_refuses_what_it_cannot_render(args, message):
    """A missing or unknown value, a bad instance name or address, or no instance: exit 2 and a specific message."""
    done = run_render(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert message in done.stderr, done.stderr
