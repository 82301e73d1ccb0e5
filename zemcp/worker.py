"""The gunicorn worker class configs name: ``worker_class = "zemcp.worker.ThreadWorker"``.

A stable path of the public API; the worker itself is :mod:`zemcp.http.worker`, with its
limits (``HEAD_BUFFER_LIMIT``, ``LINGER_TIMEOUT``, ``LINGER_DRAIN``).
"""

from zemcp.http.worker import HEAD_BUFFER_LIMIT, LINGER_DRAIN, LINGER_TIMEOUT, ThreadWorker

__all__ = ["HEAD_BUFFER_LIMIT", "LINGER_DRAIN", "LINGER_TIMEOUT", "ThreadWorker"]
