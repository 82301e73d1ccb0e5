"""The test project's own app: notes, each owned by a user, and the MCP tools over them."""
