"""Run the official MCP conformance suite against the fixtures server under gunicorn.

Usage::

    python conformance/run.py --node-modules DIR [--app MODULE:ATTR] [--output-dir DIR]

``DIR`` is an npm ``node_modules`` folder holding two installs of
``@modelcontextprotocol/conformance`` under the aliases ``conformance-stable`` (the release
that runs the whole server suite) and ``conformance-alpha`` (the pre-release that has the
``server-session-lifecycle`` scenario); ``tox -e conformance`` installs both and a Node 22,
which must come first on ``PATH``.

The runner serves ``--app`` (``conformance.everything:app`` by default) with
``gunicorn -c gunicorn.conf.py`` on a free loopback port, runs ``--suite all`` at
``--spec-version 2025-06-18`` and ``2025-11-25`` and the session-lifecycle scenario, prints
each run's output and then one summary line per scenario, always stops gunicorn, and exits
1 when any check failed or any run did not complete, 2 when the harness could not start.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENDPOINT = "/mcp"
MIN_NODE_MAJOR = 22
STARTUP_TIMEOUT = 30.0
# gunicorn's graceful stop waits for open requests; a leftover SSE stream must not hold the run.
STOP_TIMEOUT = 15.0
# The suites take a few seconds against a healthy server; this only bounds a hung run.
RUN_TIMEOUT = 300.0
SCENARIO_TIMEOUT_MS = 30000

# The result folders are named ``server-<scenario>-<ISO timestamp with ':' and '.' as '-'>``.
_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


@dataclass(frozen=True)
class SuiteRun:
    """One invocation of the conformance CLI.

    Attributes:
        label: names the run in the summary and its result folder.
        package: the npm alias of the conformance install to use.
        arguments: what follows ``server --url URL``.
    """

    label: str
    package: str
    arguments: tuple[str, ...]


RUNS = (
    SuiteRun("2025-06-18", "conformance-stable", ("--suite", "all", "--spec-version", "2025-06-18")),
    SuiteRun("2025-11-25", "conformance-stable", ("--suite", "all", "--spec-version", "2025-11-25")),
    SuiteRun("session-lifecycle", "conformance-alpha",
             ("--scenario", "server-session-lifecycle", "--timeout", str(SCENARIO_TIMEOUT_MS))),
)


@dataclass
class ScenarioResult:
    """The checks of one scenario, counted by status, with the failures' texts."""

    scenario: str
    passed: int = 0
    failed: int = 0
    warnings: int = 0
    failures: list[str] = field(default_factory=list)


class HarnessError(Exception):
    """The harness itself could not do its job (no Node 22, no suite, no server)."""


