"""JSON Schema validators made once per schema: jsonschema, with jsonschema-rs for the common
yes when it is installed.

Tool arguments and outputs, and elicitation answers, are checked against JSON Schema 2020-12
on every call. :class:`SchemaValidator` answers :meth:`~SchemaValidator.is_valid` with
jsonschema-rs (installed by the optional extra ``zemcp[speed]``; ``ZEMCP_SPEED=off`` keeps it
unused), which is compiled and many times faster, and leaves every error message to
jsonschema, so that what a client reads never depends on the extra. A schema with a keyword
whose meaning the two libraries implement differently is checked by jsonschema alone:
``pattern`` and ``patternProperties`` (Python's ``re`` against ECMA-262 regular expressions),
``multipleOf`` (float division against exact arithmetic), asserted ``format`` (different
checkers), references that leave the schema, and the ``content*`` keywords. A value
jsonschema-rs cannot take (a string with a lone surrogate) or reads differently (an infinite or
NaN float, a tuple) is checked by jsonschema alone, and a
no from jsonschema-rs is checked again by jsonschema, whose verdict stands.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError

from zemcp.protocol.jsontext import speed_module

#: Keywords that keep a schema on jsonschema alone (see the module's docstring).
PYTHON_ONLY_KEYWORDS = frozenset(
    {
        "pattern",
        "patternProperties",
        "multipleOf",
        "$dynamicRef",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
    }
)


_rs = speed_module("jsonschema_rs")
#: The validator of the common yes: ``"jsonschema-rs"`` or ``"jsonschema"``.
ENGINE = "jsonschema-rs" if _rs is not None else "jsonschema"


class SchemaValidator:
    """A JSON Schema 2020-12 validator of one schema, made once and used for every instance.

    Args:
        schema: the schema (already checked with ``jsonschema.Draft202012Validator.check_schema``
            where it comes from an application).
        formats: assert ``format`` (jsonschema's format checker); False treats ``format`` as an
            annotation, as JSON Schema 2020-12 does by default.
    """

    __slots__ = ("_fast", "_formats", "_python", "schema")

    def __init__(self, schema: Any, formats: bool = False):
        self.schema = schema
        self._formats = formats
        self._python: jsonschema.Draft202012Validator | None = None
        self._fast: Any = None
        if _rs is not None and _fast_enough(schema, formats):
            try:
                self._fast = _rs.Draft202012Validator(schema, validate_formats=False)
            except Exception:  # a schema jsonschema-rs will not compile: jsonschema checks it alone
                self._fast = None
        if self._fast is None:
            self.python()

    def is_valid(self, instance: Any) -> bool:
        """True when ``instance`` satisfies the schema."""
        fast = self._fast
        if fast is not None and _read_alike(instance):
            try:
                if fast.is_valid(instance):
                    return True
            except Exception:  # a value jsonschema-rs cannot convert: jsonschema decides
                pass
        return self.python().is_valid(instance)

    def iter_errors(self, instance: Any) -> Iterator[ValidationError]:
        """Every error of ``instance``, as jsonschema reports them (for ``best_match``)."""
        return self.python().iter_errors(instance)

    def python(self) -> jsonschema.Draft202012Validator:
        """The jsonschema validator of the schema (made at the first use)."""
        validator = self._python
        if validator is None:
            checker = jsonschema.Draft202012Validator.FORMAT_CHECKER if self._formats else None
            validator = self._python = jsonschema.Draft202012Validator(self.schema, format_checker=checker)
        return validator


def _read_alike(instance: Any) -> bool:
    """False when ``instance`` holds a value the two libraries read differently: an infinite
    or NaN float (jsonschema-rs takes infinity within any ``maximum``, and reads it as null in
    a schema), or a tuple (an array to jsonschema-rs, not to jsonschema, whose arrays are
    lists). A loop, not recursion: arguments nest as deep as a client sends them."""
    stack = [instance]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, tuple) or (isinstance(value, float) and not math.isfinite(value)):
            return False
    return True


def _fast_enough(schema: Any, formats: bool) -> bool:
    """True when jsonschema-rs answers ``schema`` exactly as jsonschema does (no keyword of
    :data:`PYTHON_ONLY_KEYWORDS`, no asserted ``format``, only ``#`` references, no value
    that :func:`_read_alike` refuses)."""
    if not _read_alike(schema):
        return False
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in PYTHON_ONLY_KEYWORDS or (formats and key == "format"):
                    return False
                if key in ("$ref", "$id", "$anchor", "$schema") and not (
                    key == "$ref" and isinstance(value, str) and value.startswith("#")
                ):
                    return False
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return True
