"""An app of the site with one MCP tool, whose calls the audit app stores."""
