"""Import paths of modules that moved when the package was split into layers.

Until zemcp 0.3, ``import zemcp.session`` and the like (every key of :data:`MOVED`) keep
working: the old name is the new module itself, so attributes, ``isinstance`` checks and
patches act on the one module; each first import of an old name warns with a
``DeprecationWarning`` that names the new path. The names an old module had that the split
put in a sibling module (:data:`MOVED_NAMES`) keep working at the old path too, each with a
``DeprecationWarning`` that names the module holding it now. The stable public paths
(``zemcp``, ``zemcp.auth``, ``zemcp.clicktools``, ``zemcp.commands``, ``zemcp.gunicorn_conf``,
``zemcp.worker``) are not in the tables: they did not move. See docs/architecture.md,
"Import paths".
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

from zemcp.version import moved_message

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


#: Old module name -> {public name the old module defined that its new module (:data:`MOVED`)
#: does not have -> the module that defines it now}. Made once from the old modules' sources
#: (the names each defined or assigned at top level, at the last flat layout); a name the new
#: module has, defined or imported, is not listed.
MOVED_NAMES: dict[str, dict[str, str]] = {
    "zemcp.headers": {
        "HEADER_MISMATCH": "zemcp.protocol.header_values",
        "PARAM_HEADER_PREFIX": "zemcp.protocol.param_headers",
        "X_MCP_HEADER": "zemcp.protocol.param_headers",
        "McpHeader": "zemcp.protocol.param_headers",
        "header_annotations": "zemcp.protocol.param_headers",
        "check_params": "zemcp.protocol.param_headers",
        "param_headers": "zemcp.protocol.param_headers",
    },
    "zemcp.inputs": {
        "Exchange": "zemcp.core.exchange",
    },
    "zemcp.session": {
        "INITIALIZED_GRACE": "zemcp.eras.handshake.call",
        "SessionError": "zemcp.state.interfaces",
        "SessionRequired": "zemcp.state.interfaces",
        "SessionLimitReached": "zemcp.state.interfaces",
        "Call": "zemcp.eras.handshake.call",
        "SessionRegistry": "zemcp.state.registry",
    },
    "zemcp.server": {
        "BUSY_RETRY_AFTER": "zemcp.core.admission",
        "Busy": "zemcp.core.admission",
    },
    "zemcp.context": {
        "HANDLER_ERRORS": "zemcp.core.errors",
        "CallFinished": "zemcp.core.errors",
        "ClientRequestError": "zemcp.core.errors",
        "ClientErrorResponse": "zemcp.core.errors",
        "ClientTimeout": "zemcp.core.errors",
        "URLElicitationRequired": "zemcp.core.errors",
    },
    "zemcp.schemas": {
        "to_python": "zemcp.core.type_schemas",
        "elicitation_schema": "zemcp.core.forms",
        "from_content": "zemcp.core.forms",
        "form_field": "zemcp.core.forms",
        "docstring_summary": "zemcp.core.docstrings",
    },
    "zemcp.responses": {
        "log": "zemcp.replies.encoding",
        "PEER_CHECK_INTERVAL": "zemcp.replies.streams",
        "ONCE_TICK": "zemcp.replies.streams",
    },
    "zemcp.client": {
        "EXECUTE_TOOL": "zemcp.cli.directives",
        "DELETE_OK": "zemcp.cli.rpc",
        "ClientError": "zemcp.cli.clienterrors",
        "DirectiveError": "zemcp.cli.clienterrors",
        "RpcError": "zemcp.cli.clienterrors",
        "SseEvent": "zemcp.cli.sse",
        "SseParser": "zemcp.cli.sse",
        "Directive": "zemcp.cli.directives",
        "parse_duration": "zemcp.cli.directives",
    },
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old names of :data:`MOVED` and loads each as the module it moved to."""

    def __init__(self) -> None:
        # Old name -> the new module's own spec, which the import system replaces by the alias's.
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec loading ``fullname`` as its new module when it is an old name, else None."""
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """The new module of the old name ``spec.name``, after the ``DeprecationWarning``.

        The module also answers, from then on, the names of the old module that went to
        sibling modules (:data:`MOVED_NAMES`).
        """
        new = MOVED[spec.name]
        # One level up is the import system's code, which warnings skips (its frames are
        # importlib._bootstrap's): the warning is reported at the statement that imported.
        warnings.warn(moved_message(spec.name, new), DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        if spec.name in MOVED_NAMES:
            _forward_moved_names(module, spec.name)
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Give the module its own spec back (the import system set the alias's on it)."""
        alias = module.__spec__.name if module.__spec__ is not None else ""
        module.__spec__ = self._specs.pop(alias, module.__spec__)


class _MovedNames:
    """A module's ``__getattr__`` (PEP 562) that answers the names an old path had in a
    sibling module: ``from zemcp.session import SessionRegistry`` finds the class in
    :mod:`zemcp.state.registry`.

    Args:
        module: the new module of the old path ``old``.
        old: a key of :data:`MOVED_NAMES`.
        chained: the module's own ``__getattr__``, asked for every other name; None if it
            has none.
    """

    def __init__(self, module: ModuleType, old: str, chained: Callable[[str], Any] | None) -> None:
        self._module = module.__name__
        self._old = old
        self._names = MOVED_NAMES[old]
        self._chained = chained

    def __call__(self, name: str) -> Any:
        """The object ``name`` of the old module, from the module that defines it now.

        Args:
            name: an attribute the module itself does not have.
        Returns:
            The object, after a ``DeprecationWarning`` naming its module.
        Raises:
            AttributeError: ``name`` is not one of the old module's moved names (nor known
                to the module's own ``__getattr__``).
        """
        new = self._names.get(name)
        if new is None:
            if self._chained is not None:
                return self._chained(name)
            raise AttributeError(f"module {self._module!r} has no attribute {name!r}")
        # The module's attribute lookup calls this directly: one level up is the code that
        # asked for the name (the ``from ... import`` statement).
        warnings.warn(moved_message(f"{self._old}.{name}", new), DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)


def _forward_moved_names(module: ModuleType, old: str) -> None:
    """Give ``module`` (the new module of ``old``) the ``__getattr__`` that answers the old
    module's moved names, once, in front of any ``__getattr__`` it has."""
    current = module.__dict__.get("__getattr__")
    if not isinstance(current, _MovedNames):
        module.__dict__["__getattr__"] = _MovedNames(module, old, current)


def install() -> None:
    """Make the old names importable (idempotent; ``import zemcp`` calls it).

    The finder goes first in ``sys.meta_path``: a stale file of the flat layout (a leftover
    ``build/`` directory, an old wheel's files) must not win over the alias. It answers only
    the old names, with one dict lookup for every other import.
    """
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Alias())
