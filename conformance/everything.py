"""The fixtures server of the official MCP conformance suite, written with zemcp's authoring API.

The suite's server scenarios call tools, read resources, get prompts and ask for completions
by fixed names (``test_simple_text``, ``test://static-text``, ``test_simple_prompt``, ...);
this module registers every one of them. Serve it like the reference server::

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
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(scanline))
            + chunk(b"IEND", b""))


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
        _text_resource("test://mixed-content-resource", json.dumps({"test": "data", "value": 123}),
                       "application/json"),
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
def test_sampling(prompt: Annotated[str, "The prompt to send to the client's language model"],
                  ctx: zemcp.Context) -> str:
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
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


@server.tool(input_schema=JSON_SCHEMA_2020_12)
def json_schema_2020_12_tool(name: str | None = None, address: dict | None = None) -> str:
    """Tool with JSON Schema 2020-12 features: $schema, $defs and additionalProperties false."""
    return json.dumps({"name": name, "address": address})


@server.tool
def test_reconnection(ctx: zemcp.Context) -> str:
    """Logs a message, which turns the response into an event stream, then returns."""
    ctx.log("info", "Reconnection test running")
    return "Reconnection test completed"


# -- resources -------------------------------------------------------------------------


@server.resource("test://static-text", name="static-text")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (a 1x1 PNG)."""
    return PNG


@server.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
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
def test_prompt_with_arguments(arg1: Annotated[str, "First argument"],
                               arg2: Annotated[str, "Second argument"]) -> str:
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


ARG1_VALUES = ("paris", "park", "parrot", "london", "lisbon")


@server.completion(prompt="test_prompt_with_arguments")
def complete_prompt_arguments(argument: str, value: str, context: dict[str, str]) -> list[str]:
    """Suggests values of ``arg1`` that start with what was typed; ``arg2`` is free text."""
    if argument != "arg1":
        return []
    return [candidate for candidate in ARG1_VALUES if candidate.startswith(value.lower())]


app = zemcp.McpApp(server)
