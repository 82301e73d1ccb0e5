"""Descriptions from Google-style docstrings (zemcp.core.docstrings)."""

import pytest

from zemcp.core import docstrings


@pytest.mark.parametrize(
    "doc, summary",
    [
        ("One line.", "One line."),
        ("First paragraph\nwrapped.\n\nSecond paragraph.", "First paragraph wrapped."),
        ("Summary.\nArgs:\n    a: text", "Summary."),
        ("Args:\n    a: text", None),
        (None, None),
    ],
)
def test_docstring_summary(doc, summary):
    """The description is the first paragraph before any section, on one line."""

    def handler(): ...

    handler.__doc__ = doc
    assert docstrings.docstring_summary(handler) == summary
