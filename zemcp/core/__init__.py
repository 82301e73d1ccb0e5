"""The MCP server core, the same for both protocol eras: the :class:`~zemcp.core.server.Server`
with its registries (tools, resources, prompts, completions), the handler's
:class:`~zemcp.core.context.Context`, and the exchange a handler talks to the client through.
No HTTP and no era here: the eras (:mod:`zemcp.eras`) call into it."""
