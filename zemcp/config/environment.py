"""Settings from the environment: ``ZEMCP_<FIELD NAME IN CAPITALS>``, parsed by the setting's
declared kind (:data:`zemcp.config.declaration.Kind`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zemcp.config.declaration import Kind, declarations

ENV_PREFIX = "ZEMCP_"

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
#: Kinds that parse as a number: kind -> (its type, what the message says a value must be).
_NUMBERS: dict[Kind, tuple[type[int] | type[float], str]] = {
    "seconds": (float, "a number of seconds"),
    "number": (float, "a number"),
    "int": (int, "a whole number"),
    "int or unset": (int, "a whole number"),
}


def variable(name: str) -> str:
    """The environment variable of the setting ``name``: ``ZEMCP_<NAME IN CAPITALS>``."""
    return ENV_PREFIX + name.upper()


def parse(kind: Kind, var: str, raw: str) -> object:
    """One variable's value, parsed by its setting's kind.

    Args:
        kind: the setting's declared kind.
        var: the variable's name, for the message.
        raw: its value, blanks around it removed.
    Returns:
        the value for the field (``words`` stay a string that the setting's check splits).
    Raises:
        ValueError: the value does not parse; the message names the variable and the form expected.
    """
    if kind == "bool":
        if raw.lower() in _TRUE | _FALSE:
            return raw.lower() in _TRUE
        raise ValueError(f"{var}={raw!r} is not one of on, off (also 1, 0, true, false, yes, no)")
    if kind == "list":
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if kind not in _NUMBERS:
        return raw
    number, form = _NUMBERS[kind]
    try:
        return number(raw)
    except ValueError:
        raise ValueError(f"{var}={raw!r} is not {form}") from None


def read(settings_class: type, environ: Mapping[str, str]) -> dict[str, Any]:
    """The field values the ``ZEMCP_*`` variables of ``environ`` set (empty ones are unset).

    Args:
        settings_class: the settings dataclass whose declared fields are read.
        environ: the variables.
    Returns:
        field name -> parsed value.
    Raises:
        ValueError: a variable does not parse (the message names it and the form expected).
    """
    values: dict[str, Any] = {}
    for name, (_, declaration) in declarations(settings_class).items():
        raw = environ.get(variable(name))
        if raw is None or raw.strip() == "":
            continue
        values[name] = parse(declaration.kind, variable(name), raw.strip())
    return values
