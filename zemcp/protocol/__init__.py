"""MCP as data and rules, with no I/O: JSON-RPC messages, protocol versions, what a client
declared, the elicitation rules and schema subset, pagination, caching hints and the SEP-2243
headers. Every other layer builds on this one; it imports none of them."""
