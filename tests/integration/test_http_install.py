"""The package as a user installs and runs it.

The README's quick start served from a directory that is not the checkout, so that gunicorn
imports the installed zemcp (under tox, the wheel tox built: every subpackage must be in it),
and a server that names a state backend it does not have, which must not start.
"""

import os
import shutil
import subprocess
import sys

from tests.support import REPO
from tests.support.gunicorn import DEFAULT_SERVER_SETTINGS, GunicornServer
from tests.support.net import HOST, free_port
from tests.support.processes import stop_group


def test_the_quick_start_serves_an_eliciting_call_from_outside_the_checkout(tmp_path, _log_dir):
    for name in ("wsgi.py", "gunicorn.conf.py"):
        shutil.copy(REPO / name, tmp_path / name)
    found = subprocess.run(
        [sys.executable, "-c", "import zemcp; print(zemcp.__file__)"],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert found.returncode == 0, f"zemcp is not importable outside the checkout: {found.stderr}"
    server = GunicornServer(DEFAULT_SERVER_SETTINGS, _log_dir, cwd=tmp_path)
    try:
        client = server.session()
        tools = client.rpc("tools/list")["tools"]
        assert [tool["name"] for tool in tools] == ["ze_execute"]
        _, _, stream, question = client.start_elicitation()
        assert client.accept(question["id"], {"command": "help"}).status_code == 202
        result = stream.next_message()
        assert result is not None and result["result"]["isError"] is False, result
    finally:
        server.stop()


def test_a_state_backend_the_server_does_not_have_stops_it_at_start_up(tmp_path):
    log = tmp_path / "gunicorn.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZEMCP_")}
    env.update(ZEMCP_STATE_BACKEND="nowhere", ZEMCP_BIND=f"{HOST}:{free_port()}")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=60)
        finally:
            stop_group(proc, 5)
    assert code != 0, "gunicorn kept running with a state backend that does not exist"
    assert "ZEMCP_STATE_BACKEND='nowhere' names no state backend; choose one of: memory" in log.read_text()
