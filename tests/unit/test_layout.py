"""The package's shape (docs/architecture.md): module sizes, no import cycles, and the import
paths that stay stable or keep working after a move. The layer contracts themselves are
import-linter's (pyproject.toml, `tox -e lint`)."""

import importlib
import json
import os
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


def test_every_moved_module_keeps_its_old_path_with_a_warning():
    """In a fresh interpreter (where nothing was imported yet), each old name is the new
    module itself, keeps the new module's own spec, and warns once with the new path."""
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
        assert seen[old] == [
            True,
            new,
            [f"{old} moved to {new}; import it from there (the old path goes in zemcp 0.3)"],
        ]


def test_importing_zemcp_warns_of_nothing():
    done = subprocess.run(
        [
            sys.executable,
            "-W",
            "error",
            "-c",
            "import zemcp, zemcp.auth, zemcp.clicktools, zemcp.commands, zemcp.worker",
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
