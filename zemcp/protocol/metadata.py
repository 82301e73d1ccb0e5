"""The ``_meta`` a server author attaches to a definition or a result, checked against the key rules.

MCP 2025-11-25 basic/index "``_meta``" (unchanged in 2026-07-28): a key is an optional
**prefix** (dot-separated labels, each starting with a letter and ending with a letter or a
digit, hyphens inside, then ``/``) and a **name** (empty, or starting and ending with an
alphanumeric character, with ``-``, ``_``, ``.`` and alphanumerics inside). A prefix whose
second label is ``modelcontextprotocol`` or ``mcp`` (``io.modelcontextprotocol/``,
``dev.mcp/``) is reserved for the protocol itself: zemcp writes what the protocol defines
there (``io.modelcontextprotocol/serverInfo``, the related task), so an author may not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_LABEL = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_PREFIX = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_NAME = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?")
#: Second labels of a prefix the protocol keeps for itself.
RESERVED_LABELS = frozenset({"modelcontextprotocol", "mcp"})


def key_problem(key: Any) -> str | None:
    """What is wrong with ``key`` as a ``_meta`` key an author sets, or None when it is fine.

    Args:
        key: the key.
    Returns:
        None, or the rule it breaks, worded for an error message (``"the prefix
        'io.modelcontextprotocol/' is reserved for MCP itself ..."``).
    """
    if not isinstance(key, str) or not key:
        return "a key must be a non-empty string"
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not _PREFIX.fullmatch(prefix):
            return (
                f"the prefix {prefix + '/'!r} must be dot-separated labels that start with a letter, end "
                "with a letter or a digit and hold only letters, digits and hyphens (such as 'com.example/')"
            )
        labels = prefix.split(".")
        if len(labels) > 1 and labels[1].lower() in RESERVED_LABELS:
            return (
                f"the prefix {prefix + '/'!r} is reserved for MCP itself (its second label is "
                f"{labels[1]!r}); use a reverse-DNS prefix of your own, such as 'com.example/'"
            )
    if not _NAME.fullmatch(name):
        return (
            f"the name {name!r} must start and end with a letter or a digit and hold only letters, "
            "digits, '-', '_' and '.'"
        )
    return None


def checked_meta(meta: Any, where: str) -> dict[str, Any]:
    """``meta`` checked as an author's ``_meta`` object, copied.

    Args:
        meta: a mapping of ``_meta`` keys (:func:`key_problem`) to JSON values.
        where: what it belongs to, for the message (``"tool 'add'"``, ``"the result of tool 'add'"``).
    Returns:
        a plain dict of the same items.
    Raises:
        ValueError: not a mapping, a key that breaks the rules (the message names ``where``,
            the key and the rule), or a value with no JSON form.
    """
    if not isinstance(meta, Mapping):
        raise ValueError(f"{where}: _meta must be a dict of keys to JSON values, got {type(meta).__name__}")
    for key, value in meta.items():
        problem = key_problem(key)
        if problem is not None:
            raise ValueError(f"{where}: _meta key {key!r}: {problem} (MCP basic/index, '_meta')")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: _meta key {key!r}: the value must be JSON ({exc})") from None
    return dict(meta)
