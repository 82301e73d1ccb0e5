"""Import paths of modules that moved when the package was split into layers.

Until zemcp 0.3, ``import zemcp.session`` and the like (every key of :data:`MOVED`) keep
working: the old name is the new module itself, so attributes, ``isinstance`` checks and
patches act on the one module; each first import of an old name warns with a
``DeprecationWarning`` that names the new path. The stable public paths (``zemcp``,
``zemcp.auth``, ``zemcp.clicktools``, ``zemcp.commands``, ``zemcp.gunicorn_conf``,
``zemcp.worker``) are not in the table: they did not move. See docs/architecture.md,
"Import paths".
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

#: Old module name -> the module it is now.
MOVED = {
    "zemcp.jsonrpc": "zemcp.protocol.jsonrpc",
    "zemcp.versions": "zemcp.protocol.versions",
    "zemcp.capabilities": "zemcp.protocol.capabilities",
    "zemcp.pagination": "zemcp.protocol.pagination",
    "zemcp.caching": "zemcp.protocol.caching",
    "zemcp.headers": "zemcp.protocol.headers",
    "zemcp.elicitation": "zemcp.protocol.elicitation",
    "zemcp.inputs": "zemcp.protocol.inputs",
    "zemcp.session": "zemcp.state.session",
    "zemcp.correlation": "zemcp.state.correlation",
    "zemcp.streams": "zemcp.state.eventlogs",
    "zemcp.subscriptions": "zemcp.state.subscriptions",
    "zemcp.server": "zemcp.core.server",
    "zemcp.context": "zemcp.core.context",
    "zemcp.tools": "zemcp.core.tools",
    "zemcp.resources": "zemcp.core.resources",
    "zemcp.prompts": "zemcp.core.prompts",
    "zemcp.completions": "zemcp.core.completions",
    "zemcp.schemas": "zemcp.core.schemas",
    "zemcp.sinks": "zemcp.replies.sinks",
    "zemcp.responses": "zemcp.replies.responses",
    "zemcp.handshake": "zemcp.eras.handshake.era",
    "zemcp.modern": "zemcp.eras.modern.era",
    "zemcp.mrtr": "zemcp.eras.modern.mrtr",
    "zemcp.request_state": "zemcp.eras.modern.request_state",
    "zemcp.transport": "zemcp.http.transport",
    "zemcp.cors": "zemcp.http.cors",
    "zemcp.serve": "zemcp.cli.serve",
    "zemcp.stdio": "zemcp.cli.stdio",
    "zemcp.client": "zemcp.cli.client",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old names of :data:`MOVED` and loads each as the module it moved to."""

    def __init__(self) -> None:
        # Old name -> the new module's own spec, which the import system replaces by the alias's.
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new}; import it from there (the old path goes in zemcp 0.3)",
            DeprecationWarning,
            stacklevel=_importer_level(),
        )
        module = importlib.import_module(new)
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system set the alias's spec on the module; give the module its own back.
        alias = module.__spec__.name if module.__spec__ is not None else ""
        module.__spec__ = self._specs.pop(alias, module.__spec__)


def _importer_level() -> int:
    """The ``stacklevel`` of the frame whose import named the old path (past the import system's frames)."""
    frame = sys._getframe(2)
    level = 3
    while frame.f_back is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
        level += 1
    return level


def install() -> None:
    """Make the old names importable (idempotent; ``import zemcp`` calls it)."""
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
