"""The package's shape (docs/architecture.md): module sizes, no import cycles, and one home for
each public thing, listed in the docs. The layer contracts themselves are import-linter's
(pyproject.toml, `tox -e lint`)."""

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

import zemcp
import zemcp.cli

PACKAGE = Path(zemcp.__file__).parent
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"

#: The soft bound on a module's lines (docs/architecture.md, "Layout rules"): a module past it
#: is split by concept, unless it is one of LONG_MODULES.
SOFT_MAX_LINES = 800

#: The modules allowed above SOFT_MAX_LINES (path under the repository -> why the module stays
#: whole, in one line). None needs to be today.
LONG_MODULES: dict[str, str] = {}


def test_no_module_is_longer_than_the_soft_bound_unless_listed():
    lengths = {
        path.relative_to(PACKAGE.parent).as_posix(): len(path.read_text().splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert len(lengths) > 40, "the package's modules were found"
    too_long = {name: n for name, n in lengths.items() if n > SOFT_MAX_LINES and name not in LONG_MODULES}
    assert not too_long, (
        f"modules over {SOFT_MAX_LINES} lines: split them by concept, or name them in LONG_MODULES "
        f"with the reason they stay whole: {too_long}"
    )
    stale = sorted(name for name in LONG_MODULES if lengths.get(name, 0) <= SOFT_MAX_LINES)
    assert not stale, f"LONG_MODULES names modules that are gone or within {SOFT_MAX_LINES} lines: {stale}"
    assert all(reason.strip() for reason in LONG_MODULES.values()), "every long module says why"


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


#: The modules of docs/architecture.md's "Public paths" table, which must list exactly these.
PUBLIC_MODULES = {
    "zemcp",
    "zemcp.auth",
    "zemcp.http.worker",
    "zemcp.http.gunicorn_conf",
    "zemcp.cli.clicktools",
    "zemcp.cli.clickschema",
    "zemcp.cli.clickrun",
    "zemcp.cli.commands",
    "zemcp.testclient.mcptest",
    "zemcp.django",
    "zemcp.flask",
    "zemcp.protocol.headers",
}


def public_paths() -> dict[str, set[str]]:
    """docs/architecture.md's "Public paths" table: module -> the names its row lists (``__all__``
    standing for every name of the module's ``__all__``)."""
    section = ARCHITECTURE.read_text().split("\n## Public paths\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| [^|]+ \| `(zemcp[\w.]*)` \| ([^|]+) \|$", section, flags=re.M)
    paths: dict[str, set[str]] = {}
    for module, names in rows:
        assert module not in paths, f"{module} has two rows"
        paths[module] = set(re.findall(r"`(\w+)`", names))
    return paths


#: The packages below the transports: a message reaches them with its RequestContext, never a
#: WSGI environ (docs/architecture.md, "The request context").
BELOW_THE_TRANSPORTS = ("eras", "pipeline", "core")


def test_nothing_below_the_transports_reads_a_wsgi_environ():
    """No name, attribute, parameter or string of the eras, the pipeline or the core says ``environ``
    (the environment's ``os.environ`` aside), nor a WSGI key (``wsgi.``, ``gunicorn.``, ``HTTP_``)."""
    found = []
    for package in BELOW_THE_TRANSPORTS:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                name = (
                    node.id
                    if isinstance(node, ast.Name)
                    else node.attr
                    if isinstance(node, ast.Attribute) and not _is_os_environ(node)
                    else node.arg
                    if isinstance(node, ast.arg)
                    else None
                )
                text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""
                if name == "environ" or text.startswith(("wsgi.", "gunicorn.", "HTTP_")):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not found, f"a WSGI environ is read below the transports at {found}"


def _is_os_environ(node: ast.Attribute) -> bool:
    return node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"


def test_the_docs_list_the_public_paths():
    assert set(public_paths()) == PUBLIC_MODULES


def test_the_public_paths_import_with_their_names_warn_of_nothing_and_add_no_finder():
    """In a fresh interpreter (importing zemcp.http.gunicorn_conf sets variables of the
    environment): ``import zemcp`` puts no import finder of zemcp's in ``sys.meta_path``; every
    public path imports, without a warning, with each name its row lists; and then there is
    still no finder of zemcp's. (Libraries zemcp uses may add their own: six does.)"""
    code = """
import importlib, json, sys
def of_zemcp(finders):
    owners = [finder if isinstance(finder, type) else type(finder) for finder in finders]
    return [repr(finder) for finder, owner in zip(finders, owners) if owner.__module__.split(".")[0] == "zemcp"]
import zemcp
seen = {"after_import_zemcp": of_zemcp(sys.meta_path), "missing": {}}
# zemcp.django's server is made from the site's settings when first read: a Django process has them.
try:
    from django.conf import settings
    settings.configure()
except ImportError:
    pass
for path, names in json.loads(sys.argv[1]).items():
    module = importlib.import_module(path)
    if "__all__" in names:
        names = [name for name in names if name != "__all__"] + list(module.__all__)
    seen["missing"][path] = sorted(name for name in names if not hasattr(module, name))
seen["after_the_public_paths"] = of_zemcp(sys.meta_path)
print(json.dumps(seen))
"""
    paths = {module: sorted(names) for module, names in public_paths().items()}
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code, json.dumps(paths)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "after_import_zemcp": [],
        "missing": {module: [] for module in PUBLIC_MODULES},
        "after_the_public_paths": [],
    }


@pytest.mark.parametrize(
    "path",
    [
        # The finder that aliased the flat layout's paths, and paths it answered.
        "zemcp.moved",
        "zemcp.session",
        "zemcp.server",
        "zemcp.transport",
        # The facades over the layered code.
        "zemcp.worker",
        "zemcp.gunicorn_conf",
        "zemcp.clicktools",
        "zemcp.commands",
        # The test client's modules, now zemcp.testclient.
        "zemcp.cli.mcptest",
        "zemcp.cli.client",
        "zemcp.cli.rpc",
    ],
)
def test_no_other_path_leads_to_a_public_thing(path):
    assert importlib.util.find_spec(path) is None, f"{path} still exists"


def test_the_command_line_package_forwards_no_names():
    """``zemcp.cli`` has no ``__getattr__``: the test client's names are only in zemcp.testclient."""
    assert "__getattr__" not in vars(zemcp.cli)
    assert not hasattr(zemcp.cli, "main")


def test_the_docs_import_only_from_public_paths():
    """Every ``import zemcp...`` and ``from zemcp... import`` of the docs' and the README's text
    names a public path, and each name it imports is one the path's row lists."""
    public = public_paths()
    # The docs import from zemcp's __all__ (importing zemcp changes nothing of the environment).
    public["zemcp"] |= set(zemcp.__all__)
    documents = [PACKAGE.parent / "README.md", *sorted((PACKAGE.parent / "docs").glob("*.md"))]
    texts = {document.name: document.read_text() for document in documents}
    modules = {
        (name, module)
        for name, text in texts.items()
        for module in re.findall(r"^(?:import|from) (zemcp[\w.]*)", text, flags=re.M)
    }
    imports = {
        (name, module, imported.strip())
        for name, text in texts.items()
        for module, names in re.findall(r"^from (zemcp[\w.]*) import ([\w, ]+)$", text, flags=re.M)
        for imported in names.split(",")
    }
    assert imports, "the docs import names from zemcp"
    elsewhere = sorted(item for item in modules if item[1] not in public)
    assert not elsewhere, f"the docs import these modules, which are not public paths: {elsewhere}"
    unlisted = sorted(item for item in imports if item[2] not in public[item[1]])
    assert not unlisted, f"the docs import these names, which their public path does not list: {unlisted}"
