"""The site whose MCP calls the audit app records."""
