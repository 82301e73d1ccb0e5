"""Prompts (MCP server/prompts): the registry, arguments from signatures, and ``prompts/get``.

A prompt is a plain function whose parameters are the prompt's arguments. Arguments are
strings on the wire; a parameter without default is a required argument. Its description
comes from ``Annotated[str, "description"]`` or from the docstring's ``Args:`` section. The
function returns ``str`` (one user message) or a list of strings (user messages) and
message dicts ``{"role", "content"}``, or a whole ``GetPromptResult`` dict ``{"messages",
"description"?, "_meta"?}``. Pure Python: no HTTP here.
"""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from zemcp import logsafe
from zemcp.auth.access import Permits
from zemcp.core import callables, coroutines, schemas
from zemcp.core.docstrings import docstring_entries, docstring_summary
from zemcp.core.errors import HANDLER_ERRORS, ClientRequestError
from zemcp.protocol import pagination
from zemcp.protocol.caching import NO_CACHE, CacheHint, combine
from zemcp.protocol.elicitation import ElicitAborted, ElicitError
from zemcp.protocol.icons import checked_icons
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from zemcp.protocol.metadata import checked_meta

log = logging.getLogger("zemcp.prompts")

_ROLES = ("user", "assistant")


@dataclass(frozen=True)
class PromptArgument:
    """One argument of a prompt (MCP ``PromptArgument``)."""

    name: str
    description: str | None = None
    required: bool = False

    def definition(self) -> dict[str, Any]:
        """The argument as ``prompts/list`` shows it."""
        entry: dict[str, Any] = {"name": self.name}
        if self.description:
            entry["description"] = self.description
        entry["required"] = self.required
        return entry


@dataclass
class Prompt:
    """A registered prompt (MCP ``Prompt``).

    Attributes:
        name: unique name.
        handler: called with the arguments as keyword strings.
        title: optional display name.
        description: optional description.
        arguments: the arguments, in signature order.
        context_param: the parameter that receives the request's :class:`zemcp.Context`
            (annotated ``Context`` or named ``ctx``), or None.
        cache: its part of the ``prompts/list`` caching hint (2026-07-28).
        is_async: whether ``handler`` is ``async def`` (run in a loop of its own per request).
        icons: its ``icons`` (checked dicts, :func:`zemcp.protocol.icons.checked_icons`); empty for none.
        meta: its ``_meta`` (checked, :func:`zemcp.protocol.metadata.checked_meta`); empty for none.
    """

    name: str
    handler: Callable[..., Any]
    title: str | None = None
    description: str | None = None
    arguments: tuple[PromptArgument, ...] = ()
    context_param: str | None = None
    cache: CacheHint = NO_CACHE
    is_async: bool = False
    icons: tuple[dict[str, Any], ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)

    def definition(self) -> dict[str, Any]:
        """The prompt as ``prompts/list`` shows it."""
        entry: dict[str, Any] = {"name": self.name}
        if self.title:
            entry["title"] = self.title
        if self.description:
            entry["description"] = self.description
        entry["arguments"] = [argument.definition() for argument in self.arguments]
        if self.icons:
            entry["icons"] = list(self.icons)
        if self.meta:
            entry["_meta"] = self.meta
        return entry

    def argument_names(self) -> list[str]:
        """The names of the arguments, in signature order."""
        return [argument.name for argument in self.arguments]

    def render(self, arguments: Any, ctx: Any = None) -> dict[str, Any]:
        """``prompts/get`` for this prompt: ``{"description"?, "messages": [{"role", "content"}], "_meta"?}``.

        Args:
            arguments: ``params.arguments``: an object of strings, or None.
            ctx: the request's Context, passed when the prompt takes one.
        Raises:
            ProtocolError: -32602 for arguments that are not an object of strings, an
                argument the prompt does not have, or a missing required argument; -32603
                when the handler raised, an elicitation it made did not end in an answer, or
                it returned something that is not messages or a ``GetPromptResult`` (logged).
            zemcp.ElicitAborted: the request can no longer be answered.
        """
        arguments = self.check(arguments)
        kwargs: dict[str, Any] = dict(arguments)
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        try:
            value = coroutines.call(self.handler, self.is_async, f"prompt {self.name!r}", ctx, **kwargs)
            result = _whole_result(value, self.name) if isinstance(value, dict) else {}
            result["messages"] = to_messages(result.pop("messages", value))
        except (ProtocolError, ElicitAborted):
            raise
        except (ElicitError, ClientRequestError) as exc:
            # An outcome of asking the client, not a bug: no traceback.
            log.info("prompt %r ended by an outcome of asking the client: %s", self.name, logsafe.outcome(exc))
            raise ProtocolError(INTERNAL_ERROR, f"prompt {self.name!r} could not be built: {exc}") from None
        except HANDLER_ERRORS as exc:
            log.exception("prompt %r failed", self.name)
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: prompt {self.name!r} failed ({type(exc).__name__}); the server log has the details",
            ) from None
        if self.description and "description" not in result:
            result = {"description": self.description, **result}
        return result

    def check(self, arguments: Any) -> dict[str, str]:
        """``params.arguments`` checked: an object of strings naming only this prompt's
        arguments and all its required ones (None counts as ``{}``).

        Raises:
            ProtocolError: -32602 naming what is wrong.
        """
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ProtocolError(
                INVALID_PARAMS, "Invalid params: prompts/get params.arguments must be an object of strings"
            )
        known = self.argument_names()
        unknown = [key for key in arguments if key not in known]
        if unknown:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: prompt {self.name!r} has no argument {unknown[0]!r}; "
                f"its arguments are: {', '.join(known) or 'none'}",
            )
        for key, value in arguments.items():
            if not isinstance(value, str):
                raise ProtocolError(
                    INVALID_PARAMS,
                    f"Invalid params: argument {key!r} of prompt {self.name!r} must be a string, "
                    f"got {type(value).__name__}",
                )
        missing = [a.name for a in self.arguments if a.required and a.name not in arguments]
        if missing:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: prompt {self.name!r} needs the argument(s) {', '.join(missing)}",
            )
        return arguments


