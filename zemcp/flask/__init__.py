"""zemcp inside a Flask app: the MCP endpoint as a route of the app, the app's users in every tool.

``Zemcp(app, server)`` (or ``Zemcp(server=server)`` and ``init_app(app)`` in an app factory)
registers the endpoint as a route of the app (``/mcp`` by default), so the app's
``before_request`` and ``after_request`` hooks, its logging, ``g`` and Flask-Login's
``current_user`` apply to MCP requests as to every other request. A handler runs in a copy
of the request context of the round it serves (``flask.request``, ``g``, ``current_app``,
``current_user``); a task, which outlives its request, runs in an app context and gets its
user through ``ctx.user``. Settings come from ``app.config["ZEMCP"]`` (:func:`settings`);
``flask zemcp inspect``, ``flask zemcp stdio --user ID`` and ``flask zemcp call`` are the
app's commands (docs/flask.md).

Needs Flask (``pip install 'zemcp[flask]'``); imported only by an app that uses it.
"""

from __future__ import annotations

try:
    import flask  # noqa: F401  (only to say plainly what is missing)
except ImportError as exc:  # said plainly: the app's own install lacks the extra
    raise ImportError(
        f"zemcp.flask needs Flask ({exc}): pip install 'zemcp[flask]' (or '.[flask]' in a zemcp checkout)"
    ) from exc

from zemcp.flask.extension import Zemcp, settings

__all__ = ["Zemcp", "settings"]
