"""Tasks on the wire: statuses, the extension's name and the ``Task`` object of each era.

MCP 2025-11-25 basic/utilities/tasks (SEP-1686, experimental, handshake era) and the
``io.modelcontextprotocol/tasks`` extension of 2026-07-28 (SEP-2663) describe the same
thing with different shapes:

============================  ================================  =====================================
topic                         2025-11-25                         2026-07-28 extension
============================  ================================  =====================================
asking for a task             ``params.task`` on ``tools/call``  the extension declared in the
                                                                 request's ``clientCapabilities``
create result                 ``{"task": Task}``                 ``Task`` + ``resultType: "task"``
retention, poll hint          ``ttl``, ``pollInterval`` [ms]     ``ttlMs``, ``pollIntervalMs`` [ms]
a tool result with isError    ``failed``                         ``completed`` with ``result``
the outcome                   ``tasks/result`` (blocks)          ``result`` / ``error`` on tasks/get
questions for the user        server requests, related-task      ``inputRequests`` on tasks/get,
                              ``_meta``                          answered by ``tasks/update``
============================  ================================  =====================================
"""

from __future__ import annotations

import time
from typing import Any

#: The 2026-07-28 extension's identifier (``capabilities.extensions`` and the request's
#: ``clientCapabilities.extensions``).
EXTENSION = "io.modelcontextprotocol/tasks"
#: 2025-11-25: the ``_meta`` key naming the task a message belongs to (``{"taskId": ...}``).
RELATED_TASK = "io.modelcontextprotocol/related-task"

WORKING = "working"
INPUT_REQUIRED = "input_required"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
#: Statuses a task never leaves.
TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED})

#: ``Tool.execution.taskSupport`` values; ``forbidden`` is the default.
FORBIDDEN, OPTIONAL, REQUIRED = "forbidden", "optional", "required"
TASK_SUPPORT = (FORBIDDEN, OPTIONAL, REQUIRED)

#: The handshake-era version that has tasks.
TASKS_VERSION = "2025-11-25"


def timestamp(seconds: float) -> str:
    """An ISO 8601 UTC timestamp with milliseconds (``2026-12-04T05:15:12.345Z``) of a
    ``time.time()`` value [seconds]."""
    whole = int(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((seconds - whole) * 1000):03d}Z"


def declares_extension(capabilities: Any) -> bool:
    """True when a 2026-07-28 request's ``clientCapabilities`` declare the tasks extension."""
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def check_support(value: str) -> str:
    """``value`` if it is a ``taskSupport`` value.

    Raises:
        ValueError: it is not ``forbidden``, ``optional`` or ``required``.
    """
    if value not in TASK_SUPPORT:
        raise ValueError(f"task must be one of {', '.join(map(repr, TASK_SUPPORT))}, got {value!r}")
    return value


def related(task_id: str) -> dict[str, Any]:
    """The 2025-11-25 ``_meta`` entry that ties a message to task ``task_id``."""
    return {RELATED_TASK: {"taskId": task_id}}
