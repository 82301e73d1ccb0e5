"""The fixtures server of the official MCP conformance suite, written with zemcp's authoring API.

The suite's server scenarios call tools, read resources, get prompts and ask for completions
by fixed names (``test_simple_text``, ``test://static-text``, ``test_simple_prompt``, ...);
this module registers every one of them, for the handshake-era runs and for the 2026-07-28
requirement set alike. The tool list never changes while the server runs and starts with
``test_simple_text``: the 2026-07-28 scenarios compare repeated listings and call the first
tool with no arguments. Serve it like the reference server::

    gunicorn -c gunicorn.conf.py conformance.everything:app

``conformance/run.py`` does that on a free loopback port and runs the suite against it
(``tox -e conformance``; see docs/conformance.md).
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import struct
import time
import wave
import zlib
from typing import Annotated, Literal, TypedDict

import zemcp

server = zemcp.Server("zemcp-everything", zemcp.__version__)

# The scenarios that check timing expect notifications spread over the call, ~50 ms apart.
STEP_SECONDS = 0.05


def _png() -> bytes:
    """A valid 1x1 PNG: one opaque red RGB pixel."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # width, height, depth 8, RGB, defaults
    scanline = b"\x00\xff\x00\x00"  # filter type "none", then R, G, B
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(scanline)) + chunk(b"IEND", b"")


def _wav() -> bytes:
    """A valid WAV file: 10 ms of 16-bit mono silence at 8 kHz."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 80)
    return buffer.getvalue()


PNG = _png()
PNG_BASE64 = base64.b64encode(PNG).decode("ascii")
WAV_BASE64 = base64.b64encode(_wav()).decode("ascii")


def _image() -> dict:
    return {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}


def _text_resource(uri: str, text: str, mime_type: str = "text/plain") -> dict:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "text": text}}


# -- tools -----------------------------------------------------------------------------


@server.tool
def test_simple_text() -> str:
    """Returns one text content item."""
    return "This is a simple text response for testing."


@server.tool
def test_image_content() -> list[dict]:
    """Returns one image content item (a 1x1 PNG)."""
    return [_image()]


@server.tool
def test_audio_content() -> list[dict]:
    """Returns one audio content item (a short WAV file)."""
    return [{"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"}]


@server.tool
def test_embedded_resource() -> list[dict]:
    """Returns one embedded text resource."""
    return [_text_resource("test://embedded-resource", "This is an embedded resource content.")]


@server.tool
def test_multiple_content_types() -> list[dict]:
    """Returns text, image and embedded resource content in one result."""
    return [
        {"type": "text", "text": "Multiple content types test:"},
        _image(),
        _text_resource("test://mixed-content-resource", json.dumps({"test": "data", "value": 123}), "application/json"),
    ]


@server.tool
def test_tool_with_logging(ctx: zemcp.Context) -> str:
    """Sends three info log messages while it runs."""
    ctx.log("info", "Tool execution started")
    time.sleep(STEP_SECONDS)
    ctx.log("info", "Tool processing data")
    time.sleep(STEP_SECONDS)
    ctx.log("info", "Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool
def test_tool_with_progress(ctx: zemcp.Context) -> str:
    """Reports progress 0, 50 and 100 of 100 while it runs (when the call asked for progress)."""
    for step, progress in enumerate((0, 50, 100)):
        if step:
            time.sleep(STEP_SECONDS)
        ctx.report_progress(progress, 100, f"Completed step {progress} of 100")
    return "Tool with progress executed successfully"


@server.tool
def test_error_handling() -> str:
    """Always fails: the result has isError set."""
    raise zemcp.ToolError("This tool intentionally returns an error for testing")


@server.tool
def test_sampling(
    prompt: Annotated[str, "The prompt to send to the client's language model"], ctx: zemcp.Context
) -> str:
    """Asks the client's language model to answer the prompt and returns the answer."""
    result = ctx.sample(prompt, max_tokens=100)
    content = result.get("content")
    answer = content.get("text") if isinstance(content, dict) and content.get("type") == "text" else None
    return f"LLM response: {answer if answer is not None else json.dumps(content)}"


