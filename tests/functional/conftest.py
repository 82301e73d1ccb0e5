"""pytest collector and runner for the ``.ci`` functional scenarios in this directory.

Each ``<name>.ci`` file is one test item named ``<name>``. The format is documented in
docs/functional-tests.md; in short:

    stdin=<name>:terminator=<T>          a named block: the following lines up to the line <T>
    cmd=background:seq=N:exec=<command line>[:stdin=<name>]
    cmd=foreground:seq=N:exec=<command line>[:stdin=<name>][:timeout=<duration>]
    expect=exit:code=N
    expect=stdout|stderr:contains=<text> | not-contains=<text> | matches=<regex>

Commands run from the repository root in ``seq`` order, without a shell; ``$PORT`` is a free
loopback port picked for the run. Background processes get their own process group and are
always stopped (SIGTERM, then SIGKILL) when the item ends, whatever the outcome.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.processes import signal_group, stop_group
from zemcp.testclient.directives import parse_duration

REPO_ROOT = Path(__file__).resolve().parents[2]
#: [seconds] foreground timeout when the ``cmd`` line gives none.
DEFAULT_TIMEOUT = 30.0
#: [seconds] how long a background process group gets to exit after SIGTERM before SIGKILL.
STOP_GRACE = 10.0
#: Lines of each background process's output shown in a failure message.
LOG_TAIL_LINES = 40

_FIELDS = {
    "stdin": ("stdin", "terminator"),
    "cmd": ("cmd", "seq", "exec", "stdin", "timeout"),
    "expect": ("expect", "code", "contains", "not-contains", "matches"),
}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class ScenarioFormatError(Exception):
    """A ``.ci`` file that does not follow the format; the message names the file and line."""


class ScenarioFailed(Exception):
    """The scenario ran and an expectation did not hold; the message is the full report."""


@dataclass(frozen=True)
class Command:
    """One ``cmd=`` line.

    Attributes:
        kind: ``background`` or ``foreground``.
        seq: its position in the run (commands run in increasing ``seq``).
        exec: the command line, before ``$PORT`` substitution.
        stdin: name of the stdin block fed to it, or None.
        timeout: [seconds] foreground only: how long it may run.
        lineno: where it is in the file.
    """

    kind: str
    seq: int
    exec: str
    stdin: str | None
    timeout: float
    lineno: int


@dataclass(frozen=True)
class Expectation:
    """One ``expect=`` line: ``target`` is ``exit``, ``stdout`` or ``stderr``; ``op`` is
    ``code``, ``contains``, ``not-contains`` or ``matches``."""

    target: str
    op: str
    value: str
    lineno: int

    def describe(self) -> str:
        """The expectation as written in the file."""
        return f"expect={self.target}:{self.op}={self.value}"


@dataclass
class Scenario:
    """A parsed ``.ci`` file."""

    path: Path
    blocks: dict[str, str] = field(default_factory=dict)
    commands: list[Command] = field(default_factory=list)
    expectations: list[Expectation] = field(default_factory=list)

    @property
    def foreground(self) -> Command:
        """The one foreground command (validated by :func:`parse_scenario`)."""
        return self.commands[-1]


def _fields(line: str, kind: str, where: str) -> dict[str, str]:
    names = _FIELDS[kind]
    parts = re.split(r":(?=(?:%s)=)" % "|".join(map(re.escape, names)), line)
    fields: dict[str, str] = {}
    for part in parts:
        name, eq, value = part.partition("=")
        if not eq or name not in names:
            raise ScenarioFormatError(
                f"{where}: {part!r} is not one of the {kind} fields {', '.join(names)} (name=value)"
            )
        if name in fields:
            raise ScenarioFormatError(f"{where}: field {name!r} given twice")
        fields[name] = value
    return fields


def parse_scenario(path: Path) -> Scenario:
    """Read and validate one ``.ci`` file.

    Args:
        path: the file.
    Returns:
        the scenario; its commands sorted by ``seq``, the foreground one last.
    Raises:
        ScenarioFormatError: the first problem found, with ``file:line``.
    """
    scenario = Scenario(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        lineno, line = i + 1, lines[i].strip()
        where = f"{path.name}:{lineno}"
        i += 1
        if not line or line.startswith("#"):
            continue
        kind = line.partition("=")[0]
        if kind not in _FIELDS:
            raise ScenarioFormatError(f"{where}: expected a stdin=, cmd= or expect= line, got {line!r}")
        fields = _fields(line, kind, where)
        if kind == "stdin":
            name, terminator = fields["stdin"], fields.get("terminator", "")
            if not name or not terminator:
                raise ScenarioFormatError(f"{where}: a stdin block needs stdin=<name>:terminator=<line>")
            if name in scenario.blocks:
                raise ScenarioFormatError(f"{where}: stdin block {name!r} is defined twice")
            body: list[str] = []
            while i < len(lines) and lines[i].rstrip() != terminator:
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise ScenarioFormatError(f"{where}: stdin block {name!r} has no terminator line {terminator!r}")
            i += 1
            scenario.blocks[name] = "".join(b + "\n" for b in body)
        elif kind == "cmd":
            scenario.commands.append(_command(fields, where, lineno))
        else:
            scenario.expectations.append(_expectation(fields, where, lineno))
    _validate(scenario)
    return scenario


def _command(fields: dict[str, str], where: str, lineno: int) -> Command:
    kind = fields["cmd"]
    if kind not in ("background", "foreground"):
        raise ScenarioFormatError(f"{where}: cmd must be background or foreground, got {kind!r}")
    if not fields.get("exec", "").strip():
        raise ScenarioFormatError(f"{where}: cmd needs exec=<command line>")
    try:
        seq = int(fields.get("seq", ""))
    except ValueError:
        raise ScenarioFormatError(f"{where}: cmd needs seq=<integer>, got {fields.get('seq')!r}") from None
    timeout = DEFAULT_TIMEOUT
    if "timeout" in fields:
        if kind == "background":
            raise ScenarioFormatError(
                f"{where}: timeout applies to the foreground command only; "
                "background commands run until the scenario ends"
            )
        try:
            timeout = parse_duration(fields["timeout"])
        except ValueError as exc:
            raise ScenarioFormatError(f"{where}: timeout: {exc}") from None
    return Command(kind, seq, fields["exec"].strip(), fields.get("stdin"), timeout, lineno)


def _expectation(fields: dict[str, str], where: str, lineno: int) -> Expectation:
    target = fields["expect"]
    ops = [op for op in ("code", "contains", "not-contains", "matches") if op in fields]
    if len(ops) != 1:
        raise ScenarioFormatError(
            f"{where}: an expect line needs exactly one of code=, contains=, not-contains=, matches="
        )
    op, value = ops[0], fields[ops[0]]
    if target == "exit":
        if op != "code" or not re.fullmatch(r"-?\d+", value):
            raise ScenarioFormatError(f"{where}: use expect=exit:code=<integer>")
    elif target in ("stdout", "stderr"):
        if op == "code":
            raise ScenarioFormatError(f"{where}: {target} takes contains=, not-contains= or matches=, not code=")
        if not value:
            raise ScenarioFormatError(f"{where}: {op}= needs a non-empty text")
        if op == "matches":
            try:
                re.compile(value)
            except re.error as exc:
                raise ScenarioFormatError(f"{where}: matches= is not a valid regular expression: {exc}") from None
    else:
        raise ScenarioFormatError(f"{where}: expect must be exit, stdout or stderr, got {target!r}")
    return Expectation(target, op, value, lineno)


def _validate(scenario: Scenario) -> None:
    name = scenario.path.name
    seqs = [c.seq for c in scenario.commands]
    if len(set(seqs)) != len(seqs):
        raise ScenarioFormatError(f"{name}: two commands share a seq number ({sorted(seqs)})")
    scenario.commands.sort(key=lambda c: c.seq)
    foreground = [c for c in scenario.commands if c.kind == "foreground"]
    if len(foreground) != 1 or scenario.commands[-1].kind != "foreground":
        raise ScenarioFormatError(f"{name}: a scenario needs exactly one cmd=foreground, with the highest seq")
    for command in scenario.commands:
        if command.stdin is not None and command.stdin not in scenario.blocks:
            raise ScenarioFormatError(f"{name}:{command.lineno}: no stdin block named {command.stdin!r}")
    if not any(e.target == "exit" for e in scenario.expectations):
        # A scenario that forgets to state the exit code must not pass on a failing run.
        scenario.expectations.insert(0, Expectation("exit", "code", "0", 0))


# -- running -------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_environment() -> dict[str, str]:
    """The environment every command starts from.

    The caller's environment without ``ZEMCP_*`` variables (a scenario states every server
    setting it relies on), with this interpreter's scripts directory first on ``PATH`` and
    unbuffered Python output (so a server's log is complete when it is stopped).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZEMCP_")}
    env["PATH"] = sysconfig.get_path("scripts") + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def command_argv(line: str, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """Split a command line (shlex rules, no shell) into argv and the environment to run it in.

    Leading ``NAME=value`` words are environment assignments, as in a shell. ``python``
    means the interpreter running pytest; other programs are looked up in its scripts
    directory first, then on ``PATH``.

    Returns:
        ``(argv, environment)``.
    Raises:
        ScenarioFormatError: an empty command, unbalanced quotes, or a program not found.
    """
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise ScenarioFormatError(f"cannot split the command line {line!r}: {exc}") from None
    env = dict(env)
    while words and _ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words:
        raise ScenarioFormatError(f"the command line {line!r} has no program after its assignments")
    program = words[0]
    if program in ("python", "python3"):
        words[0] = sys.executable
    elif os.sep not in program:
        found = shutil.which(program, path=env["PATH"])
        if found is None:
            raise ScenarioFormatError(
                f"program {program!r} not found in {sysconfig.get_path('scripts')} or on PATH; "
                "install the package into this environment (pip install -e .)"
            )
        words[0] = found
    return words, env


@dataclass
class Background:
    """A background command, the file its output goes to, and how it ended.

    Attributes:
        exited_early: its exit status when it had ended by itself before being stopped.
    """

    command: Command
    argv: list[str]
    proc: subprocess.Popen
    log: Path
    exited_early: int | None = None

    def stop(self) -> None:
        """Record whether it ended by itself, then stop its process group."""
        self.exited_early = self.proc.poll()
        stop_group(self.proc, STOP_GRACE)

    def tail(self) -> str:
        """The last :data:`LOG_TAIL_LINES` lines of its output, and how it ended."""
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        status = (
            "stopped by the runner"
            if self.exited_early is None
            else f"EXITED BY ITSELF with status {self.exited_early} before the end"
        )
        return (
            f"--- background seq {self.command.seq}: {shlex.join(self.argv)} ({status}), "
            f"last {min(len(lines), LOG_TAIL_LINES)} of {len(lines)} lines ---\n" + "\n".join(lines[-LOG_TAIL_LINES:])
        )


@dataclass
class Outcome:
    """What the foreground command did."""

    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool


def run_scenario(scenario: Scenario, workdir: Path) -> tuple[Outcome, list[Background]]:
    """Run every command of ``scenario``; background processes are stopped before returning.

    Args:
        scenario: the parsed file.
        workdir: a directory for the background logs.
    Returns:
        the foreground outcome and the (stopped) background commands.
    Raises:
        ScenarioFormatError: a command line that cannot be run.
        OSError: a program that cannot be started.
    """
    port = str(free_port())

    def substitute(text: str) -> str:
        return text.replace("$PORT", port)

    base_env = child_environment()
    backgrounds: list[Background] = []
    try:
        for command in scenario.commands[:-1]:
            argv, env = command_argv(substitute(command.exec), base_env)
            stdin_text = substitute(scenario.blocks[command.stdin]) if command.stdin else None
            backgrounds.append(_start_background(command, argv, env, stdin_text, workdir))
        command = scenario.foreground
        argv, env = command_argv(substitute(command.exec), base_env)
        stdin_text = substitute(scenario.blocks[command.stdin]) if command.stdin else None
        return _run_foreground(command, argv, env, stdin_text), backgrounds
    finally:
        for background in reversed(backgrounds):
            background.stop()


def _start_background(
    command: Command, argv: list[str], env: dict[str, str], stdin_text: str | None, workdir: Path
) -> Background:
    log = workdir / f"background-{command.seq}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
            start_new_session=True,
        )
    background = Background(command, argv, proc, log)
    if stdin_text is not None:
        try:
            proc.stdin.write(stdin_text.encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass  # it exited already; its log and exit status tell why
    return background


def _run_foreground(command: Command, argv: list[str], env: dict[str, str], stdin_text: str | None) -> Outcome:
    proc = subprocess.Popen(
        argv,
        cwd=REPO_ROOT,
        env=env,
        text=True,
        encoding="utf-8",
        errors="replace",
        stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        try:
            stdout, stderr = proc.communicate(stdin_text, timeout=command.timeout)
            return Outcome(argv, proc.returncode, stdout, stderr, timed_out=False)
        except subprocess.TimeoutExpired:
            signal_group(proc, signal.SIGKILL)
            stdout, stderr = proc.communicate(timeout=STOP_GRACE)
            return Outcome(argv, None, stdout, stderr, timed_out=True)
    finally:
        # Also on an interrupt or a pytest-timeout: never leave the client running.
        if proc.poll() is None:
            stop_group(proc)


def check(scenario: Scenario, outcome: Outcome) -> list[str]:
    """The expectations that do not hold, each as a line of the failure report."""
    failures = []
    if outcome.timed_out:
        failures.append(f"the foreground command did not finish within {scenario.foreground.timeout:g} s (timeout=)")
    for e in scenario.expectations:
        where = f"line {e.lineno}: {e.describe()}" if e.lineno else "exit code 0 (no expect=exit line)"
        if e.target == "exit":
            if outcome.returncode != int(e.value):
                failures.append(f"{where}: the exit code was {outcome.returncode}")
            continue
        text = outcome.stdout if e.target == "stdout" else outcome.stderr
        if e.op == "contains" and e.value not in text:
            failures.append(f"{where}: not found in {e.target}")
        elif e.op == "not-contains" and e.value in text:
            failures.append(f"{where}: found in {e.target}")
        elif e.op == "matches" and re.search(e.value, text, re.MULTILINE | re.DOTALL) is None:
            failures.append(f"{where}: no match in {e.target}")
    return failures


def report(scenario: Scenario, outcome: Outcome, backgrounds: list[Background], failures: list[str]) -> str:
    """The failure message: what failed, the foreground command and its output, server logs."""
    parts = [f"scenario {scenario.path.name} failed:"]
    parts += [f"  {f}" for f in failures]
    parts.append(f"--- foreground seq {scenario.foreground.seq}: {shlex.join(outcome.argv)}")
    parts.append(f"--- exit code: {'(killed at the timeout)' if outcome.timed_out else outcome.returncode}")
    parts.append(f"--- stdout ---\n{outcome.stdout}")
    parts.append(f"--- stderr ---\n{outcome.stderr}")
    parts += [b.tail() for b in backgrounds]
    return "\n".join(parts)


# -- pytest integration --------------------------------------------------------------


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    """Collect every ``*.ci`` file under this directory as a :class:`ScenarioFile`."""
    if file_path.suffix == ".ci":
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    """A ``.ci`` file: one :class:`ScenarioItem` named after the file."""

    def collect(self):
        try:
            scenario = parse_scenario(self.path)
        except ScenarioFormatError as exc:
            raise self.CollectError(str(exc)) from None
        yield ScenarioItem.from_parent(self, name=self.path.stem, scenario=scenario)


class ScenarioItem(pytest.Item):
    """Runs one scenario: background commands, the foreground command, the expectations."""

    def __init__(self, *, scenario: Scenario, **kwargs):
        super().__init__(**kwargs)
        self.scenario = scenario

    def runtest(self) -> None:
        with tempfile.TemporaryDirectory(prefix=f"zemcp-{self.name}-") as workdir:
            try:
                outcome, backgrounds = run_scenario(self.scenario, Path(workdir))
            except ScenarioFormatError as exc:
                raise ScenarioFailed(f"{self.scenario.path.name}: {exc}") from None
            failures = check(self.scenario, outcome)
            if failures:
                raise ScenarioFailed(report(self.scenario, outcome, backgrounds, failures))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ScenarioFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"scenario {self.name}"
