"""Tasks of MCP 2025-11-25 (a session) from the official MCP Python SDK (``mcp`` 2.3), docs/tasks.md.

Run it against the test suite's task app (``gunicorn -c gunicorn.conf.py tests.apps.tasks_app:app``):
``python examples/task_client_2025.py [URL]``.
"""

import asyncio
import sys
from typing import Any

import mcp
import pydantic
from mcp import types


async def ask_user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The user's answer to a question (the client's elicitation callback; here: always yes)."""
    print("asked:", params.message)
    return types.ElicitResult(action="accept", content={"ok": True})


async def create_task(session: Any, name: str, arguments: dict[str, Any]) -> types.Task:
    """tools/call with ``params.task``: the server answers at once with the task."""
    task = types.TaskMetadata(ttl=600000)
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments, task=task))
    try:
        raw = await session.send_request(request, pydantic.TypeAdapter(dict[str, Any]))
    except pydantic.ValidationError as exc:
        # mcp 2.3 checks a tools/call result as a CallToolResult before it returns it: the task
        # is the input of the error it raises for the missing "content".
        raw = exc.errors()[0]["input"]
    return types.CreateTaskResult.model_validate(raw).task


async def main(url: str) -> None:
    async with mcp.Client(url, mode="legacy", elicitation_callback=ask_user) as client:
        session = client.session
        # Create, poll, answer: tasks/result waits for the end; the question comes on its
        # stream, and the SDK answers it with the elicitation callback.
        task = await create_task(session, "approve", {"item": "crate"})
        get = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task.task_id))
        status = task.status
        while status == "working":
            await asyncio.sleep((task.poll_interval or 1000) / 1000)
            status = (await session.send_request(get, types.GetTaskResult)).status
        print("approve:", status)  # input_required: it waits for the user
        fetch = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task.task_id))
        result = await session.send_request(fetch, types.CallToolResult)
        print("result:", result.content[0].text)
        # Create and cancel.
        task = await create_task(session, "report", {"seconds": 60})
        cancel = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task.task_id))
        print("report:", (await session.send_request(cancel, types.CancelTaskResult)).status)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"))