class UserInfo(TypedDict):
    """What test_elicitation asks for."""

    username: Annotated[str, "User's response"]
    email: Annotated[str, "User's email address"]


def _elicited(ctx: zemcp.Context, message: str, schema: dict | type) -> tuple[str, object]:
    """Elicit and name the user's action; declined and cancelled are outcomes, not errors."""
    try:
        return "accept", ctx.elicit(message, schema)
    except zemcp.ElicitDeclined:
        return "decline", {}
    except zemcp.ElicitCancelled:
        return "cancel", {}


@server.tool
def test_elicitation(message: Annotated[str, "The message to show the user"], ctx: zemcp.Context) -> str:
    """Asks the user for a username and an email address and returns the answer."""
    action, content = _elicited(ctx, message, UserInfo)
    return f"User response: action={action}, content={json.dumps(content)}"


@dataclasses.dataclass
class Defaults:
    """What test_elicitation_sep1034_defaults asks for: a default on every primitive type.

    Attributes:
        name: User name.
        age: User age.
        score: User score.
        status: User status.
        verified: Verification status.
    """

    name: str = "John Doe"
    age: int = 30
    score: float = 95.5
    status: Literal["active", "inactive", "pending"] = "active"
    verified: bool = True


@server.tool
def test_elicitation_sep1034_defaults(ctx: zemcp.Context) -> str:
    """Elicits a form whose string, integer, number, enum and boolean fields all have defaults."""
    action, content = _elicited(ctx, "Please provide user information", Defaults)
    shown = dataclasses.asdict(content) if isinstance(content, Defaults) else content
    return f"Elicitation completed: action={action}, content={json.dumps(shown)}"


ENUM_VARIANTS = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Untitled single-select",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Titled single-select",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "description": "Legacy titled enum",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Untitled multi-select",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Titled multi-select",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


@server.tool
def test_elicitation_sep1330_enums(ctx: zemcp.Context) -> str:
    """Elicits a form with every enum variant: untitled, titled, legacy enumNames, and multi-select."""
    action, content = _elicited(ctx, "Please select values using different enum schema types", ENUM_VARIANTS)
    return f"Elicitation completed: action={action}, content={json.dumps(content)}"


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(input_schema=JSON_SCHEMA_2020_12)
def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Tool with JSON Schema 2020-12 features: $schema, $defs, $anchor, allOf/anyOf, if/then/else
    and additionalProperties false."""
    return json.dumps(
        {"name": name, "address": address, "contactMethod": contactMethod, "phone": phone, "email": email}
    )


@server.tool
def test_reconnection(ctx: zemcp.Context) -> str:
    """Ends its stream's connection mid-call (SSE polling), then returns: the result reaches
    the client on the GET that resumes the stream with Last-Event-ID."""
    ctx.close_sse_stream()
    return "Reconnection test completed"


# -- 2026-07-28 (stateless) fixtures ---------------------------------------------------
#
# In the 2026-07-28 era a question to the client ends the request with an
# InputRequiredResult; the client retries with the answers and the handler runs again from
# the top. The same handlers push the questions on the stream in a handshake-era session.


NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _sampled_text(result: dict) -> str:
    """The text of a CreateMessageResult, or its content as JSON when it is not text."""
    content = result.get("content")
    if isinstance(content, dict) and content.get("type") == "text":
        return content.get("text", "")
    return json.dumps(content)


@server.tool
def test_missing_capability(ctx: zemcp.Context) -> str:
    """Needs the sampling capability: asks the client's language model for a one-word answer."""
    result = ctx.sample("Say hello in one word.", max_tokens=10)
    return f"Sampling answered: {_sampled_text(result)}"


@server.tool
def test_streaming_elicitation(ctx: zemcp.Context) -> str:
    """Asks the user to confirm; the question travels as an input request, never as a request on the stream."""
    action, content = _elicited(
        ctx, "Please confirm to continue", {"type": "object", "properties": {"confirmed": {"type": "boolean"}}}
    )
    return f"Streaming elicitation: action={action}, content={json.dumps(content)}"