def make_prompt(
    handler: Callable[..., Any],
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    cache: CacheHint = NO_CACHE,
    icons: Any = (),
    meta: Any = None,
) -> Prompt:
    """Build a :class:`Prompt` from a function.

    Args:
        handler: the prompt function; its parameters are the arguments.
        name: defaults to the function's name.
        title: optional display name.
        description: defaults to the first paragraph of the docstring.
        cache: its part of the ``prompts/list`` caching hint.
        icons: its icons (:func:`zemcp.protocol.icons.checked_icons`).
        meta: its ``_meta`` (:func:`zemcp.protocol.metadata.checked_meta`); None for none.
    Raises:
        ValueError: an empty name, bad ``icons`` or ``_meta`` (the message says which rule), a ``*args`` or ``**kwargs`` parameter, or a parameter
            annotated with something other than ``str`` or ``str | None`` (prompt arguments
            are strings).
        TypeError: the function is an async generator function.
    """
    name = callables.handler_name(handler, name, "prompt")
    if not isinstance(name, str) or not name:
        raise ValueError(f"prompt name must be a non-empty string, got {name!r}")
    is_async = coroutines.handler_is_async(handler, f"prompt {name!r}")
    if description is None:
        description = docstring_summary(handler)
    try:
        context = schemas.context_parameter(handler)
    except TypeError:
        context = None  # unresolvable hints: every parameter stays an argument, as _arguments allows
    arguments = _arguments(handler, name, docstring_entries(handler), context)
    where = f"prompt {name!r}"
    return Prompt(
        name,
        handler,
        title,
        description,
        tuple(arguments),
        context,
        cache,
        is_async,
        tuple(checked_icons(icons, where)),
        {} if meta is None else checked_meta(meta, where),
    )


