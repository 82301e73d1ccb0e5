"""Argument completion (MCP server/utilities/completion): providers and ``completion/complete``.

A provider suggests values for the arguments of one prompt or of one resource template. It
is called as ``provider(argument, value, context)``: the argument's name, what the user has
typed so far, and the other arguments already filled in (``context.arguments``, MCP
2025-06-18 and later; empty before). It returns the matching values, best first; the
server sends at most :data:`MAX_VALUES` of them with the total count. Pure Python: no HTTP
here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from zemcp.auth.access import Permits
from zemcp.core import coroutines
from zemcp.core.errors import HANDLER_ERRORS
from zemcp.core.prompts import PromptRegistry
from zemcp.core.resources import ResourceRegistry
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError

log = logging.getLogger("zemcp.completions")

#: Values one ``completion/complete`` result carries at most (the spec's limit).
MAX_VALUES = 100

Provider = Callable[[str, str, dict[str, str]], list[str]]

_PROMPT, _RESOURCE = "ref/prompt", "ref/resource"


class CompletionRegistry:
    """Completion providers keyed by the prompt name or resource template they serve.

    Args:
        prompts: the server's prompts (a ``ref/prompt`` must name one of them).
        resources: the server's resources (a ``ref/resource`` must name a template of them).

    ``len()`` is the number of providers.
    """

    def __init__(self, prompts: PromptRegistry, resources: ResourceRegistry):
        self._prompts = prompts
        self._resources = resources
        # (ref type, key) -> (provider, whether it is async def)
        self._providers: dict[tuple[str, str], tuple[Provider, bool]] = {}

    def __len__(self) -> int:
        return len(self._providers)

    def add(self, provider: Provider, *, prompt: str | None = None, resource: str | None = None) -> Provider:
        """Register ``provider`` for the prompt called ``prompt`` or the template ``resource``.

        The prompt or template may be registered before or after its provider; a request
        for a ref that does not exist then is refused at request time.

        Raises:
            ValueError: not exactly one of ``prompt`` and ``resource`` is a non-empty string,
                or that ref has a provider already.
            TypeError: ``provider`` is an async generator function.
        """
        if (prompt is None) == (resource is None):
            raise ValueError("give exactly one of prompt='<prompt name>' and resource='<URI template>'")
        target = prompt if prompt is not None else resource
        if not isinstance(target, str) or not target:
            raise ValueError(
                f"the {'prompt name' if prompt is not None else 'URI template'} must be a non-empty string"
            )
        key = (_PROMPT if prompt is not None else _RESOURCE, target)
        if key in self._providers:
            raise ValueError(f"{key[0]} {key[1]!r} already has a completion provider")
        self._providers[key] = (
            provider,
            coroutines.handler_is_async(provider, f"the completion provider of {target!r}"),
        )
        return provider

    def complete(self, params: dict[str, Any], permits: Permits | None = None) -> dict[str, Any]:
        """``completion/complete``: ``{"completion": {"values": [...], "total": n, "hasMore": bool}}``.

        Args:
            params: ``{"ref": {"type": "ref/prompt", "name"} | {"type": "ref/resource", "uri"},
                "argument": {"name", "value"}, "context"?: {"arguments"?: {name: value}}}``.
            permits: ``permits(kind, key)``, whether the request may see the prompt or
                template (:meth:`zemcp.auth.access.Access.permits`); one it may not is unknown.
        Returns:
            the first :data:`MAX_VALUES` values; empty when the ref has no provider.
        Raises:
            ProtocolError: -32602 for malformed params, a ref naming no prompt or resource
                template, or an argument the ref does not have; -32603 when the provider
                raised or returned something other than a list of strings (logged).
        """
        ref_type, key, names = self._ref(params.get("ref"), permits)
        argument = params.get("argument")
        if not (
            isinstance(argument, dict)
            and isinstance(argument.get("name"), str)
            and isinstance(argument.get("value"), str)
        ):
            raise ProtocolError(
                INVALID_PARAMS, "Invalid params: completion/complete needs params.argument {name, value} (strings)"
            )
        if argument["name"] not in names:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: {ref_type} {key!r} has no argument {argument['name']!r}; "
                f"its arguments are: {', '.join(names) or 'none'}",
            )
        context = _context(params.get("context"))
        entry = self._providers.get((ref_type, key))
        values = [] if entry is None else self._call(*entry, ref_type, key, argument, context)
        return {
            "completion": {"values": values[:MAX_VALUES], "total": len(values), "hasMore": len(values) > MAX_VALUES}
        }

    def _ref(self, ref: Any, permits: Permits | None) -> tuple[str, str, list[str]]:
        # The ref's type, its key (prompt name or URI template) and its argument names.
        if not isinstance(ref, dict) or ref.get("type") not in (_PROMPT, _RESOURCE):
            raise ProtocolError(
                INVALID_PARAMS,
                'Invalid params: params.ref must be {"type": "ref/prompt", "name": ...} or '
                '{"type": "ref/resource", "uri": ...}',
            )
        if ref["type"] == _PROMPT:
            prompt = self._prompts.require(ref.get("name"), "a ref/prompt", "name", permits)
            return _PROMPT, prompt.name, prompt.argument_names()
        uri = ref.get("uri")
        if not isinstance(uri, str):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: a ref/resource needs uri (a string)")
        template = self._resources.template(uri)
        if template is None or (permits is not None and not permits("resource", uri)):
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: no resource template {uri!r}; a ref/resource names the uriTemplate of an "
                f"entry of resources/templates/list exactly",
            )
        return _RESOURCE, uri, list(template.template.variables)

    def _call(
        self,
        provider: Provider,
        is_async: bool,
        ref_type: str,
        key: str,
        argument: dict[str, Any],
        context: dict[str, str],
    ) -> list[str]:
        try:
            values = coroutines.call(
                provider,
                is_async,
                f"the completion provider of {ref_type} {key!r}",
                None,
                argument["name"],
                argument["value"],
                context,
            )
        except ProtocolError:
            raise
        except HANDLER_ERRORS as exc:
            log.exception("completion provider of %s %r failed", ref_type, key)
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the completion provider of {ref_type} {key!r} failed ({type(exc).__name__}); "
                f"the server log has the details",
            ) from None
        if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
            log.error("completion provider of %s %r returned %r, not a list of strings", ref_type, key, type(values))
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the completion provider of {ref_type} {key!r} returned something other than "
                f"a list of strings",
            )
        return list(values)


def _context(context: Any) -> dict[str, str]:
    # context and context.arguments are both optional (context arrived in 2025-06-18).
    arguments = context.get("arguments") if isinstance(context, dict) else context
    if arguments is None:
        return {}
    if (
        not isinstance(context, dict)
        or not isinstance(arguments, dict)
        or not all(isinstance(value, str) for value in arguments.values())
    ):
        raise ProtocolError(
            INVALID_PARAMS, 'Invalid params: params.context must be {"arguments": {name: value}} with string values'
        )
    return dict(arguments)