@server.tool
def test_logging_tool(ctx: zemcp.Context) -> str:
    """Logs at info level, which reaches the client only when the request asked for log messages."""
    ctx.log("info", "test_logging_tool started")
    ctx.log("info", "test_logging_tool finished")
    return "Logging tool executed successfully"


@server.tool
def test_trigger_tool_change() -> str:
    """Tells the clients listening for tool list changes that the list changed (it stays the same)."""
    told = server.notify_list_changed("tools")
    return f"Sent notifications/tools/list_changed to {told} stream(s)"


@server.tool
def test_trigger_prompt_change() -> str:
    """Tells the clients listening for prompt list changes that the list changed (it stays the same)."""
    told = server.notify_list_changed("prompts")
    return f"Sent notifications/prompts/list_changed to {told} stream(s)"


@server.tool
def test_custom_header(region: Annotated[str, zemcp.McpHeader("Region"), "The region to use"]) -> str:
    """Echoes its region argument, which clients mirror in the Mcp-Param-Region header."""
    return f"Region: {region}"


@server.tool
def test_input_required_result_elicitation(ctx: zemcp.Context) -> str:
    """Asks the user for their name and greets them."""
    answer = ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {answer['name']}!"


@server.tool
def test_input_required_result_sampling(ctx: zemcp.Context) -> str:
    """Asks the client's language model for the capital of France."""
    result = ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return f"Sampling result: {_sampled_text(result)}"


@server.tool
def test_input_required_result_list_roots(ctx: zemcp.Context) -> str:
    """Asks the client for its roots and counts them."""
    roots = ctx.list_roots(key="client_roots")
    return f"Found {len(roots)} root(s)"


CONFIRM_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@server.tool
def test_input_required_result_request_state(ctx: zemcp.Context) -> str:
    """Asks the user to confirm; the answer comes back with the request state of the first round."""
    ctx.elicit("Please confirm", CONFIRM_SCHEMA, key="confirm")
    return "state-ok: requestState validated"


@server.tool
def test_input_required_result_multiple_inputs(ctx: zemcp.Context) -> str:
    """Asks for a name (elicitation), a greeting (sampling) and the roots at once."""
    user, greeting, roots = ctx.ask_all(
        zemcp.Elicit("What is your name?", NAME_SCHEMA, key="user_name"),
        zemcp.Sample("Generate a greeting", max_tokens=50, key="greeting"),
        zemcp.ListRoots(key="client_roots"),
    )
    return f"Name: {user['name']}; Greeting: {_sampled_text(greeting)}; Roots: {len(roots)}"


@server.tool
def test_input_required_result_multi_round(ctx: zemcp.Context) -> str:
    """Asks two questions one after the other: a name, then a favourite colour."""
    name = ctx.elicit("Step 1: What is your name?", NAME_SCHEMA, key="step1")["name"]
    color = ctx.elicit(
        "Step 2: What is your favorite color?",
        {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
        key="step2",
    )["color"]
    return f"Multi-round complete for {name} who likes {color}"


@server.tool
def test_input_required_result_tampered_state(ctx: zemcp.Context) -> str:
    """Asks the user to confirm; a changed request state is refused."""
    ctx.elicit("Please confirm", CONFIRM_SCHEMA, key="confirm")
    return "integrity-ok: state verified"


@server.tool
def test_input_required_result_capabilities(ctx: zemcp.Context) -> str:
    """Asks the client's language model, and the user too when the client can elicit."""
    asks: list[zemcp.Ask] = [zemcp.Sample("Sample request", max_tokens=50, key="sample_input")]
    if ctx.client_supports_elicit():
        asks.append(
            zemcp.Elicit(
                "Elicit request", {"type": "object", "properties": {"value": {"type": "string"}}}, key="elicit_input"
            )
        )
    ctx.ask_all(*asks)
    return f"capabilities-ok: received {', '.join(ask.key for ask in asks)}"


# -- tasks (the io.modelcontextprotocol/tasks extension's scenarios) ------------------


# The scenarios answer every question with {"confirm": true} and maybe a "name".
CONFIRM_TASK_SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}


