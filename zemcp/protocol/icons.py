"""Icons of a server, tool, resource, resource template or prompt (MCP 2025-11-25 ``Icon``, SEP-973).

An icon is ``{"src", "mimeType"?, "sizes"?, "theme"?}`` (schema ``Icon``); a definition
carries a list of them as ``icons``. zemcp accepts only ``https:`` and ``data:`` sources:
basic/index "icons" tells clients to use nothing else and to reject ``javascript:``,
``file:``, ``ftp:``, ``ws:`` and local app schemes, so an icon with any other source would be
dropped by a careful client without a word; refusing it at registration says so at once.
Plain ``http:`` is refused for the same reason (an icon fetched in clear can be swapped on
the way).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

#: The ``theme`` values of the schema.
THEMES = ("light", "dark")
_SIZE = re.compile(r"[1-9][0-9]*x[1-9][0-9]*|any")
_MIME = re.compile(r"[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+")
_KEYS = frozenset({"src", "mimeType", "sizes", "theme"})


@dataclass(frozen=True)
class Icon:
    """One icon (MCP 2025-11-25 schema ``Icon``).

    Attributes:
        src: an ``https:`` URL or a ``data:`` URI (``data:image/png;base64,...``).
        mime_type: the image's MIME type (``mimeType``), when the source does not say it well.
        sizes: the sizes it fits, each ``WxH`` (``"48x48"``) or ``"any"`` (a scalable image).
        theme: ``"light"`` (drawn for a light background) or ``"dark"``; None for either.
    """

    src: str
    mime_type: str | None = None
    sizes: tuple[str, ...] = ()
    theme: str | None = None

    def definition(self) -> dict[str, Any]:
        """The icon as the protocol carries it: ``{"src", "mimeType"?, "sizes"?, "theme"?}``."""
        entry: dict[str, Any] = {"src": self.src}
        if self.mime_type is not None:
            entry["mimeType"] = self.mime_type
        if self.sizes:
            entry["sizes"] = list(self.sizes)
        if self.theme is not None:
            entry["theme"] = self.theme
        return entry


def checked_icons(icons: Any, where: str) -> list[dict[str, Any]]:
    """Registration ``icons=`` checked and shaped as the ``icons`` list of a definition.

    Args:
        icons: a list of :class:`Icon` and of dicts in the schema's shape
            (``{"src", "mimeType"?, "sizes"?, "theme"?}``); None for none.
        where: what they belong to, for the message (``"tool 'add'"``).
    Returns:
        the icons as dicts, in order.
    Raises:
        ValueError: not a list, an item that is neither, an unknown key, a ``src`` that is not
            an ``https:`` URL or a ``data:`` URI, a malformed ``mimeType`` or size, or a
            ``theme`` other than ``light`` and ``dark`` (the message names ``where``, the icon
            and the rule).
    """
    if icons is None:
        return []
    if isinstance(icons, (str, bytes, Mapping, Icon)) or not isinstance(icons, Iterable):
        raise ValueError(f"{where}: icons must be a list of zemcp.Icon or of dicts with 'src', got {icons!r:.100}")
    return [_checked(icon, f"{where}: icon {n}") for n, icon in enumerate(icons, 1)]


def _checked(icon: Any, where: str) -> dict[str, Any]:
    if isinstance(icon, Icon):
        if isinstance(icon.sizes, str):
            raise ValueError(f"{where}: sizes must be a list, not a string: ({icon.sizes!r},)")
        entry = icon.definition()
    elif isinstance(icon, Mapping):
        if isinstance(icon.get("sizes"), str):
            raise ValueError(f"{where}: sizes must be a list, not a string: ['{icon['sizes']}']")
        unknown = sorted(str(key) for key in icon if key not in _KEYS)
        if unknown:
            raise ValueError(
                f"{where}: unknown key(s) {', '.join(unknown)}; an icon has src, mimeType, sizes and theme"
            )
        entry = dict(icon)
        if isinstance(entry.get("sizes"), tuple):
            entry["sizes"] = list(entry["sizes"])
    else:
        raise ValueError(f"{where}: must be a zemcp.Icon or a dict with 'src', got {type(icon).__name__}")
    _check_src(entry.get("src"), where)
    mime_type = entry.get("mimeType")
    if mime_type is not None and (
        not isinstance(mime_type, str) or not _MIME.fullmatch(mime_type) or not mime_type.lower().startswith("image/")
    ):
        raise ValueError(f"{where}: mimeType must be an image's MIME type such as 'image/png', got {mime_type!r}")
    sizes = entry.get("sizes")
    if sizes is not None and (
        not isinstance(sizes, list) or not all(isinstance(s, str) and _SIZE.fullmatch(s) for s in sizes)
    ):
        raise ValueError(f"{where}: sizes must be a list of 'WxH' (such as '48x48') or 'any', got {sizes!r}")
    theme = entry.get("theme")
    if theme is not None and theme not in THEMES:
        raise ValueError(f"{where}: theme must be 'light' or 'dark' (or left out for either), got {theme!r}")
    return entry


def _check_src(src: Any, where: str) -> None:
    if not isinstance(src, str) or not src:
        raise ValueError(f"{where}: src must be an https: URL or a data: URI, got {src!r:.100}")
    parts = urlsplit(src)
    scheme = parts.scheme.lower()
    if scheme == "https" and parts.netloc:
        return
    if scheme == "data" and "," in src:
        _check_data(src, where)
        return
    raise ValueError(
        f"{where}: src {src[:100]!r} must be an https: URL with a host or a data: URI "
        "(data:image/png;base64,...): clients reject icons from any other scheme "
        "(MCP basic/index, 'icons'), so serve the image over https or inline it"
    )


def _check_data(src: str, where: str) -> None:
    """A ``data:`` icon holds an image: an ``image/`` media type, and valid base64 when it says so."""
    header, _, payload = src[len("data:") :].partition(",")
    media_type = header.split(";", 1)[0].strip().lower()
    if not media_type.startswith("image/"):
        raise ValueError(
            f"{where}: a data: icon must hold an image (data:image/png;base64,...), got the media type "
            f"{media_type or 'none'!r}"
        )
    if header.lower().endswith(";base64"):
        try:
            base64.b64decode(payload, validate=True)
        except binascii.Error:
            raise ValueError(f"{where}: the data: icon's base64 does not decode; encode the image again") from None
