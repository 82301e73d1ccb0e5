"""Params of the wrong JSON type, in every method of both eras: -32602 naming the field, never a 500.

A name, URI, ref or cursor that is an object or a list is unhashable, so a lookup keyed by it
would raise instead of finding nothing; each method's own checks must refuse it first.
"""

from __future__ import annotations

import pytest

from tests.apps.lookups import make_app
from tests.support.clients import LATEST_VERSION, inprocess_modern, inprocess_session

WRONG = [{"a": 1}, [1], [], 1, True]
#: method -> (valid params, the field given a wrong type, the word the message names).
CASES = {
    "tools/call name": ("tools/call", {"name": "echo", "arguments": {}}, "name"),
    "tools/call arguments": ("tools/call", {"name": "echo", "arguments": {}}, "arguments"),
    "prompts/get name": ("prompts/get", {"name": "greet", "arguments": {"who": "b"}}, "name"),
    "prompts/get arguments": ("prompts/get", {"name": "greet", "arguments": {"who": "b"}}, "arguments"),
    "resources/read uri": ("resources/read", {"uri": "file:///a.txt"}, "uri"),
    "completion/complete ref": ("completion/complete", {"ref": {}, "argument": {"name": "who", "value": ""}}, "ref"),
    "completion/complete argument": ("completion/complete", {"ref": {}, "argument": {}}, "argument"),
    "tools/list cursor": ("tools/list", {}, "cursor"),
    "prompts/list cursor": ("prompts/list", {}, "cursor"),
    "resources/list cursor": ("resources/list", {}, "cursor"),
    "resources/templates/list cursor": ("resources/templates/list", {}, "cursor"),
}
VALID_REF = {"type": "ref/prompt", "name": "greet"}


@pytest.fixture(scope="module")
def app():
    return make_app()


def _params(case: str, wrong: object) -> tuple[str, dict]:
    method, valid, field = CASES[case]
    params = dict(valid)
    if method == "completion/complete" and field != "ref":
        params["ref"] = VALID_REF
    params[field] = wrong
    return method, params


def post(app, era: str, method: str, params: dict):
    """Request ``method`` with ``params`` (id 9) in a new session, or as a 2026-07-28 request
    declaring no capabilities."""
    if era == "handshake":
        client = inprocess_session(app, name="t", version="1", protocol_version=LATEST_VERSION, capabilities={})
        return client.post({"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
    modern = inprocess_modern(app, name="t", version="1", capabilities={})
    return modern.post({"jsonrpc": "2.0", "id": 9, "method": method, "params": {**params, "_meta": modern.meta()}})


def _wrongs(case: str) -> list[object]:
    # An object is arguments of the right type, and an empty list counts as no arguments.
    return [w for w in WRONG if not (case.endswith("arguments") and (w == [] or isinstance(w, dict)))]


@pytest.mark.parametrize("era", ["handshake", "modern"])
@pytest.mark.parametrize(("case", "wrong"), [(case, wrong) for case in CASES for wrong in _wrongs(case)])
def test_a_param_of_the_wrong_type_is_invalid_params(app, era, case, wrong):
    """Each method refuses the field with -32602 in both eras (400 in 2026-07-28), naming it."""
    method, params = _params(case, wrong)
    response = post(app, era, method, params)
    assert response.status_code == (200 if era == "handshake" else 400), response.get_data(as_text=True)
    body = response.get_json()
    assert body["id"] == 9 and body["error"]["code"] == -32602, body
    assert CASES[case][2] in body["error"]["message"], body
