"""The package's shape (docs/architecture.md): module sizes, no import cycles, and the import
paths that stay stable or keep working after a move. The layer contracts themselves are
import-linter's (pyproject.toml, `tox -e lint`)."""

import configparser
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import grimp
import pytest

import zemcp
from zemcp import moved

PACKAGE = Path(zemcp.__file__).parent
#: The most lines a module may have (docs/architecture.md, "Layout rules").
MAX_LINES = 500


def test_no_module_is_longer_than_the_bound():
    lengths = {
        path.relative_to(PACKAGE.parent).as_posix(): len(path.read_text().splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert len(lengths) > 40, "the package's modules were found"
    too_long = {name: n for name, n in lengths.items() if n > MAX_LINES}
    assert not too_long, f"modules over {MAX_LINES} lines: split them by concept: {too_long}"


def test_the_import_graph_has_no_cycle():
    """No chain of imports leads from a module back to itself, counting every import
    (inside functions and under TYPE_CHECKING too) and the package roots."""
    graph = grimp.build_graph("zemcp", cache_dir=None)
    cycles = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if graph.chain_exists(imported=module, importer=imported):
                cycles.add(tuple(sorted((module, imported))))
    assert not cycles, f"import cycles through: {sorted(cycles)}"


def _deprecation(old: str, new: str) -> str:
    return f"{old} moved to {new}; import it from there (the old path goes in zemcp 0.3)"


def test_every_moved_module_keeps_its_old_path_with_a_warning(tmp_path):
    """In a fresh interpreter (where nothing was imported yet), each old name is the new
    module itself, keeps the new module's own spec, and warns once with the new path, at the
    line of the importing file."""
    code = """
import importlib, json, sys, warnings
from zemcp.moved import MOVED
seen = {}
for old, new in MOVED.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alias = importlib.import_module(old)
    module = importlib.import_module(new)
    seen[old] = [alias is module, module.__spec__.name, [str(w.message) for w in caught if w.category is DeprecationWarning]]
print(json.dumps(seen))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert set(seen) == set(moved.MOVED)
    for old, new in moved.MOVED.items():
        assert seen[old] == [True, new, [_deprecation(old, new)]]

    # A user's script, one old import a line: each warning names the script and that line.
    script = tmp_path / "old_imports.py"
    script.write_text("".join(f"import {old}\n" for old in moved.MOVED))
    done = subprocess.run([sys.executable, "-W", "always", str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for line, (old, new) in enumerate(moved.MOVED.items(), start=1):
        assert f"{script}:{line}: DeprecationWarning: {_deprecation(old, new)}\n" in done.stderr


def test_the_old_paths_win_over_stale_files_of_the_flat_layout(tmp_path):
    """A leftover module of the flat layout on the path (an old build/ directory) is not
    what the old name imports: the alias finder comes first."""
    shutil.copytree(PACKAGE, tmp_path / "zemcp", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "zemcp" / "session.py").write_text("raise ImportError('the stale flat module was imported')\n")
    done = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            "-c",
            "import zemcp.session, zemcp.state.session; print(zemcp.session is zemcp.state.session, zemcp.__file__)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", str(tmp_path / "zemcp" / "__init__.py")]


def test_every_name_that_went_to_a_sibling_module_keeps_its_old_path(tmp_path):
    """In one fresh interpreter, ``from <old> import <name>`` gives the object of the module
    that defines it now, with one warning that names that module, at the line of the
    importing file; other names still fail."""
    code = """
import importlib, json, warnings
from zemcp.moved import MOVED_NAMES
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for old in MOVED_NAMES:
        importlib.import_module(old)
seen = {}
for old, names in MOVED_NAMES.items():
    for name, new in names.items():
        found = {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exec(f"from {old} import {name} as value", found)
        same = found["value"] is getattr(importlib.import_module(new), name)
        seen[f"{old}.{name}"] = [same, [str(w.message) for w in caught if w.category is DeprecationWarning]]
try:
    from zemcp.session import NoSuchName
except ImportError as exc:
    seen["unknown"] = str(exc)
print(json.dumps(seen))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen.pop("unknown").startswith("cannot import name 'NoSuchName' from 'zemcp.state.session'")
    expected = {
        f"{old}.{name}": [True, [_deprecation(f"{old}.{name}", new)]]
        for old, names in moved.MOVED_NAMES.items()
        for name, new in names.items()
    }
    assert seen == expected
    assert set(moved.MOVED_NAMES) <= set(moved.MOVED)

    entries = [(old, name, new) for old, names in moved.MOVED_NAMES.items() for name, new in names.items()]
    script = tmp_path / "old_names.py"
    script.write_text("".join(f"from {old} import {name}\n" for old, name, _ in entries))
    done = subprocess.run([sys.executable, "-W", "always", str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for line, (old, name, new) in enumerate(entries, start=1):
        assert f"{script}:{line}: DeprecationWarning: {_deprecation(f'{old}.{name}', new)}\n" in done.stderr


def test_the_old_zemcp_cli_names_forward_to_mcptest():
    """``zemcp.cli`` was the zemcp-test module: its names are answered from
    ``zemcp.cli.mcptest``, imported only then, with one warning each."""
    code = """
import json, sys, warnings
import zemcp.cli
seen = {"eager": "zemcp.cli.mcptest" in sys.modules}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from zemcp.cli import DEFAULT_URL, main, mcp
from zemcp.cli import mcptest
seen["same"] = [main is mcptest.main, mcp is mcptest.mcp, DEFAULT_URL == mcptest.DEFAULT_URL]
seen["warnings"] = [str(w.message) for w in caught if w.category is DeprecationWarning]
seen["unknown"] = not hasattr(zemcp.cli, "NoSuchName")
print(json.dumps(seen))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "eager": False,
        "same": [True, True, True],
        "warnings": [_deprecation(f"zemcp.cli.{name}", "zemcp.cli.mcptest") for name in ("DEFAULT_URL", "main", "mcp")],
        "unknown": True,
    }


def test_importing_zemcp_warns_of_nothing():
    done = subprocess.run(
        [
            sys.executable,
            "-W",
            "error",
            "-c",
            "import zemcp, zemcp.auth, zemcp.cli, zemcp.clicktools, zemcp.commands, zemcp.worker",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_the_stable_paths_name_the_layered_code():
    from zemcp.cli import clickrun, clickschema, clicktools, commands
    from zemcp.http import gunicorn_conf, worker

    facades = {
        "zemcp.clicktools": (clickrun, clickschema, clicktools),
        "zemcp.commands": (commands,),
        "zemcp.worker": (worker,),
    }
    for path, homes in facades.items():
        facade = importlib.import_module(path)
        for name in facade.__all__:
            assert any(getattr(home, name, None) is getattr(facade, name) for home in homes), (path, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        conf = importlib.import_module("zemcp.gunicorn_conf")
    assert conf.__all__ == gunicorn_conf.__all__
    assert all(getattr(conf, name) is getattr(gunicorn_conf, name) for name in conf.__all__)
    assert conf.worker_class == "zemcp.worker.ThreadWorker"


#: The public names of each stable path in the flat package (zemcp's ``__all__``; for the
#: modules, the names each defined or assigned at top level), frozen from its last version.
OLD_STABLE_NAMES = {
    "zemcp": [
        "Ask",
        "CannotWait",
        "CapabilityMissing",
        "ClientDisconnected",
        "ClientErrorResponse",
        "ClientRequestError",
        "ClientTimeout",
        "Context",
        "Elicit",
        "ElicitAborted",
        "ElicitCancelled",
        "ElicitDeclined",
        "ElicitError",
        "ElicitMalformed",
        "ElicitSchemaInvalid",
        "ElicitTimeout",
        "ElicitTooMany",
        "ElicitURL",
        "ElicitUnsupported",
        "ListRoots",
        "McpApp",
        "McpHeader",
        "RequestCancelled",
        "Sample",
        "Server",
        "SessionEnded",
        "Settings",
        "ToolError",
        "URLElicitationRequired",
        "__version__",
    ],
    "zemcp.auth": [
        "Authorization",
        "Challenge",
        "INTROSPECTION_CACHE_SIZE",
        "InsufficientScope",
        "IntrospectionVerifier",
        "InvalidToken",
        "JWT_ALGORITHMS",
        "JwtVerifier",
        "MAX_INTROSPECTION_BYTES",
        "METADATA_PREFIX",
        "OFFLINE_ACCESS",
        "Principal",
        "TokenVerifier",
        "VerifierUnavailable",
        "log",
    ],
    "zemcp.clicktools": ["ClickResult", "add_click_commands", "add_click_tools", "command_schema", "invoke", "log"],
    "zemcp.commands": [
        "Command",
        "CommandContext",
        "CommandError",
        "CommandRegistry",
        "ELICIT_MESSAGE",
        "add_builtin_commands",
        "add_execute_tool",
    ],
    "zemcp.gunicorn_conf": [
        "accesslog",
        "bind",
        "control_socket_disable",
        "errorlog",
        "graceful_timeout",
        "keepalive",
        "limit_request_field_size",
        "loglevel",
        "max_requests",
        "post_fork",
        "post_worker_init",
        "threads",
        "timeout",
        "when_ready",
        "worker_class",
        "worker_connections",
        "workers",
    ],
    "zemcp.worker": ["HEAD_BUFFER_LIMIT", "LINGER_DRAIN", "LINGER_TIMEOUT", "ThreadWorker"],
}

#: The names the docs teach from inside a layer, stable where they are defined
#: (docs/architecture.md, "Import paths").
STABLE_IN_LAYERS = {
    "zemcp.protocol.headers": ["standard_headers"],
}


@pytest.mark.parametrize("path", sorted(OLD_STABLE_NAMES))
def test_the_stable_paths_keep_every_old_public_name(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = importlib.import_module(path)
    missing = [name for name in OLD_STABLE_NAMES[path] if not hasattr(module, name)]
    assert not missing, f"{path} lost {missing}"


def test_the_docs_import_only_from_stable_paths():
    """Every ``from zemcp... import`` of the docs' and the README's Python blocks names a
    stable path (with a name it exports) or a name stable inside a layer."""
    stable = {path: set(importlib.import_module(path).__all__) for path in OLD_STABLE_NAMES}
    stable["zemcp.auth"] |= set(OLD_STABLE_NAMES["zemcp.auth"])
    for path, names in STABLE_IN_LAYERS.items():
        stable[path] = set(names)
    documents = [PACKAGE.parent / "README.md", *sorted((PACKAGE.parent / "docs").glob("*.md"))]
    imports = {
        (document.name, module, name.strip())
        for document in documents
        for module, names in re.findall(r"^from (zemcp[\w.]*) import ([\w, ]+)$", document.read_text(), flags=re.M)
        for name in names.split(",")
    }
    assert imports, "the docs import names from zemcp"
    unstable = sorted(item for item in imports if item[2] not in stable.get(item[1], ()))
    assert not unstable, f"the docs import these from paths that are not stable: {unstable}"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter's contracts (pyproject.toml) over the package found under ``root``."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            str(PACKAGE.parent / "pyproject.toml"),
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )


def test_the_lint_environment_runs_the_contracts():
    """``tox -e lint``, which .ci/run runs first, runs lint-imports over the checkout."""
    tox = configparser.ConfigParser()
    tox.read(PACKAGE.parent / "tox.ini")
    lint = tox["testenv:lint"]
    assert "lint-imports" in lint["commands"].split()
    assert "import-linter" in lint["deps"]
    assert "PYTHONPATH = {toxinidir}" in lint["set_env"]


def test_the_layer_contracts_hold():
    done = lint_imports(PACKAGE.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 5 kept, 0 broken." in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        (
            "protocol/jsonrpc.py",
            "from zemcp.core import server as _server",
            "Each layer imports only the layers below it",
        ),
        (
            "eras/modern/mrtr.py",
            "from zemcp.eras.handshake import call as _call",
            "The two protocol eras are independent",
        ),
        ("core/tools.py", "from zemcp import commands as _commands", "never import the package's public facades"),
        ("state/interfaces.py", "from zemcp.state import session as _session", "No import cycles"),
        ("core/server.py", "from zemcp.state import registry as _registry", "only through its interfaces"),
    ],
)
def test_a_broken_contract_fails_the_lint(tmp_path, module, line, broken):
    """The same check over a copy of the package with one import that breaks one contract."""
    shutil.copytree(PACKAGE, tmp_path / "zemcp", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "zemcp" / module
    target.write_text(target.read_text() + f"\n{line}\n")
    done = lint_imports(tmp_path)
    assert done.returncode != 0
    assert f"{broken}" in done.stdout and "BROKEN" in done.stdout, done.stdout
