"""examples/click_tools.py over gunicorn: Click commands as tools and behind tasks_execute,
concurrent calls with their own output, and a missing required option asked for by elicitation."""

import inspect
import threading

import pytest

import zemcp
from tests.support.clients import ModernClient
from tests.support.net import READ_TIMEOUT

APP = "examples.click_tools:app"
ELICIT_MISSING = "elicit_missing" in inspect.signature(zemcp.Server.tool).parameters


def call(client, name: str, arguments: dict) -> dict:
    """A tools/call that answers plain JSON; returns the CallToolResult."""
    response = client.post(client.call_message(arguments, name=name))
    assert response.status_code == 200, (response.status_code, response.text)
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    return response.json()["result"]


def text(result: dict) -> tuple[bool, str]:
    return result["isError"], result["content"][0]["text"]


def test_tools_list_shows_the_commands_with_their_schemas(start_server):
    """Every command is a tool with its help as description and its parameters as schema; tasks_execute too."""
    client = start_server(app=APP).session()
    tools = {tool["name"]: tool for tool in client.rpc("tools/list")["tools"]}
    assert set(tools) == {"greet", "total", "release_deploy", "release_check", "tasks_execute"}
    greet = tools["greet"]
    assert greet["description"] == "Greet someone by name."
    assert greet["inputSchema"] == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "shout": {"type": "boolean", "default": False, "description": "Write the greeting in capitals."},
            "times": {
                "type": "integer",
                "minimum": 1,
                "maximum": 5,
                "default": 1,
                "description": "How many greetings.",
            },
            "pause": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "default": 0.0,
                "description": "Seconds to wait between greetings.",
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    deploy = tools["release_deploy"]["inputSchema"]
    assert deploy["properties"]["env"]["enum"] == ["staging", "production"]
    assert deploy["required"] == ["env", "version"]
    assert tools["total"]["inputSchema"]["properties"]["numbers"] == {
        "type": "array",
        "items": {"type": "number"},
        "minItems": 1,
    }


def test_calls_return_output_and_failures_as_error_results(start_server):
    """Output comes back as text; a bad parameter, a non-zero exit and schema violations are isError."""
    server = start_server(app=APP)
    client = server.session()
    assert text(call(client, "greet", {"name": "Ada", "shout": True, "times": 2})) == (
        False,
        "HELLO, ADA!\nHELLO, ADA!\n",
    )
    assert text(call(client, "total", {"numbers": [1, 2.5, -0.5]})) == (False, "3\n")
    assert text(call(client, "release_deploy", {"env": "staging", "version": "1.4.2", "dry_run": True})) == (
        False,
        "would deploy 1.4.2 to staging\n",
    )
    assert text(call(client, "release_deploy", {"env": "production", "version": "2.0-rc"})) == (
        True,
        "Error: Invalid value for '--version': release candidates do not go to production (exit code 2)",
    )
    assert text(call(client, "release_check", {"version": "1.x"})) == (
        True,
        "Error: exit code 3\n'1.x' is not MAJOR.MINOR.PATCH",
    )
    # The schema's range is checked before the command runs (JSON-RPC -32602 before 2025-11-25).
    response = client.post(client.call_message({"name": "Ada", "times": 9}, name="greet"))
    assert response.json()["error"]["code"] == -32602, response.text
    latest = server.session(protocol_version="2025-11-25")
    error, message = text(call(latest, "greet", {"name": "Ada", "times": 9}))
    assert error is True and "argument 'times'" in message, message
    modern = ModernClient(server.url)
    result = modern.call_result({"name": "Bo"}, name="greet")
    assert result["resultType"] == "complete" and text(result) == (False, "Hello, Bo!\n")


def test_concurrent_calls_each_get_their_own_output(start_server):
    """Calls that run at the same time on the worker's threads do not see each other's output."""
    client = start_server(app=APP).session()
    # Made here: the client's ids are not thread-safe; each POST then travels on a connection of its own.
    messages = {
        name: client.call_message({"name": name, "times": 5, "pause": 0.05}, name="greet")
        for name in ("Ada", "Bo", "Cy", "Di")
    }
    results: dict[str, dict] = {}

    def run(name: str) -> None:
        response, stream = client.open_stream(messages[name])
        assert response.status_code == 200 and stream is None, response.headers
        results[name] = response.json()["result"]

    threads = [threading.Thread(target=run, args=(name,)) for name in messages]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(READ_TIMEOUT + 5)
        assert not thread.is_alive(), "a call did not finish"
    for name in messages:
        assert text(results[name]) == (False, f"Hello, {name}!\n" * 5), results


def test_commands_run_as_text_lines_behind_tasks_execute(start_server):
    """tasks_execute runs a line: shell quoting, --help, help, and Click's failures as Error: text."""
    client = start_server(app=APP).session()
    assert text(call(client, "tasks_execute", {"command": "greet 'Ada Lovelace' --shout"})) == (
        False,
        "HELLO, ADA LOVELACE!\n",
    )
    assert text(call(client, "tasks_execute", {"command": "release deploy --env staging --version 1.0.0"})) == (
        False,
        "deployed 1.0.0 to staging\n",
    )
    error, usage = text(call(client, "tasks_execute", {"command": "release check --help"}))
    assert error is False and usage.startswith("Usage: cli release check [OPTIONS] VERSION"), usage
    error, listing = text(call(client, "tasks_execute", {"command": "help"}))
    assert error is False and "release deploy  Deploy a version to an environment." in listing, listing
    assert text(call(client, "tasks_execute", {"command": "release check 1.x"})) == (
        True,
        "Error: exit code 3\n'1.x' is not MAJOR.MINOR.PATCH",
    )
    error, message = text(call(client, "tasks_execute", {"command": "release deploy --env moon --version 1"}))
    assert (
        error is True and message.startswith("Error: Invalid value for '--env'") and message.endswith("(exit code 2)")
    ), message


@pytest.mark.skipif(not ELICIT_MISSING, reason="server.tool has no elicit_missing yet")
def test_missing_required_option_is_asked_for_by_elicitation(start_server):
    """release_deploy without --env asks for it in a form (Choice as enum); the answer completes the call."""
    server = start_server(app=APP)
    client = server.session()
    message = client.call_message({"version": "1.4.2"}, name="release_deploy")
    response, stream = client.open_stream(message)
    assert response.status_code == 200 and stream is not None, response.headers
    request = stream.next_message()
    assert request is not None and request["method"] == "elicitation/create", request
    schema = request["params"]["requestedSchema"]
    assert list(schema["properties"]) == ["env"] and schema["required"] == ["env"], schema
    assert schema["properties"]["env"]["enum"] == ["staging", "production"], schema
    assert client.accept(request["id"], {"env": "staging"}).status_code == 202
    final = stream.next_message()
    assert final is not None and final["id"] == message["id"], final
    assert text(final["result"]) == (False, "deployed 1.4.2 to staging\n")
    plain = server.session(elicitation=False)
    assert text(call(plain, "release_deploy", {"version": "1.4.2"})) == (True, "Error: missing required argument: env")
