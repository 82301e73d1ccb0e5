"""A server for the task tests (``tests.apps.tasks_app:app``).

- ``report(seconds)`` (``task="optional"``): works for ``seconds`` in steps of 0.1 s,
  reporting progress, and returns ``report ready after <seconds> s``; it watches for a
  cancel between steps and, when one comes, writes the reason to the file named by
  ``ZEMCP_TEST_CANCEL_LOG`` (when set) so a test can see that the handler saw it.
- ``approve(item)`` (``task="required"``): asks the user to approve ``item`` (key
  ``approve``, a boolean ``ok``) and answers ``approved <item>`` or ``rejected <item>``.
- ``fail()`` (``task="optional"``): a tool error (``isError``) at once.
- ``echo(text)``: a plain tool, never a task.
- ``whoami()`` (``task="optional"``): the pid of the worker that ran it; each run adds its
  task id (or None) to ``RAN`` (for in-process tests).
- ``spin()`` (``task="optional"``): reports progress every 50 ms for up to 30 s and checks for
  a cancel in no other way.
- ``steady(seconds, every)`` (``task="optional"``): works for ``seconds``, reporting progress
  with a message (``step <n>``) and logging a line every ``every`` seconds (the first at once),
  and returns ``steady after <n> steps``; a cancel it sees is written as ``report`` writes it.
- ``consult()`` (``task="required"``): asks the client's model (sampling, key ``model``) and
  for its roots (key ``roots``) at once, and answers ``<the model's text>; <n> root(s)``.
"""

import os
import time
from typing import Any

import zemcp

#: The task ids (None for a plain call) whose ``whoami`` ran, in this process.
RAN: list[str | None] = []

APPROVE = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def make_server(**settings: Any) -> zemcp.Server:
    """The server, with ``settings`` (``ZEMCP_*`` from the environment when none are given)."""
    server = zemcp.Server("zemcp-task-tests", "1.0", settings=zemcp.Settings(**settings) if settings else None)

    @server.tool(task="optional")
    def report(seconds: float, ctx: zemcp.Context) -> str:
        """Build a report that takes ``seconds``."""
        deadline = time.monotonic() + seconds
        step = 0
        try:
            while time.monotonic() < deadline:
                ctx.raise_if_cancelled()
                step += 1
                ctx.report_progress(step, message=f"step {step}")
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        except zemcp.ElicitAborted as exc:
            _note_cancel(ctx, exc)
            raise
        return f"report ready after {seconds:g} s"

    @server.tool(task="optional")
    def steady(seconds: float, ctx: zemcp.Context, every: float = 0.3) -> str:
        """Work for ``seconds``, reporting and logging every ``every`` seconds."""
        deadline = time.monotonic() + seconds
        step = 0
        try:
            while True:
                step += 1
                ctx.report_progress(step, message=f"step {step}")
                ctx.log("info", f"step {step}")
                if time.monotonic() >= deadline:
                    return f"steady after {step} steps"
                time.sleep(min(every, max(0.0, deadline - time.monotonic())))
        except zemcp.ElicitAborted as exc:
            _note_cancel(ctx, exc)
            raise

    @server.tool(task="required")
    def approve(item: str, ctx: zemcp.Context) -> str:
        """Ask the user to approve ``item``."""
        answer = ctx.elicit(f"Approve {item}?", APPROVE, key="approve")
        return f"{'approved' if answer['ok'] else 'rejected'} {item}"

    @server.tool(task="optional")
    def fail() -> str:
        """Fail with a tool error."""
        raise zemcp.ToolError("the report could not be built")

    @server.tool
    def echo(text: str) -> str:
        """Echo ``text``."""
        return text

    @server.tool(task="optional")
    def spin(ctx: zemcp.Context) -> str:
        """Report progress for up to 30 s."""
        for step in range(1, 601):
            ctx.report_progress(step)
            time.sleep(0.05)
        return "spun"

    @server.tool(task="required")
    def consult(ctx: zemcp.Context) -> str:
        """Ask the client's model and for the client's roots."""
        answer, roots = ctx.ask_all(
            zemcp.Sample("Summarise the report", max_tokens=50, key="model"), zemcp.ListRoots("roots")
        )
        return f"{answer['content']['text']}; {len(roots)} root(s)"

    @server.tool(task="optional")
    def whoami(ctx: zemcp.Context) -> str:
        """The pid of the worker that ran it."""
        RAN.append(ctx.task_id)
        return str(os.getpid())

    return server


def _note_cancel(ctx: zemcp.Context, exc: zemcp.ElicitAborted) -> None:
    """Write the abort a handler saw to ``ZEMCP_TEST_CANCEL_LOG``, when set."""
    path = os.environ.get("ZEMCP_TEST_CANCEL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{ctx.task_id} {type(exc).__name__}: {exc}\n")


app = zemcp.McpApp(make_server())
