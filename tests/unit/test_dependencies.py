"""Serving needs only the runtime dependencies: the client's requests is an extra."""

import configparser
import subprocess
import sys

from tests.conftest import REPO


def test_serving_imports_no_client_library():
    """The server, the transports, authorization and the gunicorn configuration never import requests."""
    code = (
        "import sys, wsgi, zemcp.cli.serve, zemcp.cli.stdio, zemcp.auth, zemcp.http.worker, zemcp.gunicorn_conf; "
        "sys.exit('requests' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=60).returncode == 0


def test_requests_is_an_extra_not_a_requirement():
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    assert "requests" not in setup["options"]["install_requires"]
    assert "requests" in setup["options.extras_require"]["client"]


def test_zemcp_test_without_the_client_extra_says_how_to_install_it():
    """The hint names the install from a checkout (zemcp is installed from its repository)."""
    code = "import sys; sys.modules['requests'] = None; import zemcp.cli.mcptest"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "pip install '.[client]' in the zemcp checkout" in done.stderr, done.stderr
