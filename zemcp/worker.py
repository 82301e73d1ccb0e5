"""The gunicorn worker class configs name: ``worker_class = "zemcp.worker.ThreadWorker"``.

A stable path of the public API; the worker itself is :mod:`zemcp.http.worker`.
"""

from zemcp.http.worker import ThreadWorker

__all__ = ["ThreadWorker"]
