"""One declaration per setting: its kind, unit, default, check and description, in one place.

Each field of :class:`zemcp.config.Settings` is made by :func:`setting`, which keeps a
:class:`Declaration` in the field's metadata. The environment parsing
(:mod:`zemcp.config.environment`), the checks (:mod:`zemcp.config.checks`) and the settings
reference of ``docs/configuration.md`` (:mod:`zemcp.config.reference`) all read it from there,
so a setting is written once, gunicorn-style.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

#: How a setting's variable parses and which type the reference shows: ``str`` as it is;
#: ``seconds`` and ``number`` a float (``seconds`` a duration); ``int`` and ``int or unset`` a
#: whole number; ``bool`` on/off; ``list`` comma-separated strings; ``words`` a string its
#: check splits on commas and spaces.
Kind = Literal["str", "seconds", "number", "int", "int or unset", "bool", "list", "words"]

#: The key of a field's metadata that holds its :class:`Declaration`.
METADATA_KEY = "zemcp.setting"

T = TypeVar("T")


@dataclass(frozen=True)
class Check:
    """What one setting may be, alone: the rule as the reference states it, and its test.

    Attributes:
        rule: the rule in Markdown, completing "``<field>`` must be ..." in the reference:
            ``"a positive, finite number of seconds"``.
        run: ``(field name, value) -> normalized value``; raises ``ValueError`` naming the
            setting and the form expected when the value is out of range or malformed.
    """

    rule: str
    run: Callable[[str, Any], Any]


@dataclass(frozen=True)
class Declaration:
    """Everything about one setting besides its name, Python type and default value.

    Attributes:
        kind: how its environment variable parses (:data:`Kind`).
        doc: what it does, in Markdown: the reference's description (blanks collapsed, so it
            may be wrapped freely).
        unit: the unit or form of a value, in Markdown; empty takes the kind's (``seconds``,
            ``fraction`` of ``number``, ``on/off`` of ``bool``).
        default: the reference's default, in Markdown, when the value does not say it (a
            random or derived default); empty shows the value.
        note: a few words the reference adds after the default, in brackets (``30 min``).
        check: the rule of this setting alone, or None; rules between settings are
            :func:`zemcp.config.checks.check`'s.
        shares_row: the reference lists this setting in the row of the one declared before it
            (two halves of one credential).
    """

    kind: Kind
    doc: str
    unit: str = ""
    default: str = ""
    note: str = ""
    check: Check | None = None
    shares_row: bool = False


@overload
def setting(
    default: T,
    *,
    kind: Kind,
    doc: str,
    unit: str = "",
    shown: str = "",
    note: str = "",
    check: Check | None = None,
    secret: bool = False,
    shares_row: bool = False,
) -> T: ...


@overload
def setting(
    *,
    factory: Callable[[], T],
    kind: Kind,
    doc: str,
    unit: str = "",
    shown: str,
    check: Check | None = None,
    secret: bool = False,
) -> T: ...


def setting(
    default: Any = dataclasses.MISSING,
    *,
    factory: Any = dataclasses.MISSING,
    kind: Kind,
    doc: str,
    unit: str = "",
    shown: str = "",
    note: str = "",
    check: Check | None = None,
    secret: bool = False,
    shares_row: bool = False,
) -> Any:
    """A field of ``Settings`` with its declaration (:class:`Declaration`) in its metadata.

    Args:
        default: the value when none is given; or else ``factory``, called for each
            ``Settings`` (then ``shown`` must say the default).
        kind, doc, unit, note, check, shares_row: as :class:`Declaration`'s attributes.
        shown: :attr:`Declaration.default`, the reference's default when the value does not say it.
        secret: never shown in the ``Settings`` repr.
    Returns:
        a ``dataclasses.field`` (typed as the value, for the class body).
    """
    declaration = Declaration(kind, doc, unit, shown, note, check, shares_row)
    metadata = {METADATA_KEY: declaration}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, repr=not secret, metadata=metadata)
    return dataclasses.field(default=default, repr=not secret, metadata=metadata)


def declarations(settings_class: type) -> dict[str, tuple[dataclasses.Field[Any], Declaration]]:
    """The declared fields of a settings dataclass, in their order.

    Args:
        settings_class: a dataclass whose fields :func:`setting` made.
    Returns:
        field name -> (the field, its declaration).
    Raises:
        TypeError: a field was declared without :func:`setting`.
    """
    found: dict[str, tuple[dataclasses.Field[Any], Declaration]] = {}
    for item in dataclasses.fields(settings_class):
        declaration = item.metadata.get(METADATA_KEY)
        if not isinstance(declaration, Declaration):
            raise TypeError(
                f"{settings_class.__name__}.{item.name} is not declared with zemcp.config.declaration.setting"
            )
        found[item.name] = (item, declaration)
    return found
