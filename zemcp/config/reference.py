"""The settings reference of ``docs/configuration.md``, generated from the settings' declarations.

The table of every setting and the list of range checks are written from the declarations
of :class:`zemcp.config.Settings` (:mod:`zemcp.config.declaration`) and the rules between
settings (:data:`zemcp.config.checks.RULES_BETWEEN_SETTINGS`), between two markers of the
file; the prose around them is written by hand. After changing a declaration::

    python -m zemcp.config.reference --write docs/configuration.md

Without ``--write`` the generated part is printed. A unit test fails while the file differs.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zemcp.config.checks import RULES_BETWEEN_SETTINGS
from zemcp.config.declaration import Check, Declaration, Kind, declarations
from zemcp.config.environment import variable
from zemcp.config.settings import Settings

BEGIN = (
    "<!-- Generated from the declarations of zemcp.Settings (zemcp/config/settings.py) by "
    "`python -m zemcp.config.reference --write docs/configuration.md`: edit those, not this. -->"
)
END = "<!-- End of the generated settings reference. -->"

#: The type each kind shows.
_TYPES: dict[Kind, str] = {
    "str": "str",
    "seconds": "float",
    "number": "float",
    "int": "int",
    "int or unset": "int or unset",
    "bool": "bool",
    "list": "tuple of str",
    "words": "tuple of str",
}
#: The unit each kind shows when its declaration names none.
_UNITS: dict[Kind, str] = {"seconds": "seconds", "number": "fraction", "bool": "on/off"}

#: Variables zemcp reads outside ``Settings``: (the field whose row they follow, the variable,
#: what the reference says in place of a field, the declaration).
OUTSIDE_SETTINGS: tuple[tuple[str, str, str, Declaration], ...] = (
    (
        "otel",
        "ZEMCP_SPEED",
        "none: read once per process, when zemcp is imported",
        Declaration(
            kind="str",
            unit="`auto` or `off`",
            default="`auto`",
            doc="""`auto`: use the compiled libraries of the optional extra `zemcp[speed]` when they are installed:
            orjson to decode and encode the JSON-RPC messages, jsonschema-rs to tell whether tool arguments and
            outputs and elicitation answers are valid (jsonschema still words every error, and alone checks schemas
            with `pattern`, `patternProperties`, `multipleOf`, asserted `format`s, `$dynamicRef`, the `content*`
            keywords, `$id`, `$anchor`, `$schema` or references that leave the schema, and values the two read
            differently: infinite and NaN floats, tuples). `off`: the standard library's json and jsonschema alone,
            installed or not. Either way the messages on the wire are the same, byte for byte
            ([performance.md](performance.md#the-speed-extra)). Either word in any case; any other value stops the
            server at start-up.""",
        ),
    ),
)


def _cell(markdown: str) -> str:
    # One line of a table cell: blanks collapsed, a pipe escaped so it does not end the cell.
    return " ".join(markdown.split()).replace("|", "\\|")


def _default(item: dataclasses.Field[Any], declaration: Declaration) -> str:
    if declaration.default:
        return declaration.default
    value = item.default
    if value is None:
        text = "unset"
    elif isinstance(value, bool):
        text = "`on`" if value else "`off`"
    elif value in ("", ()):
        text = "empty"
    elif isinstance(value, tuple):
        text = f"`{','.join(value)}`"
    elif isinstance(value, float) and value.is_integer():
        text = f"`{int(value)}`"
    else:
        text = f"`{value}`"
    return f"{text} ({declaration.note})" if declaration.note else text


def _row(variables: Sequence[str], fields: str, declaration: Declaration, default: str) -> list[str]:
    unit = declaration.unit or _UNITS.get(declaration.kind, "")
    return [", ".join(variables), fields, _TYPES[declaration.kind], unit, default, declaration.doc]


def table() -> str:
    """The table of every setting: variable, field, type, unit, default and what it does.

    Returns:
        Markdown, one row a setting (settings declared with ``shares_row`` in the row before
        theirs), in the order of the fields, with :data:`OUTSIDE_SETTINGS` after their fields.
    """
    rows: list[list[str]] = []
    names: list[list[str]] = []
    for name, (item, declaration) in declarations(Settings).items():
        if declaration.shares_row:
            names[-1].append(name)
            rows[-1][0] += f", `{variable(name)}`"
            continue
        names.append([name])
        rows.append(_row([f"`{variable(name)}`"], "", declaration, _default(item, declaration)))
        for after, var, instead, outside in OUTSIDE_SETTINGS:
            if after == name:
                names.append([])
                rows.append(_row([f"`{var}`"], instead, outside, outside.default))
    lines = [
        "| Environment variable | Python field | Type | Unit | Default | What it does |",
        "|---|---|---|---|---|---|",
    ]
    for fields, row in zip(names, rows, strict=True):
        if fields:
            row[1] = ", ".join(f"`{name}`" for name in fields)
        lines.append("|" + "|".join(f" {_cell(cell)} " if cell else " " for cell in row) + "|")
    return "\n".join(lines) + "\n"


def range_checks() -> str:
    """The rules each value must follow, from the declared checks and the rules between settings.

    Returns:
        Markdown: a list of the settings of each rule alone, then a list of the rules between
        settings.
    """
    groups: dict[int, tuple[Check, list[str]]] = {}
    for name, (_, declaration) in declarations(Settings).items():
        check = declaration.check
        if check is not None and check.rule:
            groups.setdefault(id(check), (check, []))[1].append(name)
    alone = [f"{', '.join(f'`{name}`' for name in names)}: {check.rule}." for check, names in groups.values()]
    return (
        _wrapped(
            "Range checks: a value that breaks one makes building the `Settings` raise `ValueError`, "
            "naming the setting and the form expected. Each setting alone:"
        )
        + "\n"
        + "".join(_wrapped(item, "- ") for item in alone)
        + "\nBetween settings:\n\n"
        + "".join(_wrapped(rule, "- ") for rule in RULES_BETWEEN_SETTINGS)
    )


def _wrapped(text: str, bullet: str = "") -> str:
    # Lines of the width of the hand-written prose around (a line break inside code shows as a blank).
    lines = textwrap.wrap(
        text,
        95,
        initial_indent=bullet,
        subsequent_indent=" " * len(bullet),
        break_long_words=False,
        break_on_hyphens=False,
    )
    return "\n".join(lines) + "\n"


def markdown() -> str:
    """The generated part of ``docs/configuration.md``: :func:`table`, then :func:`range_checks`,
    between the :data:`BEGIN` and :data:`END` markers.

    Returns:
        Markdown ending with a newline.
    """
    return f"{BEGIN}\n\n{table()}\n{range_checks()}\n{END}\n"


def replace_generated(text: str) -> str:
    """``text`` with its generated part (from :data:`BEGIN` to :data:`END`) replaced by :func:`markdown`.

    Args:
        text: the contents of ``docs/configuration.md``.
    Returns:
        the same text, the generated part made current.
    Raises:
        ValueError: the text lacks a marker.
    """
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no generated settings reference in the text: it needs the lines {BEGIN!r} and {END!r}")
    return text[:start] + markdown() + text[end + len(END) :].removeprefix("\n")


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m zemcp.config.reference [--write FILE]``: print the generated part, or write it
    into FILE between its markers.

    Args:
        argv: the arguments; ``sys.argv[1:]`` when omitted.
    """
    parser = argparse.ArgumentParser(
        prog="python -m zemcp.config.reference", description="The settings reference of docs/configuration.md."
    )
    parser.add_argument("--write", metavar="FILE", type=Path, help="replace the generated part of FILE")
    args = parser.parse_args(argv)
    if args.write is None:
        sys.stdout.write(markdown())
        return
    args.write.write_text(replace_generated(args.write.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main()