@server.tool
def greet(name: str) -> str:
    """Greets someone; never runs as a task."""
    return f"Hello, {name}!"


@server.tool(task="optional")
def slow_compute(seconds: float, ctx: zemcp.Context, label: str = "") -> str:
    """Works for ``seconds``; a task when the client declares the tasks extension."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.raise_if_cancelled()
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
    return f"computed {label or 'result'} in {seconds:g} s"


@server.tool(task="required")
def failing_job() -> str:
    """Runs only as a task, and ends with a tool error after a second."""
    time.sleep(1.0)
    raise zemcp.ToolError("failing_job failed on purpose")


@server.tool(task="required")
def protocol_error_job() -> str:
    """Runs only as a task, and ends with a JSON-RPC error (the task fails)."""
    time.sleep(0.2)
    raise zemcp.ProtocolError(-32603, "protocol_error_job failed on purpose")


@server.tool(task="required")
def confirm_delete(filename: str, ctx: zemcp.Context) -> str:
    """Asks the user to confirm before it deletes ``filename`` (a task that waits for the answer)."""
    answer = ctx.elicit(f"Delete {filename}?", CONFIRM_TASK_SCHEMA, key="confirm")
    return f"deleted {filename}" if answer.get("confirm") else f"kept {filename}"


@server.tool(task="required")
def multi_input(ctx: zemcp.Context) -> str:
    """Asks two questions at once from a task."""
    name, confirm = ctx.ask_all(
        zemcp.Elicit("What is your name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name"),
        zemcp.Elicit("Go ahead?", CONFIRM_TASK_SCHEMA, key="go"),
    )
    return f"multi_input done: {name.get('name')}, {confirm.get('confirm')}"


@server.tool(task="required", elicit_missing=["name"])
def test_tool_with_task(name: str) -> str:
    """Asks for a name before the task starts (multi-round-trip), then greets in the task."""
    return f"Hello from the task, {name}!"


# -- resources -------------------------------------------------------------------------


@server.resource("test://static-text", name="static-text")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (a 1x1 PNG)."""
    return PNG


@server.resource("test://template/{id}/data", name="template", mime_type="application/json")
def template_data(id: str) -> str:
    """A resource template: the data of item ``id``."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource("test://watched-resource", name="watched-resource")
def watched_resource() -> str:
    """A resource clients may subscribe to."""
    return "Watched resource content"


# -- prompts and completion ------------------------------------------------------------


@server.prompt
def test_simple_prompt() -> str:
    """A prompt without arguments."""
    return "This is a simple prompt for testing."


@server.prompt
def test_prompt_with_arguments(arg1: Annotated[str, "First argument"], arg2: Annotated[str, "Second argument"]) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt
def test_prompt_with_embedded_resource(resourceUri: Annotated[str, "URI of the resource to embed"]) -> list:
    """A prompt that embeds a resource."""
    return [
        {"role": "user", "content": _text_resource(resourceUri, "Embedded resource content for testing.")},
        "Please process the embedded resource above.",
    ]


@server.prompt
def test_prompt_with_image() -> list:
    """A prompt that includes an image."""
    return [{"role": "user", "content": _image()}, "Please analyze the image above."]


@server.prompt
def test_input_required_result_prompt(ctx: zemcp.Context) -> str:
    """A prompt that asks the user which context to use."""
    answer = ctx.elicit(
        "What context should the prompt use?",
        {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
        key="user_context",
    )
    return f"Prompt with context: {answer['context']}"


ARG1_VALUES = ("paris", "park", "parrot", "london", "lisbon")


@server.completion(prompt="test_prompt_with_arguments")
def complete_prompt_arguments(argument: str, value: str, context: dict[str, str]) -> list[str]:
    """Suggests values of ``arg1`` that start with what was typed; ``arg2`` is free text."""
    if argument != "arg1":
        return []
    return [candidate for candidate in ARG1_VALUES if candidate.startswith(value.lower())]


app = zemcp.McpApp(server)
