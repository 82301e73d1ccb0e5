"""Strings that are not Unicode text, or hold what no name may hold, sent by clients of both eras
to both state backends: a seeded fuzz driven in-process through werkzeug's test client.

JSON can spell a string UTF-8 cannot encode: a ``\\ud800`` escape without its partner (a lone
surrogate). A method's name, URI or task id, a cursor, a ``requestState`` and the id of an
elicitation answer holding one, or a control character (NUL included) or a noncharacter, gets
a 4xx or a JSON-RPC error naming the field; an argument mirrored into ``Mcp-Param-*`` does
when it holds a lone surrogate, which no header can carry. Text that is only carried (a
client's name, a request id, a tool's argument, an elicitation's answer) comes back as the
server read it. Nothing gets a 5xx. The same bodies spelled in raw bytes (a surrogate as the
three bytes UTF-8 would give it, as CESU-8 writes it) are not UTF-8: 400, -32700. The memory
backend keeps the state in this process, the Redis one in a real ``redis-server``
(tests/support/redisserver.py), where names become key names and script arguments. The named entries
over real HTTP under gunicorn are in tests/integration/test_http_invalid_unicode.py.
"""

from __future__ import annotations

import base64
import json
import random
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import zemcp
from tests.apps.lookups import make_app
from tests.support.clients import HandshakeClient, inprocess_session
from zemcp.protocol.header_values import encode_value

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
CAPABILITIES = {"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
#: The values every case gets first: the reported escapes ("\ud800", "\udfff", two high
#: surrogates, a low one before a high one, half an emoji), NUL and noncharacters.
NAMED = ["\ud800", "\udfff", "\ud800\ud800", "\udc00\ud800", "a\ud83d", "\x00", "\ufffe", "\U0010ffff"]
#: Random values per case after the named ones; the seed makes every run send the same.
RANDOM_PER_CASE = 6
SEED = 20260728
#: Text around the random values' bad pieces.
FILLER = ["a", "tool", "/", " ", "é", "😀", "\u0301", "=?base64?", "?="]


def random_text(rng: random.Random) -> str:
    """A short string with at least one bad piece: a lone high or low surrogate, a low one
    before a high one, NUL or another control character, or a noncharacter."""
    bad = [
        lambda: chr(rng.randint(0xD800, 0xDBFF)),
        lambda: chr(rng.randint(0xDC00, 0xDFFF)),
        lambda: chr(rng.randint(0xDC00, 0xDFFF)) + chr(rng.randint(0xD800, 0xDBFF)),
        lambda: chr(rng.choice([0x00, 0x09, 0x1B, 0x7F, 0x85])),
        lambda: chr(rng.choice([0xFDD0 + rng.randint(0, 31), 0xFFFE, 0xFFFF, 0x1FFFE, 0x10FFFF])),
    ]
    pieces = [rng.choice(bad)() for _ in range(rng.randint(1, 3))]
    pieces += [rng.choice(FILLER) for _ in range(rng.randint(0, 3))]
    rng.shuffle(pieces)
    return "".join(pieces)


def as_read(value: str) -> str:
    """``value`` as the server reads it from the JSON text: adjacent high and low surrogate
    escapes make one character."""
    return json.loads(json.dumps(value))


def has_surrogate(text: str) -> bool:
    return any(unicodedata.category(c) == "Cs" for c in text)


def unfit_for_a_name(text: str) -> bool:
    """A lone surrogate, a control character, or a noncharacter (U+FDD0..U+FDEF, U+xxFFFE, U+xxFFFF)."""
    return any(
        unicodedata.category(c) in ("Cs", "Cc") or 0xFDD0 <= ord(c) <= 0xFDEF or ord(c) & 0xFFFE == 0xFFFE for c in text
    )


# -- the clients ------------------------------------------------------------------------


@dataclass
class Sent:
    """One POST: a message and the headers beyond Accept and Content-Type."""

    message: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def session(app: zemcp.McpApp) -> HandshakeClient:
    """A handshake session whose requests the cases send, or stateless modern requests beside it."""
    return inprocess_session(app, name="fuzz", protocol_version=HANDSHAKE, capabilities={"elicitation": {}})


def send(peer: HandshakeClient, sent: Sent, *, raw: bool = False) -> Any:
    """POST ``sent``: in the session unless its headers name a protocol version of their own."""
    # Escaped, a lone surrogate is "\ud800" in the JSON text; raw, its three bytes ED A0 80.
    body = (
        json.dumps(sent.message, ensure_ascii=False).encode("utf-8", "surrogatepass")
        if raw
        else json.dumps(sent.message).encode("ascii")
    )
    in_session = "MCP-Protocol-Version" not in sent.headers
    return peer.post(data=body, headers=sent.headers, session=in_session, version=in_session)


def handshake(method: str, params: dict[str, Any], id_: Any = 7) -> Sent:
    return Sent({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})


def modern(method: str, params: dict[str, Any], name: str | None = None, rng: random.Random | None = None) -> Sent:
    """A 2026-07-28 request. ``Mcp-Name`` carries ``name``: in its header form without ``rng``;
    with it, in one of the forms a client might try: its header form (when it has one), the
    base64 of its bytes with surrogates encoded anyway, a wrong value, or no header."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
        "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
    }
    message = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        proper = "base64" if has_surrogate(name) else "proper"
        form = proper if rng is None else rng.choice([proper, "wrong", "none"])
        if form == "proper":
            headers["Mcp-Name"] = encode_value(name)
        elif form == "base64":
            payload = base64.b64encode(name.encode("utf-8", "surrogatepass")).decode("ascii")
            headers["Mcp-Name"] = f"=?base64?{payload}?="
        elif form == "wrong":
            headers["Mcp-Name"] = "x"
    return Sent(message, headers)


# -- the cases ----------------------------------------------------------------------------

NAMES = "names"  # refused when unfit for a name
SURROGATES = "surrogates"  # refused when it holds a lone surrogate
ANY = "any"  # refused whatever it is (it can only be a token the server issued)
CARRIED = "carried"  # never refused
IGNORED = "ignored"  # a notification's field: accepted (202) whatever it is


@dataclass
class Case:
    """A field of a message, and what becomes of a value put in it.

    ``build(peer, rng, value)`` makes the message with ``value`` in the field. A refused
    value gets an error whose message holds ``label``; a carried one comes back: ``echo(peer,
    body)`` finds it in the response (``None`` checks only that there was no error).
    """

    build: Callable[[HandshakeClient, random.Random, str], Sent]
    refused: str
    label: str = ""
    echo: Callable[[HandshakeClient, dict[str, Any]], Any] | None = None

    def refuses(self, value: str) -> bool:
        if self.refused == NAMES:
            return unfit_for_a_name(value)
        if self.refused == SURROGATES:
            return has_surrogate(value)
        return self.refused == ANY


def _text(peer: HandshakeClient, body: dict[str, Any]) -> Any:
    return body["result"]["content"][0]["text"]


def _round_two(peer: HandshakeClient, rng: random.Random, value: str) -> Sent:
    """Round 2 of ``ask_twice``, answering its first question with ``value``."""
    first = send(peer, modern("tools/call", {"name": "ask_twice", "arguments": {}}, "ask_twice")).get_json()
    answer = {"first": {"action": "accept", "content": {"name": value}}}
    params = {"name": "ask_twice", "arguments": {}, "inputResponses": answer}
    return modern("tools/call", {**params, "requestState": first["result"]["requestState"]}, "ask_twice")


def _round_three(peer: HandshakeClient, body: dict[str, Any]) -> Any:
    """The first answer as the completed call returns it, sealed in round 2's requestState."""
    answer = {"second": {"action": "accept", "content": {"name": "!"}}}
    params = {"name": "ask_twice", "arguments": {}, "inputResponses": answer}
    third = modern("tools/call", {**params, "requestState": body["result"]["requestState"]}, "ask_twice")
    return _text(peer, send(peer, third).get_json()).removesuffix("!")


def _listing(method: str) -> Case:
    return Case(lambda p, r, v: handshake(method, {"cursor": v}), ANY, "cursor")


HANDSHAKE_CASES: dict[str, Case] = {
    # Looked up, kept in Redis (task records, subscriptions, waiting calls) by these strings.
    "tools/call name": Case(lambda p, r, v: handshake("tools/call", {"name": v}), NAMES, "params.name"),
    "prompts/get name": Case(lambda p, r, v: handshake("prompts/get", {"name": v}), NAMES, "params.name"),
    "resources/read uri": Case(lambda p, r, v: handshake("resources/read", {"uri": v}), NAMES, "params.uri"),
    "resources/subscribe uri": Case(lambda p, r, v: handshake("resources/subscribe", {"uri": v}), NAMES, "params.uri"),
    "resources/unsubscribe uri": Case(
        lambda p, r, v: handshake("resources/unsubscribe", {"uri": v}), NAMES, "params.uri"
    ),
    "completion/complete ref.name": Case(
        lambda p, r, v: handshake(
            "completion/complete", {"ref": {"type": "ref/prompt", "name": v}, "argument": {"name": "who", "value": ""}}
        ),
        NAMES,
        "params.ref.name",
    ),
    "completion/complete ref.uri": Case(
        lambda p, r, v: handshake(
            "completion/complete", {"ref": {"type": "ref/resource", "uri": v}, "argument": {"name": "n", "value": ""}}
        ),
        NAMES,
        "params.ref.uri",
    ),
    "tasks/get taskId": Case(lambda p, r, v: handshake("tasks/get", {"taskId": v}), NAMES, "params.taskId"),
    "tasks/result taskId": Case(lambda p, r, v: handshake("tasks/result", {"taskId": v}), NAMES, "params.taskId"),
    "tasks/cancel taskId": Case(lambda p, r, v: handshake("tasks/cancel", {"taskId": v}), NAMES, "params.taskId"),
    "elicitation answer id": Case(
        lambda p, r, v: Sent({"jsonrpc": "2.0", "id": v, "result": {"action": "cancel"}}), NAMES, '"id"'
    ),
    "tools/list cursor": _listing("tools/list"),
    "tasks/list cursor": _listing("tasks/list"),
    # Only carried, or ignored.
    "initialize clientInfo.name": Case(
        lambda p, r, v: Sent(
            handshake("initialize", {"protocolVersion": HANDSHAKE, "clientInfo": {"name": v}}).message,
            {"MCP-Protocol-Version": HANDSHAKE},
        ),
        CARRIED,
    ),
    "notifications/cancelled requestId": Case(
        lambda p, r, v: Sent({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": v}}),
        IGNORED,
    ),
    "request id": Case(
        lambda p, r, v: handshake("tools/call", {"name": "echo", "arguments": {"text": "x"}}, id_=v),
        CARRIED,
        echo=lambda peer, body: body["id"],
    ),
    "tools/call argument": Case(
        lambda p, r, v: handshake("tools/call", {"name": "echo", "arguments": {"text": v}}), CARRIED, echo=_text
    ),
    "completion/complete argument.value": Case(
        lambda p, r, v: handshake(
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": v}},
        ),
        CARRIED,
        echo=lambda peer, body: body["result"]["completion"]["values"][0],
    ),
}

MODERN_CASES: dict[str, Case] = {
    "tools/call name": Case(
        lambda p, r, v: modern("tools/call", {"name": v, "arguments": {}}, v, r), NAMES, "params.name"
    ),
    "prompts/get name": Case(lambda p, r, v: modern("prompts/get", {"name": v}, v, r), NAMES, "params.name"),
    "resources/read uri": Case(lambda p, r, v: modern("resources/read", {"uri": v}, v, r), NAMES, "params.uri"),
    "completion/complete ref.name": Case(
        lambda p, r, v: modern(
            "completion/complete", {"ref": {"type": "ref/prompt", "name": v}, "argument": {"name": "who", "value": ""}}
        ),
        NAMES,
        "params.ref.name",
    ),
    "tasks/get taskId": Case(lambda p, r, v: modern("tasks/get", {"taskId": v}, v, r), NAMES, "params.taskId"),
    "tasks/cancel taskId": Case(lambda p, r, v: modern("tasks/cancel", {"taskId": v}, v, r), NAMES, "params.taskId"),
    "tasks/update taskId": Case(
        lambda p, r, v: modern("tasks/update", {"taskId": v, "inputResponses": {}}, v, r), NAMES, "params.taskId"
    ),
    "Mcp-Param-Region argument": Case(
        lambda p, r, v: _mirrored(modern("tools/call", {"name": "regional", "arguments": {"region": v}}, "regional")),
        SURROGATES,
        "argument 'region'",
        echo=_text,
    ),
    "requestState": Case(
        lambda p, r, v: modern("tools/call", {"name": "ask_twice", "arguments": {}, "requestState": v}, "ask_twice"),
        ANY,
        "requestState",
    ),
    "tools/list cursor": Case(lambda p, r, v: modern("tools/list", {"cursor": v}), ANY, "cursor"),
    # Only carried.
    "clientInfo.name": Case(lambda p, r, v: _named_client(modern("server/discover", {}), v), CARRIED),
    "tools/call argument": Case(
        lambda p, r, v: modern("tools/call", {"name": "echo", "arguments": {"text": v}}, "echo"), CARRIED, echo=_text
    ),
    "elicitation answer, sealed into requestState": Case(_round_two, CARRIED, echo=_round_three),
}


def _mirrored(sent: Sent) -> Sent:
    """``Mcp-Param-Region`` as a client sends it, where the argument has a header form."""
    region = sent.message["params"]["arguments"]["region"]
    if not has_surrogate(region):
        sent.headers["Mcp-Param-Region"] = encode_value(region)
    return sent


def _named_client(sent: Sent, name: str) -> Sent:
    sent.message["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"] = name
    return sent


@pytest.fixture(params=["memory", "redis"])
def app(request):
    # The Redis backend gets the run's redis-server, without the keys of earlier tests.
    extra = {"redis_url": request.getfixturevalue("redis_server").url} if request.param == "redis" else {}
    return make_app(**extra)


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_no_value_gets_a_5xx_and_each_is_refused_naming_its_field_or_carried(app, era):
    """Every case gets the named values, then random ones, escaped and as raw bytes."""
    rng = random.Random(f"{SEED}-{era}")
    peer = session(app)
    problems = []
    sent_count = 0
    for label, case in (HANDSHAKE_CASES if era == "handshake" else MODERN_CASES).items():
        for value in NAMED + [random_text(rng) for _ in range(RANDOM_PER_CASE)]:
            for raw in (False, True):
                try:
                    response = send(peer, case.build(peer, rng, value), raw=raw)
                    problem = _judge(peer, case, value, raw, response)
                except Exception as exc:  # the report names every failing value, not only the first
                    problem = f"raised {exc!r}"
                sent_count += 1
                if problem:
                    problems.append(f"{label} {value!r}{' (raw bytes)' if raw else ''}: {problem}")
    assert not problems, f"{len(problems)} of {sent_count} requests:\n" + "\n".join(problems)


def _judge(peer: HandshakeClient, case: Case, sent: str, raw: bool, response: Any) -> str | None:
    """What is wrong with ``response`` to ``sent`` in the field of ``case``, or None."""
    status, text = response.status_code, response.get_data(as_text=True)[:400]
    if status >= 500:
        return f"{status} {text}"
    body = response.get_json(silent=True)
    error = body.get("error") if isinstance(body, dict) else None
    if raw and has_surrogate(sent):
        # Surrogates written as bytes are never UTF-8, paired or not.
        if status == 400 and error and error["code"] == -32700 and "not UTF-8" in error["message"]:
            return None
        return f"raw surrogate bytes: expected 400 -32700 'not UTF-8', got {status} {text}"
    value = as_read(sent)
    if case.refused == IGNORED:
        return None if status == 202 else f"expected 202, got {status} {text}"
    if case.refuses(value):
        if not (400 <= status < 500 or error):
            return f"not refused: {status} {text}"
        if error is None or case.label not in error["message"]:
            return f"the error does not name {case.label}: {status} {text}"
        return None
    if case.refused != CARRIED and case.echo is None:
        return None  # a fit value: found or not, like any other
    if error is not None or status != 200:
        return f"an error for text that is only carried: {status} {text}"
    if case.echo is not None and case.echo(peer, body) != value:
        return f"carried back as {case.echo(peer, body)!r}"
    return None
