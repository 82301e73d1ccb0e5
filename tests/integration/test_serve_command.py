"""``zemcp run``: serving a file or module over HTTP through gunicorn's application API, with
the thread budget and worker of ``gunicorn -c gunicorn.conf.py``; and its refusals."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest
import requests
from click.testing import CliRunner

from tests.support import REPO
from tests.support.clients import ACCEPT
from tests.support.net import CONNECT_TIMEOUT, HOST, READ_TIMEOUT, free_port
from tests.support.processes import stop_group
from zemcp.cli.serve import main
from zemcp.state.session import fingerprint

START_TIMEOUT = 20


@pytest.fixture
def serve(tmp_path):
    """Start ``python -m zemcp run ARGS`` on a free port; returns its URL and log path; stops it after."""
    procs = []

    def start(*args: str) -> tuple[str, object]:
        port = free_port()
        log = tmp_path / f"run-{port}.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "zemcp", "run", *args, "--bind", f"{HOST}:{port}"],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(proc)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            try:
                socket.create_connection((HOST, port), timeout=0.5).close()
                return f"http://{HOST}:{port}/mcp", log
            except OSError:
                time.sleep(0.05)
        pytest.fail(f"zemcp run did not listen within {START_TIMEOUT} s:\n{log.read_text()}")

    yield start
    for proc in procs:
        stop_group(proc, 10)


def post(url, message, headers=None, **kw):
    return requests.post(
        url, json=message, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), headers={"Accept": ACCEPT, **(headers or {})}, **kw
    )


def session(url) -> dict:
    r = post(
        url,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "run", "version": "1"},
            },
        },
    )
    assert r.status_code == 200, r.text
    headers = {"Mcp-Session-Id": r.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-06-18"}
    assert post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers).status_code == 202
    return headers


def test_run_serves_a_file_with_the_gthread_worker_and_its_thread_budget(serve):
    """`zemcp run examples/hello.py --threads 8` elicits over HTTP; the reference server run the
    same way reports the budget of 8 threads, and the log names zemcp's worker."""
    url, log = serve("examples/hello.py", "--threads", "8")
    headers = session(url)
    with post(
        url,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "greet", "arguments": {}}},
        headers,
        stream=True,
    ) as stream:
        assert stream.headers["Content-Type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        ask = next(json.loads(line[6:]) for line in lines if line.startswith(b"data: "))
        assert ask["params"]["message"] == "Whom should I greet?"
        answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
        assert post(url, answer, headers).status_code == 202
        final = next(json.loads(line[6:]) for line in lines if line.startswith(b"data: "))
        assert final["result"]["content"][0]["text"] == "Hello, Ada!"
    assert "Using worker: zemcp.http.worker.ThreadWorker" in log.read_text()
    url, _ = serve("wsgi:app", "--threads", "8")
    headers = session(url)
    r = post(
        url,
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "ze_execute", "arguments": {"command": "server status"}},
        },
        headers,
    )
    assert "thread budget: 8 threads" in r.json()["result"]["content"][0]["text"]


