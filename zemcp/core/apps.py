"""A server's MCP Apps: the HTML of its ``ui://`` resources and the tools bound to them.

:meth:`zemcp.core.registrar.Registrar.app_resource` and the ``ui_resource=`` and
``visibility=`` of ``@server.tool`` come here: an app resource's read handler (its HTML
from a string, a file read at each read, or a ``render`` callable such as a site's template),
the ``_meta`` of a bound tool and of an app resource, and the check that every bound tool's
resource exists with the app MIME type, made when the server starts serving
(:meth:`AppBindings.check`). The wire rules are :mod:`zemcp.protocol.apps`'.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from zemcp.core.context import Context
from zemcp.core.resources import ResourceRegistry
from zemcp.protocol import apps
from zemcp.protocol.metadata import checked_meta

#: What ``app_resource(file=...)`` takes: a path.
FilePath = str | os.PathLike[str]


def with_ui(meta: Mapping[str, Any] | None, ui: dict[str, Any], where: str, keyword: str) -> dict[str, Any] | None:
    """``meta`` with ``ui`` as its ``"ui"`` key (left out when ``ui`` is empty): the ``_meta`` of
    a bound tool or an app resource.

    Args:
        meta: the author's other ``_meta`` keys, or None.
        ui: the declared ``_meta.ui``.
        where: the declaration, for messages; ``keyword`` the keyword that declares ``ui``.
    Returns:
        the merged ``_meta``, or None when there is nothing in it.
    Raises:
        ValueError: ``meta`` has a ``"ui"`` key of its own, which would contradict the
            declaration, or breaks the ``_meta`` rules.
    """
    other = {} if meta is None else checked_meta(meta, where)
    if "ui" in other:
        raise ValueError(
            f"{where}: meta has a 'ui' key, but _meta.ui is made from {keyword}; "
            f"drop 'ui' from meta= and use those keywords instead"
        )
    merged = {**other, "ui": ui} if ui else other
    return merged or None


def html_reader(
    uri: str,
    html: str | None,
    file: FilePath | None,
    render: Callable[..., str] | None,
    meta: dict[str, Any] | None,
) -> Callable[[Context], Any]:
    """The read handler of the app resource ``uri``: its HTML, with ``meta`` as the content
    item's ``_meta`` (apps.mdx: the read content carries ``_meta.ui`` too).

    Args:
        uri: the resource's ``ui://`` URI, for messages.
        html: the document, served as given; or
        file: a file holding it (a relative path from the working directory at registration),
            read (UTF-8) at each read, so that an edit shows without a restart; or
        render: called at each read, as ``render()`` or, when it takes a parameter,
            ``render(ctx)`` with the read's :class:`zemcp.Context`; returns the document
            (``django.template.loader.render_to_string``, ``flask.render_template``).
        meta: the content item's ``_meta``, or None for none.
    Returns:
        ``read(ctx)``, which returns ``{"text": html, "_meta"?: meta}``.
    Raises:
        ValueError: not exactly one of ``html``, ``file`` and ``render``, ``html`` not a
            string, ``file`` not an existing file, or ``render`` not callable.
    """
    where = f"app resource {uri!r}"
    given = [name for name, value in (("html", html), ("file", file), ("render", render)) if value is not None]
    if len(given) != 1:
        raise ValueError(
            f"{where}: give exactly one of html= (the document), file= (a path read at each read) or "
            f"render= (a callable, such as a template's rendering); got {', '.join(given) or 'none'}"
        )
    extra = {"_meta": meta} if meta else {}
    if html is not None:
        if not isinstance(html, str):
            raise ValueError(f"{where}: html must be the document as a string, got {type(html).__name__}")
        content = {"text": html, **extra}
        return lambda ctx: content
    if file is not None:
        # Made absolute now: a relative path means the directory the server was started in,
        # whatever the working directory is at a later read.
        path = Path(file).absolute()
        if not path.is_file():
            raise ValueError(
                f"{where}: file {str(path)!r} is not a file; give the path of the app's HTML (a relative path is "
                "taken from the working directory: Path(__file__).with_name('card.html') names one beside your code)"
            )
        return lambda ctx: {"text": path.read_text(encoding="utf-8"), **extra}
    if not callable(render):
        raise ValueError(f"{where}: render must be a callable returning the HTML, got {type(render).__name__}")
    takes_context = bool(inspect.signature(render).parameters)

    def read(ctx: Context) -> dict[str, Any]:
        text = render(ctx) if takes_context else render()
        if not isinstance(text, str):
            raise TypeError(f"{where}: render returned {type(text).__name__}, not the HTML as a string")
        return {"text": text, **extra}

    return read


class AppBindings:
    """Which tool shows which ``ui://`` resource, and which resources are apps.

    Attributes:
        tools: tool name -> the ``ui://`` URI of its ``ui_resource=``.
        resources: URIs registered with ``app_resource``.
    """

    def __init__(self) -> None:
        self.tools: dict[str, str] = {}
        self.resources: set[str] = set()

    def __bool__(self) -> bool:
        """True when the server has an app: the extension is then advertised."""
        return bool(self.tools or self.resources)

    def check(self, resources: ResourceRegistry) -> None:
        """Every bound tool's resource exists and is served as :data:`zemcp.protocol.apps.MIME_TYPE`
        (apps.mdx "Resource Discovery": the resource MUST exist; hosts render no other type).

        Called when the server starts serving (``McpApp(server)``, the stdio transport's
        start), since resources may be registered after the tools that show them.

        Raises:
            ValueError: naming the tool, the URI and the fix.
        """
        for tool, uri in self.tools.items():
            resource = resources.get(uri)
            if resource is None:
                raise ValueError(
                    f"tool {tool!r} shows ui_resource {uri!r}, but no resource has that URI; register it "
                    f"with server.app_resource({uri!r}, html=... or file=... or render=...) before serving"
                )
            if resource.mime_type != apps.MIME_TYPE:
                raise ValueError(
                    f"resource {uri!r}, the ui_resource of tool {tool!r}, is served as {resource.mime_type!r}, "
                    f"but hosts render only {apps.MIME_TYPE!r}; register it with server.app_resource(...) "
                    f"or give server.resource({uri!r}, mime_type={apps.MIME_TYPE!r})"
                )
