"""Registering what a server offers: tools, resources, prompts and completions, and who may use them.

The decorators of :class:`Registrar` (``@server.tool``, ``@server.resource``,
``@server.prompt``, ``@server.completion``) add to the registries of MCP server/tools,
server/resources and server/prompts, record the OAuth scopes each registration needs, and
announce the change to the clients listening for it (``notifications/*/list_changed``).
:class:`zemcp.core.server.Server` is a :class:`Registrar`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

from zemcp.auth.access import Access
from zemcp.core.apps import AppBindings, FilePath, html_reader, with_ui
from zemcp.core.completions import CompletionRegistry
from zemcp.core.prompts import PromptRegistry, make_prompt
from zemcp.core.resources import ResourceRegistry
from zemcp.core.tools import Tool, ToolRegistry
from zemcp.protocol import apps
from zemcp.protocol.caching import CacheHint
from zemcp.protocol.icons import Icon
from zemcp.state.fanout import FanOut

_F = TypeVar("_F", bound=Callable[..., Any])
#: A registration's ``icons=``: :class:`zemcp.Icon` or dicts in the schema's shape.
Icons = Sequence[Icon | Mapping[str, Any]]


class Registrar:
    """The registries of a server, their decorators, and the scopes each registration needs.

    Args:
        fanout: where change notifications go (the server's shared state).

    Attributes:
        tools, resources, prompts, completions: the registries.
        apps: the tools bound to ``ui://`` resources and the app resources (MCP Apps).
        subscriptions: ``fanout``.
    """

    def __init__(self, fanout: FanOut):
        self.subscriptions = fanout
        # (kind, name or URI) -> scopes a principal needs to see and use it; kinds: tool, prompt, resource.
        self._scopes: dict[tuple[str, str], tuple[str, ...]] = {}
        # (kind, name or URI) -> who may see and use it (permission=); absent: everyone.
        self._permissions: dict[tuple[str, str], Callable[[Any], bool]] = {}
        self.tools = ToolRegistry()
        self.resources = ResourceRegistry()
        self.prompts = PromptRegistry()
        self.completions = CompletionRegistry(self.prompts, self.resources)
        self.apps = AppBindings()

    @overload
    def tool(self, name: _F, /) -> _F: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        structured_output: bool = False,
        annotations: dict[str, Any] | None = None,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        scopes: tuple[str, ...] | list[str] = (),
        permission: Permission = None,
        elicit_missing: bool | list[str] | tuple[str, ...] = False,
        elicit_message: str | None = None,
        rate_limit: str | None = None,
        task: str = "forbidden",
        icons: Icons = (),
        meta: dict[str, Any] | None = None,
        ui_resource: str | None = None,
        visibility: list[str] | tuple[str, ...] | None = None,
    ) -> Callable[[_F], _F]: ...

    def tool(
        self,
        name: str | _F | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        structured_output: bool = False,
        annotations: dict[str, Any] | None = None,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        scopes: tuple[str, ...] | list[str] = (),
        permission: Permission = None,
        elicit_missing: bool | list[str] | tuple[str, ...] = False,
        elicit_message: str | None = None,
        rate_limit: str | None = None,
        task: str = "forbidden",
        icons: Icons = (),
        meta: dict[str, Any] | None = None,
        ui_resource: str | None = None,
        visibility: list[str] | tuple[str, ...] | None = None,
    ) -> _F | Callable[[_F], _F]:
        """Decorator registering a function as a tool: ``@server.tool`` or ``@server.tool(...)``.

        The input schema comes from the function's typed parameters (see
        :class:`zemcp.core.tools.Tool` and docs/authoring.md). Like every handler below, the
        function may be ``async def``: each call then runs in an event loop of its own
        (:mod:`zemcp.core.coroutines`, docs/authoring.md "Async handlers").

        Args:
            name: the tool name; the function's name when omitted.
            title: optional display name.
            description: shown to the model; the docstring's first paragraph when omitted.
            input_schema: JSON Schema of the arguments, used verbatim; derived from the
                signature when omitted.
            output_schema: JSON Schema of the structured result; the return value is then
                the ``structuredContent``.
            structured_output: derive the output schema from the return annotation (a
                pydantic model as the return annotation derives it without).
            annotations: ToolAnnotations (``title``, ``readOnlyHint``, ``destructiveHint``,
                ``idempotentHint``, ``openWorldHint``).
            ttl_ms, cache_scope: this tool's part of the ``tools/list`` caching hint
                (2026-07-28, see :mod:`zemcp.protocol.caching`): [milliseconds] and ``"public"`` or
                ``"private"``.
            scopes: OAuth scopes a caller needs, with authorization on, to see the tool in
                ``tools/list`` and to call it (403 ``insufficient_scope`` otherwise).
            permission: who may see and use it: a permission name (``"app.codename"``,
                checked with the request's user's ``has_perm``), a list of them (all needed),
                or a callable ``permission(user) -> bool``; the user is the one the site's
                authentication established, else the OAuth principal (None without either).
                What a user may not use is left out of the lists and refused as an unknown
                name, so nothing tells that it exists (docs/security.md, "Permissions").
            elicit_missing: when a call lacks arguments, ask the user for all of them in one
                form elicitation before the handler runs, in either era (docs/elicitation.md,
                "Asking for missing arguments"): True for the required arguments a form can
                ask for (string, number, integer, boolean), or a list of argument names,
                asked for whenever they are absent or blank, required or not. Without the
                client's elicitation capability such a call ends with the ``isError`` text
                ``Error: missing required argument: <names>``.
            elicit_message: the question shown with that form (``"<title or name> needs:
                <fields>"`` when omitted).
            rate_limit: a token bucket per client for this tool's calls over HTTP, such as
                ``"5/minute"`` (``<count>/<second|minute|hour>``, optionally ``burst <n>``);
                each call takes a token from it and from the server's ``ZEMCP_RATE_LIMIT``
                bucket, and a call that finds it empty gets 429 (docs/observability.md,
                "Rate limits"). It wins over the tool's entry in ``ZEMCP_RATE_LIMIT_TOOLS``.
            task: whether a call may run as a task (MCP tasks, docs/tasks.md): ``"forbidden"``
                (the default: never), ``"optional"`` (when the client asks for one) or
                ``"required"`` (only as a task; a client that cannot ask for one gets an
                error naming what it lacks). The same handler serves both ways.
            icons: icons a client may show with it (MCP 2025-11-25 ``Icon``):
                :class:`zemcp.Icon` or dicts ``{"src", "mimeType"?, "sizes"?, "theme"?}``; the
                source an ``https:`` URL or a ``data:`` URI (docs/apps.md, "Icons"). Clients of
                versions before 2025-11-25 get none.
            meta: its ``_meta`` (a dict): keys an optional reverse-DNS prefix and a name, no
                prefix whose second label is ``modelcontextprotocol`` or ``mcp`` (MCP
                basic/index, "_meta"; docs/apps.md, "_meta"), values JSON.
            ui_resource: the ``ui://`` resource (:meth:`app_resource`) a host that renders MCP
                Apps shows the tool's results in: ``_meta.ui.resourceUri`` (MCP Apps
                2026-01-26, "Resource Discovery"; docs/apps.md, "MCP Apps"). It must exist,
                with the app MIME type, when the server starts serving.
            visibility: with ``ui_resource``, who may call the tool: ``["model", "app"]`` (the
                default when left out), ``["app"]`` for a tool only the app calls (the host
                hides it from the model; it stays listed and callable) or ``["model"]``.
        Returns:
            the decorator, which returns the function unchanged (bare use: the function).
        Raises:
            ValueError: a bad or taken name, a schema that is not an object schema, bad
                annotations or ``x-mcp-header`` marks, a bad caching hint, an
                ``elicit_missing`` that names an unknown argument or one a form cannot ask
                for (or, as True, finds none), a blank ``elicit_message``, a
                ``rate_limit`` that is not a rate, a ``permission`` that is none of the forms
                above, bad ``icons`` or a ``meta`` key that breaks the rules (the message names
                the icon or key and the rule), a ``ui_resource`` that is not ``ui://``, a bad
                ``visibility`` or one without ``ui_resource``, or a ``meta`` with a ``"ui"``
                key (``ui_resource=`` and ``visibility=`` declare it).
            TypeError: a parameter or return type that cannot be expressed as JSON Schema,
                or an async generator function.
        """
        cache = CacheHint(ttl_ms, cache_scope)

        needed = _scopes(scopes)
        permitted = _permission(permission)

        def register(func: _F) -> _F:
            label = f"tool {name if isinstance(name, str) else getattr(func, '__name__', func)!r}"
            tool_meta = meta
            if ui_resource is not None:
                ui = apps.tool_ui(ui_resource, visibility, label)
                tool_meta = with_ui(meta, ui, label, "ui_resource= and visibility=")
            elif visibility is not None:
                raise ValueError(f"{label}: visibility applies to a tool with a ui_resource=; give its ui:// resource")
            elif isinstance(meta, dict) and "ui" in meta:
                # A hand-written _meta.ui would escape every check of the declaration.
                raise ValueError(
                    f"{label}: meta has a 'ui' key; declare the tool's app with ui_resource= (and visibility=) "
                    "instead, which zemcp checks and advertises"
                )
            tool = self.tools.add(
                Tool(
                    name if isinstance(name, str) else None,
                    func,
                    description,
                    input_schema,
                    title,
                    output_schema=output_schema,
                    structured_output=structured_output,
                    annotations=annotations,
                    cache=cache,
                    elicit_missing=elicit_missing,
                    elicit_message=elicit_message,
                    rate_limit=rate_limit,
                    task=task,
                    icons=icons,
                    meta=tool_meta,
                )
            )
            self._scopes[("tool", tool.name)] = needed
            self._permit("tool", tool.name, permitted)
            if ui_resource is not None:
                self.apps.tools[tool.name] = ui_resource
            self.notify_list_changed("tools")
            return func

        # Bare @server.tool passes the function itself as the first argument.
        return register(name) if callable(name) else register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = "text/plain",
        size: int | None = None,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        scopes: tuple[str, ...] | list[str] = (),
        permission: Permission = None,
        icons: Icons = (),
        meta: dict[str, Any] | None = None,
    ) -> Callable[[_F], _F]:
        """Decorator registering a function as a resource, or as a resource template.

        A ``uri`` with ``{name}`` expressions (RFC 6570 level 1) registers a template: the
        function is called with the variables of the URI read as keyword arguments. Otherwise
        it is called without arguments. It returns ``str`` (text), ``bytes`` (blob) or a list
        of those and of content dicts (MCP server/resources).

        Args:
            uri: the resource's URI, or a URI template.
            name: the function's name when omitted.
            title: optional display name.
            description: the docstring's first paragraph when omitted.
            mime_type: MIME type of the contents; None leaves it out.
            size: optional size [bytes] of a static resource.
            ttl_ms, cache_scope: the caching hint of reading it, and its part of the list's
                (2026-07-28, see :mod:`zemcp.protocol.caching`).
            scopes: OAuth scopes a caller needs, with authorization on, to see it listed and
                to read it.
            permission: who may see and use it, as for :meth:`tool`.
            icons, meta: its ``icons`` and ``_meta``, as for :meth:`tool`.
        Returns:
            the decorator, which returns the function unchanged.
        Raises:
            ValueError: the URI is taken or malformed, the function's parameters do not
                fit the template's variables, a bad caching hint, a bad ``permission``, or
                bad ``icons`` or ``meta``.
            TypeError: an async generator function.
        """
        cache = CacheHint(ttl_ms, cache_scope)

        needed = _scopes(scopes)
        permitted = _permission(permission)

        def register(func: _F) -> _F:
            self.resources.register(
                func,
                uri,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                size=size,
                cache=cache,
                icons=icons,
                meta=meta,
            )
            self._scopes[("resource", uri)] = needed
            self._permit("resource", uri, permitted)
            self.notify_list_changed("resources")
            return func

        return register

    def app_resource(
        self,
        uri: str,
        *,
        html: str | None = None,
        file: FilePath | None = None,
        render: Callable[..., str] | None = None,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        csp: apps.AppCsp | Mapping[str, Any] | None = None,
        permissions: Sequence[str] | Mapping[str, Any] | None = None,
        domain: str | None = None,
        prefers_border: bool | None = None,
        meta: dict[str, Any] | None = None,
        icons: Icons = (),
        scopes: tuple[str, ...] | list[str] = (),
        permission: Permission = None,
    ) -> None:
        """Register an MCP App's HTML: a ``ui://`` resource served as ``text/html;profile=mcp-app``,
        which tools name with ``ui_resource=`` (MCP Apps 2026-01-26, "UI Resource Format";
        docs/apps.md, "MCP Apps").

        Its ``_meta.ui`` (what of ``csp``, ``permissions``, ``domain`` and ``prefers_border``
        was given), beside the other ``meta`` keys, is on its ``resources/list`` entry and on
        the content item of each ``resources/read``; ``_meta`` is left out when empty.

        Args:
            uri: a ``ui://`` URI.
            html: the document as a string; or
            file: a path to it, read at each read (an edit shows without a restart); or
            render: a callable giving it at each read, ``render()`` or ``render(ctx)``, such as
                a template of the site (Django's ``render_to_string``, Flask's ``render_template``).
            name: the URI when omitted.
            title, description: optional display name and description.
            csp: the origins the app may reach: :class:`zemcp.AppCsp` or a dict with the
                specification's camelCase keys (``connectDomains``, ``resourceDomains``,
                ``frameDomains``, ``baseUriDomains``).
            permissions: the iframe permissions it asks for, by the specification's names
                (``camera``, ``microphone``, ``geolocation``, ``clipboardWrite``): a list, or
                the specification's object (``{"clipboardWrite": {}}``).
            domain: a dedicated sandbox origin, in the host's format.
            prefers_border: whether the host should draw a border and background.
            meta: other ``_meta`` keys (no ``"ui"``: that is made from the keywords above).
            icons, scopes, permission: as for :meth:`resource`.
        Raises:
            ValueError: a URI that is not ``ui://``, is a template or is taken, not exactly one of ``html``,
                ``file`` and ``render`` (or a ``file`` that is not a file), a bad ``csp``,
                ``permissions``, ``domain`` or ``prefers_border``, a ``meta`` with a ``"ui"``
                key or one that breaks the rules, or bad ``icons``, ``scopes`` or ``permission``.
        """
        where = f"app resource {uri!r}"
        apps.check_uri(uri, where)
        if "{" in uri or "}" in uri:
            raise ValueError(
                f"{where}: an app's page is one document at one URI, not a template; give it a URI without "
                "{...} and let the page read what varies from the tool's input"
            )
        ui = apps.resource_ui(csp, permissions, domain, prefers_border, where)
        merged = with_ui(meta, ui, where, "csp=, permissions=, domain= and prefers_border=")
        self.resource(
            uri,
            name=name or uri,
            title=title,
            description=description,
            mime_type=apps.MIME_TYPE,
            scopes=scopes,
            permission=permission,
            icons=icons,
            meta=merged,
        )(html_reader(uri, html, file, render, merged))
        self.apps.resources.add(uri)

    def check_apps(self) -> None:
        """Check the MCP Apps declarations as a whole: every ``ui_resource=`` names a registered
        resource served as ``text/html;profile=mcp-app``. The transports call it when they
        start serving (``McpApp(server)``, the stdio transport), since resources may be
        registered after the tools that show them.

        Raises:
            ValueError: naming the tool, the URI and the fix.
        """
        self.apps.check(self.resources)

    @overload
    def prompt(self, name: _F, /) -> _F: ...

    @overload
    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        scopes: tuple[str, ...] | list[str] = (),
        permission: Permission = None,
        icons: Icons = (),
        meta: dict[str, Any] | None = None,
    ) -> Callable[[_F], _F]: ...

    def prompt(
        self,
        name: str | _F | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        scopes: tuple[str, ...] | list[str] = (),
        permission: Permission = None,
        icons: Icons = (),
        meta: dict[str, Any] | None = None,
    ) -> _F | Callable[[_F], _F]:
        """Decorator registering a function as a prompt; usable bare (``@server.prompt``) too.

        The function's parameters are the prompt's arguments (strings; required when they
        have no default; described by ``Annotated[str, "..."]`` or the docstring's ``Args:``).
        It returns ``str`` (one user message) or a list of strings and ``{"role", "content"}``
        dicts (MCP server/prompts).

        Args:
            name: the prompt name; the function's name when omitted.
            title: optional display name.
            description: the docstring's first paragraph when omitted.
            ttl_ms, cache_scope: this prompt's part of the ``prompts/list`` caching hint
                (2026-07-28, see :mod:`zemcp.protocol.caching`).
            scopes: OAuth scopes a caller needs, with authorization on, to see it listed and
                to get it.
            permission: who may see and use it, as for :meth:`tool`.
            icons, meta: its ``icons`` and ``_meta``, as for :meth:`tool`.
        Returns:
            the decorator, which returns the function unchanged (used bare: the function).
        Raises:
            ValueError: a taken name, a parameter that cannot be a prompt argument, a bad
                caching hint, a bad ``permission``, or bad ``icons`` or ``meta``.
            TypeError: an async generator function.
        """
        cache = CacheHint(ttl_ms, cache_scope)

        needed = _scopes(scopes)
        permitted = _permission(permission)

        def register(func: _F) -> _F:
            prompt = self.prompts.add(
                make_prompt(
                    func,
                    name=None if callable(name) else name,
                    title=title,
                    description=description,
                    cache=cache,
                    icons=icons,
                    meta=meta,
                )
            )
            self._scopes[("prompt", prompt.name)] = needed
            self._permit("prompt", prompt.name, permitted)
            self.notify_list_changed("prompts")
            return func

        return register(name) if callable(name) else register

    def completion(self, *, prompt: str | None = None, resource: str | None = None) -> Callable[[_F], _F]:
        """Decorator registering a completion provider for a prompt's or a template's arguments.

        The provider is called as ``provider(argument, value, context)`` with the argument's
        name, the partial value and the other arguments already given, and returns the
        suggested values (MCP server/utilities/completion).

        Args:
            prompt: the prompt name it completes arguments of.
            resource: the URI template it completes variables of.
        Returns:
            the decorator, which returns the function unchanged.
        Raises:
            ValueError: not exactly one of ``prompt`` and ``resource``, or that ref already
                has a provider.
            TypeError: an async generator function.
        """

        def register(func: _F) -> _F:
            self.completions.add(func, prompt=prompt, resource=resource)
            return func

        return register

    # -- change notifications ------------------------------------------------------------

    def notify_list_changed(self, kind: str) -> int:
        """Tell the clients listening for it that the ``kind`` list changed (``tools``,
        ``prompts`` or ``resources``): ``notifications/<kind>/list_changed`` on every
        2026-07-28 ``subscriptions/listen`` stream of this process that asked for it, and on
        the standalone GET stream of every handshake-era session of this process.
        Registering through the decorators calls it; call it yourself when what a list shows
        changed another way.

        Returns:
            how many streams were told.
        Raises:
            ValueError: ``kind`` is not one of the three.
        """
        flags = {"tools": "toolsListChanged", "prompts": "promptsListChanged", "resources": "resourcesListChanged"}
        if kind not in flags:
            raise ValueError(f"kind must be 'tools', 'prompts' or 'resources', got {kind!r}")
        return self.subscriptions.list_changed(flags[kind])

    def notify_resource_updated(self, uri: str) -> int:
        """Tell the clients subscribed to ``uri`` that the resource changed
        (``notifications/resources/updated`` on the ``subscriptions/listen`` streams of this
        process whose ``resourceSubscriptions`` name it, and on the standalone GET stream of
        every session of this process that subscribed to it with ``resources/subscribe``);
        returns how many streams were told."""
        return self.subscriptions.resource_updated(uri)

    # -- scopes ---------------------------------------------------------------------------

    def declared_scopes(self) -> list[str]:
        """Every scope a registration needs, in registration order (for ``scopes_supported``)."""
        return list(dict.fromkeys(scope for needed in self._scopes.values() for scope in needed))

    def _permit(self, kind: str, key: str, permitted: Callable[[Any], bool] | None) -> None:
        if permitted is None:
            self._permissions.pop((kind, key), None)
        else:
            self._permissions[(kind, key)] = permitted

    @property
    def permission_table(self) -> dict[tuple[str, str], Callable[[Any], bool]]:
        """Who may see and use each registration with a ``permission=``, by ``(kind, key)``
        (:class:`zemcp.auth.access.Access` reads it)."""
        return self._permissions

    @property
    def scope_table(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """The scopes each registration needs, by ``(kind, key)`` (:class:`zemcp.auth.access.Access` reads it)."""
        return self._scopes

    @staticmethod
    def _visible(result: dict[str, Any], field: str, kind: str, key: str, access: Access) -> dict[str, Any]:
        """``result`` with the ``field`` items ``access`` may not use left out (by their ``key``)."""
        if not access.filters:
            return result
        return {**result, field: [item for item in result[field] if access.visible(kind, item[key])]}


def _scopes(scopes: Any) -> tuple[str, ...]:
    """Registration ``scopes=`` as a tuple of scope tokens.

    Raises:
        ValueError: not a list or tuple of non-empty strings without spaces.
    """
    if not isinstance(scopes, (list, tuple)) or not all(isinstance(s, str) and s and " " not in s for s in scopes):
        raise ValueError(f"scopes must be a list of scope names (non-empty strings without spaces), got {scopes!r}")
    return tuple(scopes)


#: A registration's ``permission=``: a permission name, a list of them, a callable ``(user) -> bool``, or None.
Permission = str | list[str] | tuple[str, ...] | Callable[[Any], bool] | None


def _permission(permission: Any) -> Callable[[Any], bool] | None:
    """Registration ``permission=`` as a predicate of the request's user (None: everyone may).

    Raises:
        ValueError: not a non-empty permission name, a list of them, a callable or None.
    """
    if permission is None:
        return None
    if callable(permission):
        rule: Callable[[Any], bool] = permission
        return rule
    names = [permission] if isinstance(permission, str) else permission
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(
            f"permission must be a permission name ('app.codename'), a list of them, or a callable "
            f"permission(user) -> bool, got {permission!r}"
        )
    return NamedPermissions(tuple(names))


class NamedPermissions:
    """The rule of ``permission="app.codename"`` (or a list): the user holds every one of
    ``names``, as the user's ``has_perm`` answers (Django's ``User.has_perm``); a user without
    ``has_perm`` (none, or an OAuth principal) holds none.

    Args:
        names: the permission names, all needed.
    """

    def __init__(self, names: tuple[str, ...]):
        self.names = names

    def __call__(self, user: Any) -> bool:
        has_perm = getattr(user, "has_perm", None)
        return callable(has_perm) and all(has_perm(name) for name in self.names)

    def __str__(self) -> str:
        return " and ".join(self.names)