def test_run_writes_json_lines_under_zemcp_log_format_json(serve, monkeypatch, tmp_path):
    """Every line `zemcp run` writes over HTTP is one JSON object: gunicorn's, the endpoint's,
    zemcp's, those logged while the target is imported (in the master) too."""
    monkeypatch.setenv("ZEMCP_LOG_FORMAT", "json")
    target = tmp_path / "noisy.py"
    target.write_text(
        "import logging\nimport wsgi\n\nlogging.getLogger('zemcp.noisy').warning('imported')\napp = wsgi.app\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    url, log = serve(f"{target}:app")
    session_id = session(url)["Mcp-Session-Id"]
    deadline = time.monotonic() + 5
    while "session_initialized" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    messages = {record["message"]: record for record in records}
    assert messages[f"zemcp: MCP endpoint at {url}"]["logger"] == "gunicorn.error"
    assert "Using worker: zemcp.http.worker.ThreadWorker" in messages
    assert (messages["imported"]["event"], messages["imported"]["level"]) == ("noisy", "warning")
    [initialized] = [record for record in records if record["event"] == "session_initialized"]
    assert initialized["session"] == fingerprint(session_id)
    assert session_id not in log.read_text()


@pytest.mark.parametrize(
    "target, error",
    [
        ("nosuch.py", "no such file: nosuch.py"),
        ("nosuch_module_xyz", "no module named 'nosuch_module_xyz'"),
        ("json", "json holds no zemcp.McpApp or zemcp.Server at its top level"),
        ("wsgi:create_app", "wsgi has no McpApp or Server named 'create_app' (found function)"),
    ],
)
def test_run_refuses_targets_it_cannot_serve(target, error, monkeypatch):
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(main, ["run", target])
    assert result.exit_code == 1 and error in result.output, result.output


def test_run_help_explains_every_option():
    text = CliRunner().invoke(main, ["run", "--help"]).output
    for option in ("--transport", "--bind", "--threads", "--workers", "--log-level", "--reload"):
        assert option in text, text


def test_reload_serves_the_edited_file(serve, tmp_path):
    """With --reload, an edit of the served file reaches the next requests."""
    target = tmp_path / "reloaded.py"
    source = (REPO / "examples" / "hello.py").read_text()
    target.write_text(source)
    url, log = serve(str(target), "--reload")
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": "Ada"}},
    }
    assert post(url, call, session(url)).json()["result"]["content"][0]["text"] == "Hello, Ada!"
    edited = source.replace('f"Hello, ', 'f"Welcome, ')
    target.write_text(edited)
    deadline = time.monotonic() + START_TIMEOUT
    written = time.monotonic()
    text = None
    while time.monotonic() < deadline:
        if time.monotonic() - written > 3:
            # The reloader takes a file's first time stamp when its first scan reaches it; an
            # edit made before that is its baseline. Writing again gives it a newer one.
            target.write_text(edited)
            written = time.monotonic()
        try:
            text = post(url, call, session(url)).json()["result"]["content"][0]["text"]
        except (requests.RequestException, AssertionError, KeyError):
            text = None  # the worker is restarting
        if text == "Welcome, Ada!":
            break
        time.sleep(0.3)
    assert text == "Welcome, Ada!", log.read_text()


def test_the_rooms_example_asks_for_what_the_call_left_out(serve):
    """examples/rooms.py (docs/elicitation.md): book(nights=2) asks one form for city and size."""
    url, _ = serve("examples/rooms.py")
    r = post(
        url,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "run", "version": "1"},
            },
        },
    )
    headers = {"Mcp-Session-Id": r.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
    assert post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers).status_code == 202
    with post(
        url,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "book", "arguments": {"nights": 2}}},
        headers,
        stream=True,
    ) as stream:
        lines = stream.iter_lines()
        ask = next(json.loads(line[6:]) for line in lines if line.startswith(b"data: "))
        assert ask["params"]["message"] == "Book a room needs: city, size"
        assert ask["params"]["requestedSchema"]["required"] == ["city", "size"]
        answer = {
            "jsonrpc": "2.0",
            "id": ask["id"],
            "result": {"action": "accept", "content": {"city": "Oslo", "size": "l"}},
        }
        assert post(url, answer, headers).status_code == 202
        final = next(json.loads(line[6:]) for line in lines if line.startswith(b"data: "))
        assert final["result"]["content"][0]["text"] == "2 night(s) in Oslo, size l"


@pytest.mark.parametrize("command", ["gunicorn", "zemcp run"])
def test_a_malformed_variable_stops_the_server_with_one_line_naming_it(command):
    """gunicorn with the repository's config, and zemcp run, refuse a malformed ZEMCP_* variable
    with the one line that names it and the form expected, and no traceback."""
    args = {
        "gunicorn": [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"],
        "zemcp run": [sys.executable, "-m", "zemcp", "run", "wsgi.py"],
    }[command]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZEMCP_")}
    env.update(ZEMCP_SESSION_TTL="abc", ZEMCP_BIND=f"{HOST}:{free_port()}", PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(args, cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "Error: ZEMCP_SESSION_TTL='abc' is not a number of seconds" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
