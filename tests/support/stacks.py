"""Fixtures of the proxy tests (tests/proxy): three zemcp instances (a, b, c) behind HAProxy or nginx.

Fixtures:
    stack: parametrized over ``haproxy`` and ``nginx``; a :class:`tests.support.proxies.Stack`
        whose instances and proxy run from the configurations in deploy/ (see tests/support/proxies.py),
        every instance with the default settings.
    start_stack: factory ``start_stack(proxy, **settings)`` -> :class:`tests.support.proxies.Stack`:
        instances a, b and c with ``settings`` (names without the ``ZEMCP_`` prefix, as for
        ``start_server``: ``redis_url=redis_server.url``) behind the proxy named ``proxy``, a
        key of ``PROXIES`` or ``ROUND_ROBIN_PROXIES`` (``"nginx-roundrobin"``: deploy/nginx-roundrobin.conf).
        It may be called more than once per test.

A proxy whose binary is missing is skipped with the reason; CI installs both (.ci/run).
Every process is stopped at teardown, also when the test failed, and a failed test's report
gets the tail of each instance's and the proxy's log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.proxies import (
    PROXIES,
    ROUND_ROBIN_PROXIES,
    Instance,
    Proxy,
    Stack,
    find_binary,
    start_stack as start,
)

INSTANCE_NAMES = ("a", "b", "c")
#: Lines of each log attached to a failure report.
LOG_TAIL_LINES = 60

_STACK_KEY = pytest.StashKey[list]()


@pytest.fixture
def start_stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Stack]]:
    """Factory: ``start_stack("nginx-roundrobin", redis_url=...)`` starts instances a, b and c and the proxy."""
    parts: list[Instance | Proxy] = []
    request.node.stash[_STACK_KEY] = parts
    stacks = 0

    def start_one(proxy: str, **settings: Any) -> Stack:
        nonlocal stacks
        binary = {**PROXIES, **ROUND_ROBIN_PROXIES}[proxy].binary
        if find_binary(binary) is None:
            pytest.skip(f"{binary} is not installed (Debian: apt-get install {binary}); .ci/run installs it for CI")
        stacks += 1
        workdir = tmp_path / f"stack-{stacks}"
        workdir.mkdir()
        return start(workdir, proxy, parts, INSTANCE_NAMES, settings)

    try:
        yield start_one
    finally:
        for part in reversed(parts):
            part.stop()


@pytest.fixture(params=sorted(PROXIES))
def stack(request: pytest.FixtureRequest, start_stack: Callable[..., Stack]) -> Stack:
    """Instances a, b and c, and the proxy named by the parameter, on free loopback ports."""
    return start_stack(request.param)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """On a failure, attach the tail of the log of every process of the test's stacks."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for part in item.stash.get(_STACK_KEY, []):
        if isinstance(part, Instance):
            title, text = f"instance {part.name} ({part.address})", part.log()
        else:
            title, text = f"{part.name} ({part.url})", part.logs()
        report.sections.append((title, "\n".join(text.splitlines()[-LOG_TAIL_LINES:])))