def main(argv: list[str] | None = None) -> int:
    """Serve the app, run every suite against it, print the summary; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node-modules", required=True, type=Path,
                        help="node_modules folder with the conformance-stable and conformance-alpha installs")
    parser.add_argument("--app", default="conformance.everything:app",
                        help="WSGI app to serve, as gunicorn names it (default: %(default)s)")
    parser.add_argument("--output-dir", type=Path,
                        help="where the per-scenario checks.json files go (default: a new temporary folder)")
    args = parser.parse_args(argv)
    try:
        check_node()
        suites = {run.package: find_suite(args.node_modules, run.package) for run in RUNS}
        if args.output_dir is not None:
            # The summary counts every result folder under a run's folder; old ones would count twice.
            stale = [run.label for run in RUNS if (args.output_dir / run.label).exists()]
            if stale:
                raise HarnessError(f"{args.output_dir} already holds results ({', '.join(stale)}); "
                                   f"give an empty or new folder")
    except HarnessError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    output = args.output_dir or Path(tempfile.mkdtemp(prefix="zemcp-conformance-"))
    output.mkdir(parents=True, exist_ok=True)
    for package, (_, version) in suites.items():
        print(f"conformance: {package} is @modelcontextprotocol/conformance {version}", flush=True)

    port = free_port()
    url = f"http://127.0.0.1:{port}{ENDPOINT}"
    log_path = output / "gunicorn.log"
    statuses: dict[str, int | None] = {}
    server = start_server(args.app, port, log_path)
    try:
        wait_until_serving(server, port, log_path)
        for run in RUNS:
            entry, _ = suites[run.package]
            statuses[run.label] = run_suite(entry, url, run, output / run.label)
    except HarnessError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    finally:
        stop_server(server)

    return report(output, statuses, log_path)


def check_node() -> None:
    """Check that the ``node`` on PATH is recent enough for the suite."""
    try:
        version = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True,
                                 timeout=30).stdout.strip()
    except FileNotFoundError:
        raise HarnessError(f"no 'node' on PATH; the suite needs Node {MIN_NODE_MAJOR} or later") from None
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise HarnessError(f"'node --version' failed: {exc}") from None
    match = re.match(r"v(\d+)\.", version)
    if not match or int(match.group(1)) < MIN_NODE_MAJOR:
        raise HarnessError(f"the 'node' on PATH is {version!r}; the suite needs Node {MIN_NODE_MAJOR} or later")


def find_suite(node_modules: Path, package: str) -> tuple[Path, str]:
    """The CLI entry script and version of the conformance install aliased ``package``."""
    manifest = node_modules / package / "package.json"
    try:
        meta = json.loads(manifest.read_text())
    except FileNotFoundError:
        raise HarnessError(f"{manifest} not found; install the suite as {package!r} (see tox.ini)") from None
    bin_field = meta.get("bin")
    entry = bin_field.get("conformance") if isinstance(bin_field, dict) else bin_field
    if meta.get("name") != "@modelcontextprotocol/conformance" or not entry:
        raise HarnessError(f"{manifest} is not an install of @modelcontextprotocol/conformance")
    return manifest.parent / entry, meta.get("version", "?")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(app: str, port: int, log_path: Path) -> subprocess.Popen:
    """Start gunicorn on ``127.0.0.1:port`` in its own process group, logging to ``log_path``."""
    env = dict(os.environ, ZEMCP_BIND=f"127.0.0.1:{port}", ZEMCP_ENDPOINT=ENDPOINT)
    command = [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"), "--chdir", str(ROOT), app]
    print(f"conformance: serving {app} on 127.0.0.1:{port} (log: {log_path})", flush=True)
    with open(log_path, "wb") as log:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def wait_until_serving(server: subprocess.Popen, port: int, log_path: Path) -> None:
    """Return once the app answers HTTP; raise if gunicorn exits or takes too long.

    An open port is not enough: gunicorn's master listens before its worker has imported
    the app, and exits when the import fails.
    """
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise HarnessError(f"gunicorn exited with status {server.returncode} before serving:\n"
                               f"{tail(log_path)}")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        try:
            # Any status will do (a GET without a session is refused): the app is running.
            connection.request("GET", ENDPOINT)
            connection.getresponse().read()
            return
        except (OSError, http.client.HTTPException):
            time.sleep(0.1)
        finally:
            connection.close()
    raise HarnessError(f"gunicorn did not serve on 127.0.0.1:{port} within {STARTUP_TIMEOUT:.0f} s:\n"
                       f"{tail(log_path)}")


def run_suite(entry: Path, url: str, run: SuiteRun, output: Path) -> int | None:
    """Run one conformance invocation with its output on ours; its exit status, None on timeout."""
    command = ["node", str(entry), "server", "--url", url, *run.arguments, "-o", str(output)]
    print(f"\nconformance: === {run.label}: {' '.join(command[2:])}", flush=True)
    suite = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        return suite.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        print(f"conformance: {run.label} did not finish within {RUN_TIMEOUT:.0f} s; stopped it", flush=True)
        os.killpg(suite.pid, signal.SIGKILL)
        suite.wait()
        return None


def stop_server(server: subprocess.Popen) -> None:
    """Stop gunicorn's whole process group: gracefully, then by force."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def collect(output: Path) -> list[ScenarioResult]:
    """Each scenario's checks from the ``checks.json`` files the suite wrote under ``output``."""
    results = []
    for folder in sorted(output.iterdir()) if output.is_dir() else ():
        match = _RESULT_DIR.match(folder.name)
        if not match:
            continue
        result = ScenarioResult(match.group("scenario"))
        checks_file = folder / "checks.json"
        if not checks_file.is_file():
            # The suite creates the folder before running the scenario and writes the
            # checks only when the scenario completes.
            result.failed = 1
            result.failures.append("the scenario did not complete (no checks.json; see its output above)")
            results.append(result)
            continue
        for check in json.loads(checks_file.read_text()):
            status = check.get("status")
            if status == "SUCCESS":
                result.passed += 1
            elif status == "FAILURE":
                result.failed += 1
                result.failures.append(f"{check.get('name')}: {check.get('errorMessage') or check.get('description')}")
            elif status == "WARNING":
                result.warnings += 1
        results.append(result)
    return results


def report(output: Path, statuses: dict[str, int | None], log_path: Path) -> int:
    """Print one line per scenario and the totals; 1 if anything failed, else 0."""
    print(f"\n=== CONFORMANCE SUMMARY (checks.json under {output}) ===", flush=True)
    total_passed = total_failed = total_warnings = 0
    for label, status in statuses.items():
        results = collect(output / label)
        passed = sum(r.passed for r in results)
        failed = sum(r.failed for r in results)
        warnings = sum(r.warnings for r in results)
        outcome = "timed out" if status is None else f"exit status {status}"
        print(f"\n[{label}] {passed} passed, {failed} failed, {warnings} warnings; {outcome}")
        for r in results:
            mark = "✓" if r.failed == 0 else "✗"
            extra = f", {r.warnings} warnings" if r.warnings else ""
            print(f"{mark} {r.scenario}: {r.passed} passed, {r.failed} failed{extra}")
            for failure in r.failures:
                print(f"    - {failure}")
        if not failed and (status != 0 or not results):
            # A crash, a timeout or a run of no scenario leaves no failing check behind; it
            # still fails the run.
            failed = 1
            print(f"✗ {label}: " + (f"the run did not complete ({outcome})" if results else "no scenario ran"))
        total_passed += passed
        total_failed += failed
        total_warnings += warnings
    if total_failed:
        print(f"\nserver log: {log_path}")
    print(f"\nWarnings: {total_warnings}")
    print(f"Total: {total_passed} passed, {total_failed} failed", flush=True)
    return 1 if total_failed else 0


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a text file."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


if __name__ == "__main__":
    sys.exit(main())
