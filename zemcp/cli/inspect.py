"""What a server offers, as an operator reads it: ``zemcp inspect``, ``manage.py zemcp inspect``,
``flask zemcp inspect``.

:func:`describe` lists every tool, resource, resource template and prompt as ``tools/list``,
``resources/list``, ``resources/templates/list`` and ``prompts/list`` define them (MCP
server/tools, server/resources, server/prompts), with who may use each: its ``permission=``
rule and the OAuth scopes it needs, and the server's implementation info (``serverInfo``).
Nothing is filtered: an operator sees what no single user may. :func:`render` words it for a
terminal.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from zemcp.core.server import Server

#: The lists, in the order they are shown: (key of the description, kind of its access rules, key of an item).
LISTS = (
    ("tools", "tool", "name"),
    ("resources", "resource", "uri"),
    ("resourceTemplates", "resource", "uriTemplate"),
    ("prompts", "prompt", "name"),
)

#: Enough to hold every registration on one page.
_EVERYTHING = 1 << 30


def describe(server: Server) -> dict[str, Any]:
    """Everything ``server`` registered, with who may use it.

    Args:
        server: the server.
    Returns:
        ``{"name", "version", "title"?, "description"?, "websiteUrl"?, "icons"?, "tools": [...],
        "resources": [...], "resourceTemplates": [...], "prompts": [...]}`` (the server's
        ``Implementation`` as the newest handshake version shows it, then the lists): each item is its definition as the list method gives it, plus
        ``"permission"`` (the rule of ``permission=``: its permission names joined by ``and``, or
        the callable's dotted name; None for everyone) and ``"scopes"`` (the OAuth scopes it
        needs, possibly empty).
    """
    items: dict[str, list[dict[str, Any]]] = {
        "tools": server.tools.definitions(),
        "resources": server.resources.list_result({}, _EVERYTHING)["resources"],
        "resourceTemplates": server.resources.templates_result({}, _EVERYTHING)["resourceTemplates"],
        "prompts": server.prompts.list_result({}, _EVERYTHING)["prompts"],
    }
    rules = server.permission_table
    scopes = server.scope_table
    description: dict[str, Any] = dict(server.implementation())
    for field, kind, key in LISTS:
        description[field] = [
            {
                **item,
                "permission": _rule(rules.get((kind, item[key]))),
                "scopes": list(scopes.get((kind, item[key]), ())),
            }
            for item in items[field]
        ]
    return description


def render(description: dict[str, Any]) -> str:
    """``description`` (from :func:`describe`) as text: a heading per list, a paragraph per item.

    Returns:
        the text, ending with a newline.
    """
    counts = ", ".join(f"{len(description[field])} {_label(field, len(description[field]))}" for field, _, _ in LISTS)
    lines = [f"{description['name']} {description['version']}: {counts}"]
    for key in ("title", "description", "websiteUrl"):
        if description.get(key):
            lines.append(f"  {key}: {description[key]}")
    lines += _decorations(description, "  ")
    for field, _, key in LISTS:
        if not description[field]:
            continue
        lines += ["", _label(field, 2)]
        for item in description[field]:
            summary = item.get("title") or (item.get("description") or "").split("\n", 1)[0]
            lines.append(f"  {item[key]}" + (f": {summary}" if summary else ""))
            lines.append(f"    permission: {item['permission'] or 'everyone'}")
            if item["scopes"]:
                lines.append(f"    scopes: {' '.join(item['scopes'])}")
            for schema in ("inputSchema", "outputSchema"):
                if schema in item:
                    lines.append(f"    {schema}: {json.dumps(item[schema], separators=(',', ':'))}")
            if "arguments" in item:
                arguments = ", ".join(a["name"] + ("" if a.get("required") else "?") for a in item["arguments"])
                lines.append(f"    arguments: {arguments or 'none'}")
            if item.get("mimeType"):
                lines.append(f"    mimeType: {item['mimeType']}")
            lines += _decorations(item, "    ")
    return "\n".join(lines) + "\n"


def _decorations(item: dict[str, Any], indent: str) -> list[str]:
    """A line for ``item``'s icons (their sources, clipped: a ``data:`` URI is long) and one for its ``_meta``."""
    lines = []
    if item.get("icons"):
        sources = ", ".join(
            _clip(icon["src"]) + (f" ({icon['theme']})" if "theme" in icon else "") for icon in item["icons"]
        )
        lines.append(f"{indent}icons: {sources}")
    if item.get("_meta"):
        lines.append(f"{indent}_meta: {json.dumps(item['_meta'], separators=(',', ':'))}")
    return lines


def _clip(src: str) -> str:
    return src if len(src) <= 60 else src[:57] + "..."


def _rule(rule: Callable[[Any], bool] | None) -> str | None:
    if rule is None:
        return None
    if hasattr(rule, "names"):  # NamedPermissions: the names say it
        return str(rule)
    return f"{getattr(rule, '__module__', '?')}.{getattr(rule, '__qualname__', type(rule).__qualname__)}"


def _label(field: str, count: int) -> str:
    words = {"tools": "tool", "resources": "resource", "resourceTemplates": "resource template", "prompts": "prompt"}
    return words[field] + ("" if count == 1 else "s")
