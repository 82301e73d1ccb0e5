"""Run the official MCP conformance suite against the fixtures server under gunicorn.

Usage::

    python conformance/run.py --node-modules DIR [--app MODULE:ATTR] [--output-dir DIR]

``DIR`` is an npm ``node_modules`` folder holding two installs of
``@modelcontextprotocol/conformance`` under the aliases ``conformance-stable`` (the release
that runs the whole server suite) and ``conformance-alpha`` (the pre-release that has the
``server-session-lifecycle`` scenario and the 2026-07-28 requirement set); ``tox -e
conformance`` installs both and a Node 22, which must come first on ``PATH``.

The runner serves ``--app`` (``conformance.everything:app`` by default) with
``gunicorn -c gunicorn.conf.py`` on a free loopback port, runs ``--suite all`` at
``--spec-version 2025-06-18`` and ``2025-11-25``, the session-lifecycle scenario and
``--requirements 2026-07-28``, prints each run's output and then one summary line per
scenario, always stops gunicorn, and exits 1 when any check failed or warned (in every
run) or any run did not complete, 2 when the harness could not start.

A run with ``--requirements`` is scored the way the requirement file of the suite install
(``requirements/<revision>.yaml``) says, but stricter: a WARNING in a scored scenario fails
the run like a FAILURE does (the suite itself exits 0 on warnings), and a scored scenario
that left no result fails it too. The scenarios the file lists under ``not_scored`` are
reported with their failures and warnings but fail nothing.
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

try:
    import yaml
except ImportError:  # reported as a harness error when a run needs it
    yaml = None

ROOT = Path(__file__).resolve().parent.parent
ENDPOINT = "/mcp"
MIN_NODE_MAJOR = 22
STARTUP_TIMEOUT = 30.0
# gunicorn's graceful stop waits for open requests; a leftover SSE stream must not hold the run.
STOP_TIMEOUT = 15.0
# The suites take a few seconds against a healthy server; this only bounds a hung run.
RUN_TIMEOUT = 300.0
SCENARIO_TIMEOUT_MS = 30000
# The server's settings for the run. Every 2026-07-28 ``subscriptions/listen`` stream and
# every waiting stream holds a gthread thread until the server notices its client left,
# which it does at its next keep-alive write: a short interval frees the streams the suite
# aborts within a second. The thread count covers the suite's concurrent requests (a listen
# stream and its trigger call, three parallel POSTs) with room to spare. The suite is one
# client (one address) that opens many sessions and streams in a row, some still counted
# while the server notices they were aborted: fair shares between clients
# (ZEMCP_CLIENT_SHARE) have nothing to share out here, so one client may hold everything.
SERVER_ENV = {"ZEMCP_KEEPALIVE_INTERVAL": "1", "ZEMCP_THREADS": "32", "ZEMCP_CLIENT_SHARE": "1"}
# How the summary names the reasons a requirement file gives for not scoring a scenario.
NOT_SCORED_REASONS = {
    "extension": "extension not implemented",
    "pending": "pending in the suite",
    "added-after-release": "added to the suite after the revision shipped",
}

# The result folders are named ``server-<scenario>-<ISO timestamp with ':' and '.' as '-'>``.
_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


@dataclass(frozen=True)
class SuiteRun:
    """One invocation of the conformance CLI.

    Attributes:
        label: names the run in the summary and its result folder.
        package: the npm alias of the conformance install to use.
        arguments: what follows ``server --url URL``.
        requirements: the revision of ``--requirements`` (its file in the install decides
            which scenarios are scored), or None for a run where every scenario counts.
    """

    label: str
    package: str
    arguments: tuple[str, ...]
    requirements: str | None = None


RUNS = (
    SuiteRun("2025-06-18", "conformance-stable", ("--suite", "all", "--spec-version", "2025-06-18")),
    SuiteRun("2025-11-25", "conformance-stable", ("--suite", "all", "--spec-version", "2025-11-25")),
    SuiteRun(
        "session-lifecycle",
        "conformance-alpha",
        ("--scenario", "server-session-lifecycle", "--timeout", str(SCENARIO_TIMEOUT_MS)),
    ),
    SuiteRun(
        "2026-07-28",
        "conformance-alpha",
        ("--requirements", "2026-07-28", "--timeout", str(SCENARIO_TIMEOUT_MS)),
        requirements="2026-07-28",
    ),
)


@dataclass(frozen=True)
class Requirements:
    """The server part of a suite install's requirement file for one revision.

    Attributes:
        revision: the revision, e.g. ``2026-07-28``.
        scored: the server scenarios conformance requires, in the file's order.
        not_scored: the server scenarios run but never scored, with the file's reason.
    """

    revision: str
    scored: tuple[str, ...]
    not_scored: dict[str, str]


@dataclass
class ScenarioResult:
    """The checks of one scenario, counted by status, with the failures' texts."""

    scenario: str
    passed: int = 0
    failed: int = 0
    warnings: int = 0
    failures: list[str] = field(default_factory=list)
    warning_texts: list[str] = field(default_factory=list)


