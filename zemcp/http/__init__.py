"""MCP's Streamable HTTP transport as a WSGI application, and serving it under gunicorn:
the application (:mod:`zemcp.http.transport`), CORS, the gthread worker and its settings."""
