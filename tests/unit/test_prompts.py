"""Prompts: arguments from signatures, listing and prompts/get (zemcp.core.prompts)."""

from __future__ import annotations

import logging
from typing import Annotated, Optional

import pytest

from zemcp.core.prompts import PromptArgument, PromptRegistry, make_prompt, to_messages
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from zemcp.protocol.pagination import encode_cursor


def review(
    code: Annotated[str, "The code to review"],
    language: str,
    focus: str | None = None,
    tone: Optional[str] = "friendly",
):
    """Review a piece of code.

    More text for programmers only.

    Args:
        code: overridden by the Annotated description.
        language (str): The programming
            language of the code.
        focus: What to look at
            first.

    Returns:
        The prompt text.
    """
    return f"Review this {language} code ({focus}, {tone}):\n{code}"


@pytest.fixture
def registry():
    reg = PromptRegistry()
    reg.add(make_prompt(review, title="Code review"))
    reg.add(make_prompt(lambda: "Hi", name="hello"))
    return reg


def test_arguments_come_from_the_signature_annotations_and_docstring():
    prompt = make_prompt(review)
    assert prompt.name == "review"
    assert prompt.description == "Review a piece of code."
    assert prompt.arguments == (
        PromptArgument("code", "The code to review", True),
        PromptArgument("language", "The programming language of the code.", True),
        PromptArgument("focus", "What to look at first.", False),
        PromptArgument("tone", None, False),
    )


def test_definition_in_prompts_list(registry):
    listed = registry.list_result({}, 10)
    assert listed["prompts"][0] == {
        "name": "review",
        "title": "Code review",
        "description": "Review a piece of code.",
        "arguments": [
            {"name": "code", "description": "The code to review", "required": True},
            {"name": "language", "description": "The programming language of the code.", "required": True},
            {"name": "focus", "description": "What to look at first.", "required": False},
            {"name": "tone", "required": False},
        ],
    }
    assert listed["prompts"][1] == {"name": "hello", "arguments": []}
    assert "nextCursor" not in listed and len(registry) == 2


def test_listing_is_paginated(registry):
    first = registry.list_result({}, 1)
    assert [p["name"] for p in first["prompts"]] == ["review"] and first["nextCursor"] == encode_cursor(1)
    assert [p["name"] for p in registry.list_result({"cursor": first["nextCursor"]}, 1)["prompts"]] == ["hello"]


def test_get_renders_messages_with_the_arguments_and_defaults(registry):
    result = registry.get_result({"name": "review", "arguments": {"code": "x = 1", "language": "Python"}})
    assert result == {
        "description": "Review a piece of code.",
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "Review this Python code (None, friendly):\nx = 1"}}
        ],
    }
    bare = registry.get_result({"name": "hello"})
    assert bare == {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}]}
    assert registry.get_result({"name": "hello", "arguments": None}) == bare


def test_a_list_of_strings_and_message_dicts_passes_through():
    image = {"role": "assistant", "content": {"type": "image", "data": "AA==", "mimeType": "image/png"}}
    assert to_messages(["first", image]) == [{"role": "user", "content": {"type": "text", "text": "first"}}, image]
    assert to_messages([]) == []


@pytest.mark.parametrize(
    "value",
    [
        42,
        None,
        {"role": "user", "content": {"type": "text", "text": "a dict alone"}},
        [{"role": "system", "content": {"type": "text", "text": "x"}}],
        [{"role": "user", "content": "not a content object"}],
        [{"role": "user", "content": {"text": "no type"}}],
        ["ok", 3],
    ],
)
def test_anything_else_is_not_messages(value):
    with pytest.raises(TypeError, match="prompt"):
        to_messages(value)


@pytest.mark.parametrize(
    "params, words",
    [
        ({}, "params.name"),
        ({"name": 3}, "params.name"),
        ({"name": "nope"}, "unknown prompt 'nope'"),
        ({"name": "review", "arguments": {"code": "x"}}, "prompt 'review' needs the argument(s) language"),
        ({"name": "review", "arguments": {}}, "needs the argument(s) code, language"),
        (
            {"name": "review", "arguments": {"code": "x", "language": "C", "colour": "red"}},
            "prompt 'review' has no argument 'colour'; its arguments are: code, language, focus, tone",
        ),
        (
            {"name": "review", "arguments": {"code": "x", "language": 3}},
            "argument 'language' of prompt 'review' must be a string",
        ),
        ({"name": "review", "arguments": ["x"]}, "must be an object"),
    ],
)
def test_bad_requests_are_invalid_params_naming_the_problem(registry, params, words):
    with pytest.raises(ProtocolError) as info:
        registry.get_result(params)
    assert info.value.code == INVALID_PARAMS
    assert words in info.value.message


def test_a_failing_handler_is_an_internal_error_naming_the_prompt(caplog):
    reg = PromptRegistry()

    def broken():
        raise KeyError("inner detail")

    reg.add(make_prompt(broken))
    reg.add(make_prompt(lambda: 7, name="odd"))
    with caplog.at_level(logging.ERROR, logger="zemcp.prompts"), pytest.raises(ProtocolError) as info:
        reg.get_result({"name": "broken"})
    assert info.value.code == INTERNAL_ERROR and "'broken'" in info.value.message and "KeyError" in info.value.message
    assert "inner detail" in caplog.text and "inner detail" not in info.value.message
    with pytest.raises(ProtocolError) as info:
        reg.get_result({"name": "odd"})
    assert info.value.code == INTERNAL_ERROR and "'odd'" in info.value.message


def test_explicit_name_title_and_description_win():
    prompt = make_prompt(review, name="cr", title="CR", description="Short.")
    assert (prompt.name, prompt.title, prompt.description) == ("cr", "CR", "Short.")


def take_int(count: int):
    return str(count)


def take_list(items: Annotated[list, "things"]):
    return "x"


@pytest.mark.parametrize(
    "func, words",
    [
        (take_int, "argument 'count' is annotated <class 'int'>; prompt arguments are strings"),
        (take_list, "argument 'items'"),
        (lambda *lines: "x", r"\*lines"),
        (lambda **extra: "x", r"\*extra"),
        (lambda a, /: "x", "positional-only"),
    ],
)
def test_parameters_that_cannot_be_prompt_arguments_are_refused(func, words):
    with pytest.raises(ValueError, match=words):
        make_prompt(func, name="p")


def test_empty_and_taken_names_are_refused(registry):
    with pytest.raises(ValueError, match="non-empty"):
        make_prompt(review, name="")
    with pytest.raises(ValueError, match="already registered"):
        registry.add(make_prompt(lambda: "x", name="hello"))
