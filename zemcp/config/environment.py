"""Settings from the environment: ``ZEMCP_<FIELD NAME IN CAPITALS>``, parsed by the field's type."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

ENV_PREFIX = "ZEMCP_"

#: Tuple fields whose variable is split by the checks (:mod:`zemcp.config.checks`) (on commas and spaces).
_SPLIT_LATER = frozenset({"auth_algorithms", "auth_scopes"})
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
#: Float fields that are not seconds.
_FRACTIONS = frozenset({"client_share"})


def _parse(fields: dict[str, str], name: str, raw: str) -> object:
    var = ENV_PREFIX + name.upper()
    # The field's annotation (a string: annotations are postponed) decides how its variable parses.
    annotation = fields[name]
    if annotation == "bool":
        if raw.lower() in _TRUE | _FALSE:
            return raw.lower() in _TRUE
        raise ValueError(f"{var}={raw!r} is not one of on, off (also 1, 0, true, false, yes, no)")
    kind: type = {"float": float, "str": str}.get(annotation, int)
    if annotation.startswith("tuple"):
        kind = str if name in _SPLIT_LATER else tuple
    if kind is str:
        return raw
    if kind is tuple:
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    try:
        return kind(raw)
    except ValueError:
        unit = ("a number" if name in _FRACTIONS else "a number of seconds") if kind is float else "a whole number"
        raise ValueError(f"{var}={raw!r} is not {unit}") from None


def read(settings_class: type, environ: Mapping[str, str]) -> dict[str, Any]:
    """The field values the ``ZEMCP_*`` variables of ``environ`` set (empty ones are unset).

    Args:
        settings_class: the settings dataclass whose fields are read.
        environ: the variables.
    Returns:
        field name -> parsed value.
    Raises:
        ValueError: a variable does not parse (the message names it and the form expected).
    """
    # Annotations are strings (postponed): they name the field's type.
    fields = {f.name: str(f.type) for f in dataclasses.fields(settings_class)}
    values: dict[str, Any] = {}
    for name in fields:
        raw = environ.get(ENV_PREFIX + name.upper())
        if raw is None or raw.strip() == "":
            continue
        values[name] = _parse(fields, name, raw.strip())
    return values
