"""Argument completion providers and completion/complete (zemcp.core.completions)."""

import logging

import pytest

from zemcp.core.completions import MAX_VALUES, CompletionRegistry
from zemcp.core.prompts import PromptRegistry, make_prompt
from zemcp.core.resources import ResourceRegistry
from zemcp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError

LANGUAGES = ["python", "perl", "php", "rust"]


@pytest.fixture
def registry():
    prompts, resources = PromptRegistry(), ResourceRegistry()
    prompts.add(make_prompt(lambda language, style="": "x", name="review"))
    prompts.add(make_prompt(lambda topic: "x", name="plain"))
    resources.register(lambda owner, repo: "x", "git://{owner}/{repo}", name="repo")
    resources.register(lambda: "x", "test://static", name="static")
    return CompletionRegistry(prompts, resources)


def prompt_ref(name="review"):
    return {"type": "ref/prompt", "name": name}


def complete(registry, ref, name, value, context=None):
    params = {"ref": ref, "argument": {"name": name, "value": value}}
    if context is not None:
        params["context"] = context
    return registry.complete(params)


def test_prompt_provider_gets_argument_value_and_context(registry):
    calls = []

    def languages(argument, value, context):
        calls.append((argument, value, context))
        return [lang for lang in LANGUAGES if lang.startswith(value)]

    registry.add(languages, prompt="review")
    result = complete(registry, prompt_ref(), "language", "p", {"arguments": {"style": "terse"}})
    assert result == {"completion": {"values": ["python", "perl", "php"], "total": 3, "hasMore": False}}
    assert calls == [("language", "p", {"style": "terse"})]


def test_template_provider(registry):
    registry.add(
        lambda argument, value, context: [f"{argument}:{value}:{context.get('owner', '-')}"],
        resource="git://{owner}/{repo}",
    )
    result = complete(
        registry, {"type": "ref/resource", "uri": "git://{owner}/{repo}"}, "repo", "ze", {"arguments": {"owner": "me"}}
    )
    assert result["completion"]["values"] == ["repo:ze:me"]


def test_at_most_max_values_are_sent_with_the_total(registry):
    registry.add(lambda argument, value, context: [str(i) for i in range(250)], prompt="review")
    result = complete(registry, prompt_ref(), "language", "")["completion"]
    assert result["values"] == [str(i) for i in range(MAX_VALUES)] and MAX_VALUES == 100
    assert result["total"] == 250 and result["hasMore"] is True


def test_an_existing_ref_without_provider_completes_to_nothing(registry):
    empty = {"completion": {"values": [], "total": 0, "hasMore": False}}
    assert complete(registry, prompt_ref("plain"), "topic", "a") == empty
    assert complete(registry, {"type": "ref/resource", "uri": "git://{owner}/{repo}"}, "owner", "") == empty


def test_context_may_be_absent_or_empty(registry):
    seen = []
    registry.add(lambda argument, value, context: seen.append(context) or [], prompt="review")
    complete(registry, prompt_ref(), "language", "")
    complete(registry, prompt_ref(), "language", "", {})
    complete(registry, prompt_ref(), "language", "", {"arguments": None})
    assert seen == [{}, {}, {}]


@pytest.mark.parametrize(
    "params, words",
    [
        ({"argument": {"name": "language", "value": ""}}, "params.ref"),
        ({"ref": "review", "argument": {"name": "language", "value": ""}}, "params.ref"),
        ({"ref": {"type": "ref/tool", "name": "x"}, "argument": {"name": "a", "value": ""}}, "params.ref"),
        ({"ref": {"type": "ref/prompt"}, "argument": {"name": "a", "value": ""}}, "needs name"),
        ({"ref": {"type": "ref/resource", "name": "x"}, "argument": {"name": "a", "value": ""}}, "needs uri"),
        (
            {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}},
            "unknown prompt 'nope'",
        ),
        (
            {"ref": {"type": "ref/resource", "uri": "git://x/y"}, "argument": {"name": "owner", "value": ""}},
            "no resource template 'git://x/y'",
        ),
        (
            {"ref": {"type": "ref/resource", "uri": "test://static"}, "argument": {"name": "a", "value": ""}},
            "no resource template",
        ),
        ({"ref": {"type": "ref/prompt", "name": "review"}}, "params.argument"),
        ({"ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": "language"}}, "params.argument"),
        (
            {"ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": "language", "value": 1}},
            "params.argument",
        ),
        (
            {"ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": "colour", "value": ""}},
            "ref/prompt 'review' has no argument 'colour'; its arguments are: language, style",
        ),
        (
            {
                "ref": {"type": "ref/resource", "uri": "git://{owner}/{repo}"},
                "argument": {"name": "branch", "value": ""},
            },
            "its arguments are: owner, repo",
        ),
        (
            {
                "ref": {"type": "ref/prompt", "name": "review"},
                "argument": {"name": "language", "value": ""},
                "context": {"arguments": {"style": 3}},
            },
            "params.context",
        ),
        (
            {
                "ref": {"type": "ref/prompt", "name": "review"},
                "argument": {"name": "language", "value": ""},
                "context": ["style"],
            },
            "params.context",
        ),
        (
            {
                "ref": {"type": "ref/prompt", "name": "review"},
                "argument": {"name": "language", "value": ""},
                "context": {"arguments": "style=terse"},
            },
            "params.context",
        ),
    ],
)
def test_malformed_or_unknown_refs_are_invalid_params(registry, params, words):
    with pytest.raises(ProtocolError) as info:
        registry.complete(params)
    assert info.value.code == INVALID_PARAMS
    assert words in info.value.message


def test_a_failing_provider_is_an_internal_error(registry, caplog):
    def broken(argument, value, context):
        raise ValueError("provider detail")

    registry.add(broken, prompt="review")
    registry.add(lambda argument, value, context: "python", prompt="plain")
    with caplog.at_level(logging.ERROR, logger="zemcp.completions"), pytest.raises(ProtocolError) as info:
        complete(registry, prompt_ref(), "language", "")
    assert info.value.code == INTERNAL_ERROR and "'review'" in info.value.message
    assert "provider detail" in caplog.text
    with pytest.raises(ProtocolError) as info:
        complete(registry, prompt_ref("plain"), "topic", "")
    assert info.value.code == INTERNAL_ERROR and "list of strings" in info.value.message


def test_registration_rules(registry):
    provider = lambda argument, value, context: []  # noqa: E731
    with pytest.raises(ValueError, match="exactly one"):
        registry.add(provider)
    with pytest.raises(ValueError, match="exactly one"):
        registry.add(provider, prompt="review", resource="git://{owner}/{repo}")
    with pytest.raises(ValueError, match="non-empty"):
        registry.add(provider, prompt="")
    assert len(registry) == 0
    assert registry.add(provider, prompt="later") is provider  # the prompt may come later
    assert registry.add(provider, resource="git://{owner}/{repo}") is provider
    assert len(registry) == 2
    with pytest.raises(ValueError, match="already has a completion provider"):
        registry.add(provider, prompt="later")
