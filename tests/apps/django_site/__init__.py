"""A Django project with no database: the site's MCP server as views of its URLconf (urls.py,
mcp.py, an app's catalogue/mcp.py), and the reference server mounted under ``/mcp`` beside the
site (wsgi.py). gunicorn serves it as ``tests.apps.django_site.wsgi:application``.
"""
