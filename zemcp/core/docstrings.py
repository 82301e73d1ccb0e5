"""Descriptions from Google-style docstrings: the first paragraph, which describes a tool,
prompt or resource, and the entries of the ``Args:`` and ``Attributes:`` sections, which
describe a parameter or field. Pure Python: no HTTP here.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any

_SECTION = re.compile(r"^[A-Z][A-Za-z ]*:$")
_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_ENTRY_SECTIONS = {"Args:", "Arguments:", "Parameters:", "Attributes:"}


def docstring_entries(obj: Any) -> dict[str, str]:
    """Descriptions by name from the ``Args:``/``Attributes:`` sections of a Google-style docstring."""
    entries: dict[str, str] = {}
    current: str | None = None
    depth: int | None = None
    for line in _doc_lines(obj):
        indent = len(line) - len(line.lstrip())
        text = line.strip()
        if indent == 0 and text:
            current, depth = None, None
            if text in _ENTRY_SECTIONS:
                current = ""
            continue
        if current is None or not text:
            continue
        if depth is None:
            depth = indent
        match = _ENTRY.match(text) if indent == depth else None
        if match:
            current = match.group(1)
            entries[current] = match.group(2)
        elif current:
            entries[current] = f"{entries[current]} {text}".strip()
    return entries


def docstring_summary(obj: Any) -> str | None:
    """The first paragraph of a docstring, before any section such as ``Args:``, on one line.

    Args:
        obj: a function or class.
    Returns:
        the text, or None when there is none.
    """
    paragraph: list[str] = []
    for line in _doc_lines(obj):
        text = line.strip()
        if _SECTION.match(text) and line == text:
            break
        if not text:
            if paragraph:
                break
            continue
        paragraph.append(text)
    return " ".join(paragraph) or None


def doc_source(obj: Any) -> Any:
    """What documents ``obj``: a ``functools.partial``'s function (not the partial class's own
    docstring), a callable object's ``__call__`` when that has a docstring, else ``obj``."""
    while isinstance(obj, functools.partial):
        obj = obj.func
    if not (inspect.isroutine(obj) or inspect.isclass(obj) or inspect.ismodule(obj)) and callable(obj):
        call = type(obj).__call__
        if isinstance(getattr(call, "__doc__", None), str):
            return call
    return obj


def _doc_lines(obj: Any) -> list[str]:
    # __doc__ itself: inspect.getdoc would borrow a base class's text (dict's for a TypedDict).
    doc = getattr(doc_source(obj), "__doc__", None)
    if not isinstance(doc, str):
        return []
    return inspect.cleandoc(doc).splitlines()
