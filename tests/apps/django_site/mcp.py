"""The site's own MCP server (``settings.ZEMCP["SERVER"]``): the reference server built with the
site's zemcp settings, and two tools of the site.

Beside the reference server's ``ze_execute``, ``whoami`` tells the handler's ``ctx.user`` and
``ctx.request``, ``payroll`` is for users with the ``site.view_payroll`` permission, and
``report`` may run as a task. The
site's apps add theirs from their ``mcp.py`` (catalogue/mcp.py).
"""

import zemcp
import zemcp.django
from wsgi import create_app

server = create_app(settings=zemcp.django.settings()).server


@server.tool
def whoami(ctx: zemcp.Context) -> str:
    """The site's user and the path of the site's request, as the handler sees them."""
    user = ctx.user.username if ctx.user is not None else "anonymous"
    return f"{user} at {ctx.request.path if ctx.request is not None else 'no request'}"


@server.tool(permission="site.view_payroll")
def payroll() -> str:
    """For users with the site.view_payroll permission."""
    return "the payroll"


@server.tool(task="optional")
def report(ctx: zemcp.Context) -> str:
    """Runs as a task when asked: tells whom it runs for, and whether it has a request."""
    user = ctx.user.username if ctx.user is not None else "nobody"
    return f"report for {user}, request {ctx.request}"
