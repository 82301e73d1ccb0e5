"""An installed app of the test site whose ``mcp.py`` registers a tool on the site's server."""
