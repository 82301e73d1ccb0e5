"""The handshake era (MCP 2024-11-05 to 2025-11-25): initialize, sessions named by
``Mcp-Session-Id``, server-to-client requests pushed on the request's stream."""
