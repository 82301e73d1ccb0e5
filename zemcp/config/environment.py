"""Settings from the environment, ``ZEMCP_<FIELD NAME IN CAPITALS>``, and from a site's own
configuration (Django's ``settings.ZEMCP``, Flask's ``app.config["ZEMCP"]``: the same names
without ``ZEMCP_``), parsed by the setting's declared kind (:data:`zemcp.config.declaration.Kind`)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from zemcp.config.declaration import Kind, declarations

ENV_PREFIX = "ZEMCP_"

#: The settings gunicorn's configuration (zemcp.http.gunicorn_conf) reads, or sets in the
#: environment, before it loads the application: a site's configuration cannot set them.
SERVING = frozenset(
    {"bind", "workers", "threads", "access_log", "log_format", "metrics_path", "instance", "request_state_key"}
)

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


def read_mapping(settings_class: type, mapping: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The field values a site's configuration sets: ``{"THREADS": 16, "AUDIT_LOG": True}``.

    Each key is a variable's name without ``ZEMCP_``; a value is what the variable would hold
    (a string) or the Python value it stands for: ``True``/``False`` for on/off, a number,
    a list or tuple of strings for a list; ``None`` leaves the setting unset.

    Args:
        settings_class: the settings dataclass whose declared fields are read.
        mapping: the site's configuration.
        source: how the site names it, for messages (``settings.ZEMCP``).
    Returns:
        field name -> parsed value.
    Raises:
        ValueError: ``mapping`` is not a dict, a key names no setting (the message suggests the
            closest) or one of :data:`SERVING`, or a value is of the wrong form (the message
            names the key and the form expected).
    """
    if not isinstance(mapping, Mapping):
        raise ValueError(
            f"{source} is a {type(mapping).__name__}: make it a dict of zemcp's settings "
            '({"AUDIT_LOG": True, ...}; docs/configuration.md)'
        )
    fields = declarations(settings_class)
    values: dict[str, Any] = {}
    for key, value in mapping.items():
        name = key.lower() if isinstance(key, str) else ""
        if name not in fields:
            known = [field.upper() for field in fields]
            close = difflib.get_close_matches(str(key).upper().removeprefix(ENV_PREFIX), known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(
                f"{source} has no setting {key!r}: {hint}its names are the ZEMCP_* variables' without "
                "ZEMCP_ (docs/configuration.md)"
            )
        if name in SERVING:
            raise ValueError(
                f"{source}[{key!r}] cannot come from the site: gunicorn (gunicorn.conf.py) reads it before the site "
                f"is loaded; set {variable(name)} in gunicorn's environment instead"
            )
        if value is None:
            continue
        where = f"{source}[{key!r}]"
        values[name] = _python_value(fields[name][1].kind, where, value)
    return values


def _python_value(kind: Kind, where: str, value: Any) -> object:
    """One value of a site's configuration as its setting's field holds it."""
    if isinstance(value, str):
        return parse(kind, where, value.strip())
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind in _NUMBERS and isinstance(value, (int, float)) and not isinstance(value, bool):
        number, form = _NUMBERS[kind]
        if number is int and value != int(value):
            raise ValueError(f"{where}={value!r} is not {form}")
        return number(value)
    if kind in ("list", "words") and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value) if kind == "list" else " ".join(value)
    expected = {"bool": "True or False", "list": "a list of strings", "words": "a list of strings"}.get(
        kind, _NUMBERS[kind][1] if kind in _NUMBERS else "a string"
    )
    raise ValueError(f"{where}={value!r} is not {expected} (a string as the ZEMCP_* variable holds it works too)")
