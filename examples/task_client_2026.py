"""Tasks of the 2026-07-28 tasks extension from the official MCP Python SDK (``mcp`` 2.3), docs/tasks.md.

Run it against the test suite's task app (``gunicorn -c gunicorn.conf.py tests.apps.tasks_app:app``):
``python examples/task_client_2026.py [URL]``.
"""

import asyncio
import sys
from typing import Any, Literal

import mcp
from mcp import types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import TypeAdapter


class Task(types.Result):
    """The answer to a tools/call that became a task (``resultType: "task"``)."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str


class TaskRequest(types.Request[dict[str, Any], str]):
    """tasks/get, tasks/update or tasks/cancel; the SDK sends ``Mcp-Name: <taskId>``."""

    name_param = "taskId"


async def task_request(session: Any, method: str, task_id: str, **params: Any) -> dict[str, Any]:
    request = TaskRequest(method=method, params={"taskId": task_id, **params})
    return await session.send_request(request, TypeAdapter(dict[str, Any]))


async def ask_user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The user's answer to a question (the client's elicitation callback; here: always yes)."""
    print("asked:", params.message)
    return types.ElicitResult(action="accept", content={"ok": True})


async def follow(task: Task, ctx: ClaimContext) -> types.CallToolResult:
    """Poll the task until it ends, answering its questions; its result as a plain call's."""
    while True:
        state = await task_request(ctx.session, "tasks/get", task.task_id)
        if state["status"] == "completed":
            return types.CallToolResult.model_validate(state["result"])
        if state["status"] in ("failed", "cancelled"):
            raise RuntimeError(f"the task {state['status']}: {state.get('statusMessage')}")
        questions = state.get("inputRequests", {})
        if questions:  # this client asks the user only elicitation/create questions
            answers = {}
            for key, question in questions.items():
                answer = await ask_user(ctx, TypeAdapter(types.ElicitRequestParams).validate_python(question["params"]))
                answers[key] = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
            await task_request(ctx.session, "tasks/update", task.task_id, inputResponses=answers)
        else:
            await asyncio.sleep(state["pollIntervalMs"] / 1000)


class Tasks(ClientExtension):
    """Declares the extension; a tools/call answered with a task is followed to its end."""

    identifier = "io.modelcontextprotocol/tasks"

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=Task, resolve=follow)]


async def main(url: str) -> None:
    async with mcp.Client(url, mode="2026-07-28", extensions=[Tasks()], elicitation_callback=ask_user) as client:
        # Create, poll and answer: call_tool returns once the task has ended.
        result = await client.call_tool("approve", {"item": "crate"})
        print("result:", result.content[0].text)
        # Create and cancel: allow_claimed hands back the task itself.
        task = await client.session.call_tool("report", {"seconds": 60}, allow_claimed=True)
        await task_request(client.session, "tasks/cancel", task.task_id)
        state = await task_request(client.session, "tasks/get", task.task_id)
        print("report:", state["status"])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"))
