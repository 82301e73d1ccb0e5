"""The site whose MCP server the audit app records."""