class HarnessError(Exception):
    """The harness itself could not do its job (no Node 22, no suite, no server)."""


def main(argv: list[str] | None = None) -> int:
    """Serve the app, run every suite against it, print the summary; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--node-modules",
        required=True,
        type=Path,
        help="node_modules folder with the conformance-stable and conformance-alpha installs",
    )
    parser.add_argument(
        "--app",
        default="conformance.everything:app",
        help="WSGI app to serve, as gunicorn names it (default: %(default)s)",
    )
    parser.add_argument(
        "--output-dir", type=Path, help="where the per-scenario checks.json files go (default: a new temporary folder)"
    )
    args = parser.parse_args(argv)
    try:
        check_node()
        suites = {run.package: find_suite(args.node_modules, run.package) for run in RUNS}
        requirements = {
            run.label: load_requirements(suites[run.package][0], run.requirements)
            for run in RUNS
            if run.requirements is not None
        }
        if args.output_dir is not None:
            # The summary counts every result folder under a run's folder; old ones would count twice.
            stale = [run.label for run in RUNS if (args.output_dir / run.label).exists()]
            if stale:
                raise HarnessError(
                    f"{args.output_dir} already holds results ({', '.join(stale)}); give an empty or new folder"
                )
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

    return report(output, statuses, requirements, log_path)


def check_node() -> None:
    """Check that the ``node`` on PATH is recent enough for the suite."""
    try:
        version = subprocess.run(
            ["node", "--version"], capture_output=True, text=True, check=True, timeout=30
        ).stdout.strip()
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


def load_requirements(entry: Path, revision: str) -> Requirements:
    """The server scenarios the install's ``requirements/<revision>.yaml`` scores and does not score.

    Args:
        entry: the install's CLI entry script (see :func:`find_suite`).
        revision: the requirement set's revision.
    """
    if yaml is None:
        raise HarnessError(
            "the --requirements run needs PyYAML to read the suite's requirement file (pip install pyyaml)"
        )
    package_dir = next((folder for folder in entry.parents if (folder / "package.json").is_file()), entry.parent)
    path = package_dir / "requirements" / f"{revision}.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise HarnessError(f"{path} not found: this install of the suite has no {revision} requirement set") from None
    except yaml.YAMLError as exc:
        raise HarnessError(f"{path} does not parse: {exc}") from None
    if not isinstance(data, dict):
        raise HarnessError(f"{path} is not a requirement file (no mapping at its top)")
    scored = data.get("server")
    entries = data.get("not_scored") or []
    if not (isinstance(scored, list) and all(isinstance(name, str) for name in scored) and isinstance(entries, list)):
        raise HarnessError(f"{path} has no list of server scenarios")
    not_scored = {
        e["scenario"]: str(e.get("reason", "not scored"))
        for e in entries
        if isinstance(e, dict) and e.get("leg") == "server" and isinstance(e.get("scenario"), str)
    }
    return Requirements(revision, tuple(scored), not_scored)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(app: str, port: int, log_path: Path) -> subprocess.Popen:
    """Start gunicorn on ``127.0.0.1:port`` in its own process group, logging to ``log_path``."""
    env = dict(os.environ, **SERVER_ENV, ZEMCP_BIND=f"127.0.0.1:{port}", ZEMCP_ENDPOINT=ENDPOINT)
    command = [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"), "--chdir", str(ROOT), app]
    print(f"conformance: serving {app} on 127.0.0.1:{port} (log: {log_path})", flush=True)
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_until_serving(server: subprocess.Popen, port: int, log_path: Path) -> None:
    """Return once the app answers HTTP; raise if gunicorn exits or takes too long.

    An open port is not enough: gunicorn's master listens before its worker has imported
    the app, and exits when the import fails.
    """
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise HarnessError(f"gunicorn exited with status {server.returncode} before serving:\n{tail(log_path)}")
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
    raise HarnessError(f"gunicorn did not serve on 127.0.0.1:{port} within {STARTUP_TIMEOUT:.0f} s:\n{tail(log_path)}")


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
                result.warning_texts.append(
                    f"{check.get('name')}: {check.get('errorMessage') or check.get('description')}"
                )
        results.append(result)
    return results


def report(output: Path, statuses: dict[str, int | None], requirements: dict[str, Requirements], log_path: Path) -> int:
    """Print one line per scenario and the totals; 1 if anything failed, else 0."""
    print(f"\n=== CONFORMANCE SUMMARY (checks.json under {output}) ===", flush=True)
    total_passed = total_failed = total_warnings = 0
    for label, status in statuses.items():
        results = collect(output / label)
        outcome = "timed out" if status is None else f"exit status {status}"
        if label in requirements:
            passed, failed, warnings = report_requirements(results, requirements[label], label, outcome)
        else:
            passed = sum(r.passed for r in results)
            warnings = sum(r.warnings for r in results)
            # Every scenario of these runs passes without warnings: one that appears is a regression.
            failed = sum(r.failed for r in results) + warnings
            print(
                f"\n[{label}] {passed} passed, {failed - warnings} failed, {warnings} warnings "
                f"(warnings fail the run); {outcome}"
            )
            for r in results:
                print_scenario(r, warnings_fail=True)
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


def report_requirements(
    results: list[ScenarioResult], requirements: Requirements, label: str, outcome: str
) -> tuple[int, int, int]:
    """Print a ``--requirements`` run: the scored scenarios, then the others.

    A warning in a scored scenario counts as a failed check, and a scored scenario without
    a result as one failed check. The not-scored scenarios are printed with their failures
    and warnings and count for nothing.

    Returns:
        ``(passed, failed, warnings)`` over the scored scenarios, warnings included in failed.
    """
    by_name = {r.scenario: r for r in results}
    scored = [
        by_name.get(name) or ScenarioResult(name, failed=1, failures=["the scenario did not run"])
        for name in requirements.scored
    ]
    # The requirement file's order, then anything the file does not name.
    order = list(requirements.not_scored)
    others = sorted(
        (r for r in results if r.scenario not in requirements.scored),
        key=lambda r: order.index(r.scenario) if r.scenario in order else len(order),
    )
    passed = sum(r.passed for r in scored)
    warnings = sum(r.warnings for r in scored)
    failed = sum(r.failed for r in scored) + warnings
    print(
        f"\n[{label}] {len(scored)} scored scenarios: {passed} passed, {failed - warnings} failed, "
        f"{warnings} warnings (warnings fail the run); {outcome}"
    )
    for r in scored:
        print_scenario(r, warnings_fail=True)
    if others:
        failing = sum(1 for r in others if r.failed or r.warnings)
        print(
            f"\n[{label}] {len(others)} scenarios run but not scored, {failing} with failures or warnings "
            f"(they do not fail the run):"
        )
        for r in others:
            reason = requirements.not_scored.get(r.scenario, "not in the requirement set")
            print_scenario(r, note=f"not scored ({NOT_SCORED_REASONS.get(reason, reason)})", warnings_fail=True)
        print(
            f"Not scored: {sum(r.passed for r in others)} passed, {sum(r.failed for r in others)} failed, "
            f"{sum(r.warnings for r in others)} warnings"
        )
    return passed, failed, warnings


def print_scenario(r: ScenarioResult, note: str = "", warnings_fail: bool = False) -> None:
    """One scenario's line and, below it, its failed checks (and its warnings when they fail)."""
    mark = "✓" if r.failed == 0 and not (warnings_fail and r.warnings) else "✗"
    extra = f", {r.warnings} warnings" if r.warnings else ""
    print(f"{mark} {r.scenario}: {r.passed} passed, {r.failed} failed{extra}" + (f" - {note}" if note else ""))
    for failure in r.failures:
        print(f"    - {failure}")
    if warnings_fail:
        for warning in r.warning_texts:
            print(f"    ! WARNING {warning}")


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a text file."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


if __name__ == "__main__":
    sys.exit(main())
