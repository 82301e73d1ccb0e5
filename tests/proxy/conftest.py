"""Fixtures of the proxy tests: three zemcp instances (a, b, c) behind HAProxy or nginx.

Fixtures:
    stack: parametrized over ``haproxy`` and ``nginx``; a :class:`Stack` whose instances and
        proxy run from the configurations in deploy/ (see harness.py). A proxy whose binary
        is missing is skipped with the reason; CI installs both (.ci/run). Every process is
        stopped at teardown, also when the test failed, and a failed test's report gets the
        tail of each instance's and the proxy's log.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import McpClient
from tests.proxy.harness import PROXIES, Instance, Proxy, find_binary, worker_pid

INSTANCE_NAMES = ("a", "b", "c")
#: Lines of each log attached to a failure report.
LOG_TAIL_LINES = 60


@dataclass
class Stack:
    """Three instances behind one proxy.

    Attributes:
        proxy: the running proxy; clients talk to ``proxy.url``.
        instances: the instances by name.
        pids: the worker pid of each instance, by name (asked directly, not via the proxy).
    """

    proxy: Proxy
    instances: dict[str, Instance]
    pids: dict[str, int]

    def client(self) -> McpClient:
        """A new, uninitialized client of the proxy (the caller closes it)."""
        return McpClient(self.proxy.url)

    def owner_of(self, pid: int) -> str:
        """The name of the instance whose worker has ``pid``."""
        names = [name for name, p in self.pids.items() if p == pid]
        assert names, f"pid {pid} is none of the instances' workers {self.pids}"
        return names[0]


_STACK_KEY = pytest.StashKey[list]()


@pytest.fixture(params=sorted(PROXIES))
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    """Instances a, b and c, and the proxy named by the parameter, on free loopback ports."""
    name = request.param
    if find_binary(name) is None:
        pytest.skip(f"{name} is not installed (Debian: apt-get install {name}); .ci/run installs it for CI")
    parts: list = []
    request.node.stash[_STACK_KEY] = parts
    try:
        instances = {}
        for instance_name in INSTANCE_NAMES:
            instance = Instance(instance_name, tmp_path)
            parts.append(instance)
            instances[instance_name] = instance
        for instance in instances.values():
            instance.wait_ready()
        pids = {n: worker_pid(i) for n, i in instances.items()}
        proxy = PROXIES[name](tmp_path, list(instances.values()))
        parts.append(proxy)
        yield Stack(proxy, instances, pids)
    finally:
        for part in reversed(parts):
            part.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """On a failure, attach the tail of the log of every process of the test's stack."""
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
