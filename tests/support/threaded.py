"""werkzeug's test client, for a server whose requests may run in several threads at once.

werkzeug's client marks its requests ``wsgi.multithread: False`` (it calls the app in the
caller's thread), and zemcp then refuses to wait for an elicitation answer that a
single-threaded server could never deliver. These tests do deliver answers, from other
threads, as gunicorn's gthread worker would: this client says so on every request.
"""

from __future__ import annotations

from typing import Any

from werkzeug import test


class Client(test.Client):
    """``werkzeug.test.Client`` whose requests carry ``wsgi.multithread: True``."""

    def open(self, *args: Any, **kwargs: Any):
        kwargs["environ_overrides"] = {"wsgi.multithread": True, **(kwargs.get("environ_overrides") or {})}
        return super().open(*args, **kwargs)
