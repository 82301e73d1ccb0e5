"""The markers that say what a test needs, set from its fixtures, folder and parameters.

setup.cfg registers them (with ``--strict-markers``); docs/contributing.md says how to pick
tests by them.
"""

from __future__ import annotations

import pytest

from tests.support import REPO

#: The marker a test gets when it uses one of these fixtures (directly or through another):
#: what the fixture starts or installs. setup.cfg registers the markers; docs/contributing.md
#: says how to pick tests by them.
MARKING_FIXTURES: dict[str, frozenset[str]] = {
    # Every GunicornServer, of these fixtures or of a test module's own, logs to _log_dir; a
    # proxy stack's instances are gunicorns too.
    "gunicorn": frozenset({"_log_dir", "start_stack", "stack"}),
    "redis": frozenset({"redis_server", "start_redis", "_shared_redis"}),
    "node": frozenset({"ts_sdk1_modules", "node_modules", "inspector_modules", "apphost_modules"}),
    "browser": frozenset({"chromium"}),
    "proxy": frozenset({"start_stack", "stack"}),
    "postgres": frozenset({"postgres"}),
}
#: Folders under tests/ whose every test starts the server in a process of its own: gunicorn
#: (through gunicorn.conf.py, ``zemcp run`` or a ``.ci`` scenario) or ``zemcp run`` over stdio.
SERVER_FOLDERS = frozenset({"integration", "functional"})
#: The parameter value of the fixtures that run a test once per state backend and, for this one,
#: take the run's redis-server with ``request.getfixturevalue``, where no fixture list shows it.
REDIS_BACKEND = "redis"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with what it needs (``gunicorn``, ``redis``, ``node``, ``browser``, ``proxy``,
    ``postgres``).

    A test is marked by the fixtures it uses (:data:`MARKING_FIXTURES`), by its folder
    (:data:`SERVER_FOLDERS`), and by a :data:`REDIS_BACKEND` parameter. ``slow`` (a test that
    takes more than about 5 s on its own) is written on the test itself, where it was measured.
    """
    tests = REPO / "tests"
    for item in items:
        needs = {
            marker for marker, fixtures in MARKING_FIXTURES.items() if fixtures & set(getattr(item, "fixturenames", ()))
        }
        path = item.path.resolve()
        if path.is_relative_to(tests) and path.relative_to(tests).parts[0] in SERVER_FOLDERS:
            needs.add("gunicorn")
        callspec = getattr(item, "callspec", None)
        if callspec is not None and REDIS_BACKEND in [v for v in callspec.params.values() if isinstance(v, str)]:
            needs.add("redis")
        for marker in sorted(needs):
            item.add_marker(marker)