def _arguments(
    handler: Callable[..., Any], prompt: str, documented: dict[str, str], context: str | None
) -> list[PromptArgument]:
    try:
        hints = typing.get_type_hints(handler, include_extras=True)
    except Exception:
        # Unresolvable forward references: the arguments are still usable, only their
        # Annotated descriptions and the type check are lost.
        hints = {}
    arguments = []
    for param in inspect.signature(handler).parameters.values():
        if param.name == context:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ValueError(
                f"prompt {prompt!r}: *{param.name} cannot be listed as prompt arguments; name each argument"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ValueError(
                f"prompt {prompt!r}: argument {param.name!r} must not be positional-only (it is passed by name)"
            )
        hint = hints.get(param.name, inspect.Parameter.empty)
        description = documented.get(param.name)
        if typing.get_origin(hint) is Annotated:
            hint, *metadata = typing.get_args(hint)
            description = next((m for m in metadata if isinstance(m, str)), description)
        if hint not in (inspect.Parameter.empty, str, str | None):
            raise ValueError(
                f"prompt {prompt!r}: argument {param.name!r} is annotated {hint!r}; prompt arguments are "
                f"strings, so annotate it str (or str | None when optional) and convert inside"
            )
        arguments.append(PromptArgument(param.name, description, param.default is inspect.Parameter.empty))
    return arguments


def _whole_result(value: dict[str, Any], name: str) -> dict[str, Any]:
    """A prompt's ``GetPromptResult`` dict checked, its ``messages`` still raw.

    Raises:
        TypeError: it has no ``messages``, or keys a ``GetPromptResult`` does not have.
        ValueError: its ``_meta`` breaks the key rules (:func:`zemcp.protocol.metadata.checked_meta`).
    """
    unknown = sorted(str(key) for key in value if key not in ("messages", "description", "_meta"))
    if "messages" not in value or unknown:
        raise TypeError(
            f"a prompt returning a dict returns a GetPromptResult: 'messages' and optionally "
            f"'description' and '_meta', got the keys {sorted(map(str, value))}"
        )
    if "_meta" in value:
        checked_meta(value["_meta"], f"the result of prompt {name!r}")
    return dict(value)


def to_messages(value: Any) -> list[dict[str, Any]]:
    """Shape a prompt handler's return value as ``GetPromptResult.messages``.

    Args:
        value: ``str`` (one user message with text content), or a list of strings (user
            text messages) and message dicts ``{"role": "user"|"assistant", "content": {"type", ...}}``.
    Returns:
        the list of message dicts.
    Raises:
        TypeError: something else was returned.
    """
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise TypeError(f"a prompt must return str or a list of messages, got {type(value).__name__}")
    messages = []
    for item in items:
        if isinstance(item, str):
            messages.append({"role": "user", "content": {"type": "text", "text": item}})
        elif (
            isinstance(item, dict)
            and item.get("role") in _ROLES
            and isinstance(item.get("content"), dict)
            and isinstance(item["content"].get("type"), str)
        ):
            messages.append(item)
        else:
            raise TypeError(
                "a prompt message must be a string or a dict {'role': 'user'|'assistant', "
                f"'content': {{'type': ...}}}}, got {item!r:.200}"
            )
    return messages


class PromptRegistry:
    """Prompts by name, in registration order; ``len()`` is how many there are."""

    def __init__(self) -> None:
        self._prompts: dict[str, Prompt] = {}
        self._cache = NO_CACHE
        # Built at registration, not on every prompts/list: a prompt does not change.
        self._definitions: list[dict[str, Any]] = []

    def __len__(self) -> int:
        return len(self._prompts)

    def add(self, prompt: Prompt) -> Prompt:
        """Register ``prompt``; raises ValueError when the name is taken."""
        if prompt.name in self._prompts:
            raise ValueError(f"a prompt named {prompt.name!r} is already registered")
        self._prompts[prompt.name] = prompt
        self._definitions.append(prompt.definition())
        self._cache = combine(p.cache for p in self._prompts.values())
        return prompt

    def cache_hint(self) -> CacheHint:
        """The caching hint of ``prompts/list``: the most cautious of the prompts' hints."""
        return self._cache

    def get(self, name: str) -> Prompt | None:
        """The prompt called ``name``, or None."""
        return self._prompts.get(name)

    def require(self, name: Any, where: str, field: str, permits: Permits | None = None) -> Prompt:
        """The prompt called ``name``.

        Args:
            name: the name from a request's params.
            where, field: what carried it and under which key, for the message
                (``"prompts/get", "params.name"``; ``"a ref/prompt", "name"``).
            permits: ``permits(kind, key)``, whether the request may see it
                (:meth:`zemcp.auth.access.Access.permits`); one it may not is unknown.
        Raises:
            ProtocolError: -32602 when ``name`` is not a string or names no prompt (the
                request may see).
        """
        if not isinstance(name, str):
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: {where} needs {field} (a string)")
        prompt = self._prompts.get(name)
        if prompt is None or (permits is not None and not permits("prompt", prompt.name)):
            raise ProtocolError(
                INVALID_PARAMS, f"Invalid params: unknown prompt {name!r}; prompts/list names the available prompts"
            )
        return prompt

    def list_result(self, params: dict[str, Any], page_size: int) -> dict[str, Any]:
        """``prompts/list``: ``{"prompts": [...], "nextCursor"?}``.

        Raises:
            ProtocolError: -32602 for a bad cursor.
        """
        items = self._definitions
        return pagination.list_result(params, "prompts", items, page_size)

    def get_result(self, params: dict[str, Any]) -> dict[str, Any]:
        """``prompts/get {name, arguments?}``: ``{"description"?, "messages": [...]}``.

        Raises:
            ProtocolError: -32602 for a missing or unknown name and for bad arguments (see
                :meth:`Prompt.render`); -32603 when the handler failed.
        """
        return self.require(params.get("name"), "prompts/get", "params.name").render(params.get("arguments"))
