"""``async def`` handlers in-process, in both eras: tools, resources, templates, prompts and
completion providers run to completion in a loop of their own per call; the awaitable context
methods (``aelicit``, ``aelicit_url``, ``asample``, ``alist_roots``, ``aask_all``) ask the
client without blocking that loop; cancellation, the end of a 2026-07-28 round and the
plain context methods work inside them; what cannot work is refused at registration."""

import asyncio
import functools
import logging
import threading
import time

import pytest

import zemcp
from tests.support.clients import LATEST_VERSION, inprocess_modern, inprocess_session
from zemcp import Settings
from zemcp.core.questions import Elicit

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
COLOUR = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
ELICIT = {"elicitation": {}}
#: (tool, event loop id, thread id, loop ticks while it waited) of every finished ask_name call.
RUNS: list[tuple[str, int, int, int]] = []
SEEN: list[str] = []


async def ticking_ask(ctx, tool):
    """Ask for a name while another task of the same loop counts its ticks: the wait must not block the loop."""
    ticks = 0

    async def tick():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    ticker = asyncio.create_task(tick())
    answer = await ctx.aelicit("Name?", NAME, key="name")
    ticker.cancel()
    RUNS.append((tool, id(asyncio.get_running_loop()), threading.get_ident(), ticks))
    return answer["name"]


class Greeter:
    """A tool that is a bound async method."""

    async def greet(self, ctx: zemcp.Context) -> str:
        return "method says " + await ticking_ask(ctx, "greeter")


class Motto:
    """A resource that is an object whose ``__call__`` is async def."""

    async def __call__(self) -> str:
        return "carpe diem"


async def shout(word, times=1):
    return " ".join([word.upper()] * times)


async def complete_from(words, argument, value, context):
    return [w for w in words if w.startswith(value)]


@pytest.fixture
def server():
    RUNS.clear()
    SEEN.clear()
    server = zemcp.Server(
        "async-demo",
        "1",
        settings=Settings(threads=8, keepalive_interval=0.05, elicitation_timeout=5, max_pending_per_session=2),
    )

    @server.tool
    async def add(a: int, b: int = 2) -> int:
        """Add two numbers.

        Args:
            a: the first
        """
        await asyncio.sleep(0)
        return a + b

    @server.tool
    def add_sync(a: int, b: int = 2) -> int:
        """Add two numbers.

        Args:
            a: the first
        """
        return a + b

    @server.tool
    async def ask_name(ctx: zemcp.Context) -> str:
        """Greet someone by the name the user gives."""
        return "Hello, " + await ticking_ask(ctx, "ask_name")

    @server.tool
    async def ask_blocking(ctx: zemcp.Context) -> str:
        """The plain ctx.elicit inside an async def: it holds the loop, and works."""
        return "Hi, " + ctx.elicit("Name?", NAME, key="name")["name"]

    @server.tool
    async def ask_both(ctx: zemcp.Context) -> str:
        """Two questions at once."""
        name, colour = await ctx.aask_all(Elicit("Name?", NAME, "name"), Elicit("Colour?", COLOUR, "colour"))
        return f"{name['name']} likes {colour['colour']}"

    @server.tool
    async def ask_twice(ctx: zemcp.Context) -> str:
        """Two questions awaited together with asyncio.gather."""
        name, colour = await asyncio.gather(ctx.aelicit("Name?", NAME, key="name"), ctx.aelicit("Colour?", COLOUR))
        return f"{name['name']} likes {colour['colour']}"

    @server.tool
    async def model_and_roots(ctx: zemcp.Context) -> str:
        """Sampling and roots awaited together."""
        sampled, roots = await asyncio.gather(ctx.asample("Say hi", 20), ctx.alist_roots())
        return f"{sampled['content']['text']} from {roots[0]['uri']}"

    @server.tool
    async def login(ctx: zemcp.Context) -> str:
        """A URL-mode elicitation."""
        eid = await ctx.aelicit_url("Sign in", "https://auth.example.com/start", "login-1")
        ctx.elicitation_complete(eid)
        return f"consented {eid}"

    @server.tool
    async def wait_cancelled(ctx: zemcp.Context) -> str:
        """Waits for an answer that the client cancels."""
        try:
            await ctx.aelicit("Name?", NAME)
        except asyncio.CancelledError:
            SEEN.append("cancelled")
            raise
        return "answered"

    @server.tool
    async def ask_briefly(ctx: zemcp.Context) -> str:
        """Gives up on the answer after a moment, with asyncio.wait_for."""
        try:
            return (await asyncio.wait_for(ctx.aelicit("Name?", NAME), 0.2))["name"]
        except TimeoutError:
            return "gave up"

    @server.tool
    async def sleeps(ctx: zemcp.Context) -> str:
        """Starts its stream, then sleeps; a cancellation must interrupt the sleep."""
        ctx.report_progress(1)
        try:
            await asyncio.sleep(4)
        except asyncio.CancelledError:
            SEEN.append("cancelled")
            raise
        SEEN.append("woke")
        return "slept"

    @server.tool
    async def ask_in_task_group(ctx: zemcp.Context) -> str:
        """Asks from a task of an asyncio.TaskGroup."""
        async with asyncio.TaskGroup() as group:
            task = group.create_task(ctx.aelicit("Name?", NAME, key="name"))
        return "Hi, " + task.result()["name"]

    @server.tool
    async def ask_beside_a_failure(ctx: zemcp.Context) -> str:
        """Asks from a task of an asyncio.TaskGroup whose other task fails."""

        async def fails():
            raise ValueError("broken sibling")

        async with asyncio.TaskGroup() as group:
            group.create_task(ctx.aelicit("Name?", NAME, key="name"))
            group.create_task(fails())
        return "never"

    @server.tool
    async def forgets_await() -> str:
        """Returns a coroutine instead of awaiting it."""
        return shout("oops")

    @server.tool
    async def awaits_log(ctx: zemcp.Context) -> str:
        """Awaits a plain context method."""
        await ctx.report_progress(1)
        return "never"

    @server.tool
    async def asks_three(ctx: zemcp.Context) -> str:
        """Asks three questions at once."""
        await ctx.aask_all(*(Elicit(f"Q{i}?", NAME, f"q{i}") for i in range(3)))
        return "never"

    @server.tool
    async def logs(ctx: zemcp.Context) -> str:
        """The plain notification methods from an async def."""
        ctx.log("info", "started")
        ctx.report_progress(1, 1)
        return "logged"

    @server.tool
    def returns_coroutine() -> str:
        """A plain def that returns a coroutine by mistake."""
        return shout("oops")

    @server.tool
    async def cancels_itself() -> str:
        """Its own task is cancelled."""
        asyncio.current_task().cancel()
        await asyncio.sleep(0)
        return "never"

    @server.tool
    async def exits() -> str:
        """Raises SystemExit, as argparse does."""
        raise SystemExit(2)

    server.tool("greeter")(Greeter().greet)
    server.resource("notes://motto", name="motto")(Motto())
    server.prompt("shout_twice")(functools.partial(shout, times=2))
    server.completion(prompt="shout_twice")(functools.partial(complete_from, ["hey", "hi", "ho"]))

    @server.resource("notes://index")
    async def index() -> str:
        await asyncio.sleep(0)
        return "a\nb"

    @server.resource("notes://note/{name}")
    async def note(name: str) -> str:
        return f"note {name}"

    @server.resource("secret://{name}")
    async def secret(name: str, ctx: zemcp.Context) -> str:
        answer = await ctx.aelicit(f"Show {name}?", {"type": "object", "properties": {"show": {"type": "boolean"}}})
        return f"secret {name}" if answer.get("show") else "(hidden)"

    @server.prompt
    async def brief(topic: str) -> str:
        """A briefing."""
        return f"Brief me on {topic}."

    @server.prompt
    async def brief_for(ctx: zemcp.Context, topic: str) -> str:
        """A briefing for the audience the user names."""
        answer = await ctx.aelicit("Audience?", NAME, key="audience")
        return f"Brief {answer['name']} on {topic}."

    @server.completion(prompt="brief")
    async def complete_topic(argument: str, value: str, context: dict) -> list[str]:
        await asyncio.sleep(0)
        return [t for t in ("tax", "travel", "food") if t.startswith(value)]

    return server


@pytest.fixture
def app(server):
    return zemcp.McpApp(server)


def session(app, capabilities):
    """An initialized 2025-11-25 session (notifications/initialized sent, so asks go out at once)."""
    return inprocess_session(app, protocol_version=LATEST_VERSION, capabilities=capabilities)


def rpc(peer, method, params):
    return peer.request(method, params).get_json()


# -- plain calls ------------------------------------------------------------------------------


def test_async_tool_schema_is_the_sync_twins(app):
    """The inputSchema and description of an async def come from its signature as for a plain def."""
    tools = {t["name"]: t for t in session(app, {}).list_tools()}
    assert tools["add"]["inputSchema"] == tools["add_sync"]["inputSchema"]
    assert tools["add"]["inputSchema"]["properties"]["a"] == {"type": "integer", "description": "the first"}
    assert tools["add"]["description"] == "Add two numbers."
    assert tools["greeter"]["inputSchema"] == {"type": "object", "additionalProperties": False}


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_async_tool_resource_template_prompt_and_completion(app, era):
    """Each kind of handler answers as its plain twin would, in both eras."""
    if era == "handshake":
        peer = session(app, {})

        def ask(method, params):
            return rpc(peer, method, params)["result"]
    else:
        modern = inprocess_modern(app)

        def ask(method, params):
            return modern.result(modern.request(method, params))

    assert ask("tools/call", {"name": "add", "arguments": {"a": 40}})["content"][0]["text"] == "42"
    assert ask("resources/read", {"uri": "notes://index"})["contents"][0]["text"] == "a\nb"
    assert ask("resources/read", {"uri": "notes://motto"})["contents"][0]["text"] == "carpe diem"
    assert ask("resources/read", {"uri": "notes://note/x"})["contents"][0]["text"] == "note x"
    messages_ = ask("prompts/get", {"name": "brief", "arguments": {"topic": "tax"}})["messages"]
    assert messages_ == [{"role": "user", "content": {"type": "text", "text": "Brief me on tax."}}]
    completion = ask(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "brief"}, "argument": {"name": "topic", "value": "t"}},
    )["completion"]
    assert completion["values"] == ["tax", "travel"]
    shouted = ask("prompts/get", {"name": "shout_twice", "arguments": {"word": "hey"}})["messages"]
    assert shouted[0]["content"]["text"] == "HEY HEY"
    completion = ask(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "shout_twice"}, "argument": {"name": "word", "value": "h"}},
    )["completion"]
    assert completion["values"] == ["hey", "hi", "ho"]


def test_plain_context_methods_work_in_an_async_handler(app):
    """ctx.log and ctx.report_progress from an async def ride the call's stream."""
    peer = session(app, {})
    rid, r, stream = peer.open_call("logs", {}, meta={"progressToken": "p"})
    got = stream.rest()
    assert [m["method"] for m in got[:-1]] == ["notifications/message", "notifications/progress"]
    assert got[-1]["id"] == rid and got[-1]["result"]["content"][0]["text"] == "logged"


def test_a_plain_def_returning_a_coroutine_is_told_what_to_do(app, recwarn):
    """The isError result names the tool and says to declare it async def; no 'never awaited' warning."""
    result = rpc(session(app, {}), "tools/call", {"name": "returns_coroutine", "arguments": {}})["result"]
    assert result["isError"]
    text = result["content"][0]["text"]
    assert "tool 'returns_coroutine' returned an awaitable (coroutine) from a plain def" in text
    assert "declare the handler async def" in text
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


def test_a_cancelled_coroutine_and_system_exit_are_tool_errors(app):
    """A coroutine cancelled inside its loop, and SystemExit, end in isError results, not in the worker."""
    peer = session(app, {})
    cancelled = rpc(peer, "tools/call", {"name": "cancels_itself", "arguments": {}})["result"]
    assert cancelled["isError"] and "was cancelled before it returned" in cancelled["content"][0]["text"]
    exited = rpc(peer, "tools/call", {"name": "exits", "arguments": {}})["result"]
    assert exited["isError"] and exited["content"][0]["text"] == "2"


# -- asking the client, handshake era ------------------------------------------------------------


def start_ask(peer, tool, meta=None):
    rid, r, stream = peer.open_call(tool, {}, meta=meta)
    question = stream.next_message()
    return rid, stream, question


@pytest.mark.parametrize(
    "answer, text, is_error",
    [
        ({"action": "accept", "content": {"name": "Ada"}}, "Hello, Ada", False),
        ({"action": "decline"}, "the user declined to provide the requested information", True),
        ({"action": "cancel"}, "the user cancelled the request", True),
    ],
    ids=["accept", "decline", "cancel"],
)
def test_aelicit_in_a_session(app, answer, text, is_error):
    """The question goes out on the stream; the loop keeps running while it waits; each outcome is the sync one's."""
    peer = session(app, ELICIT)
    rid, stream, question = start_ask(peer, "ask_name")
    assert question["method"] == "elicitation/create" and question["params"]["requestedSchema"] == NAME
    time.sleep(0.1)
    assert peer.answer(question["id"], answer).status_code == 202
    final = stream.rest()[-1]
    assert final["id"] == rid and final["result"]["isError"] is is_error
    assert text in final["result"]["content"][0]["text"]
    if not is_error:
        assert RUNS[0][3] > 0, "the handler's loop did not run while it waited"


@pytest.mark.parametrize("tool, greeting", [("ask_blocking", "Hi, Ada"), ("greeter", "method says Ada")])
def test_sync_elicit_and_async_methods_in_a_session(app, tool, greeting):
    """The plain ctx.elicit works inside an async def; a bound async method is run as one."""
    peer = session(app, ELICIT)
    rid, stream, question = start_ask(peer, tool)
    peer.answer(question["id"], {"action": "accept", "content": {"name": "Ada"}})
    assert stream.rest()[-1]["result"]["content"][0]["text"] == greeting


def test_gathered_asks_wait_together_in_a_session(app):
    """asample and alist_roots under asyncio.gather: both questions are out before either is answered."""
    peer = session(app, {"sampling": {}, "roots": {}})
    rid, r, stream = peer.open_call("model_and_roots", {})
    first = stream.next_message()
    second = stream.next_message()
    by_method = {m["method"]: m for m in (first, second)}
    assert set(by_method) == {"sampling/createMessage", "roots/list"}
    peer.answer(by_method["roots/list"]["id"], {"roots": [{"uri": "file:///srv"}]})
    peer.answer(
        by_method["sampling/createMessage"]["id"],
        {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"},
    )
    assert stream.rest()[-1]["result"]["content"][0]["text"] == "hi from file:///srv"


def test_a_failed_gather_does_not_hold_the_call_for_its_sibling(app, server):
    """Declining one of two gathered asks ends the call at once; the unanswered one is withdrawn, its slot freed."""
    peer = session(app, ELICIT)
    rid, r, stream = peer.open_call("ask_twice", {})
    questions = [stream.next_message() for _ in range(2)]
    assert server.pending.count() == 2
    started = time.monotonic()
    name = next(q for q in questions if q["params"]["message"] == "Name?")
    peer.answer(name["id"], {"action": "decline"})
    rest = stream.rest()
    final = rest[-1]
    assert time.monotonic() - started < 2, "the call waited for the sibling's answer"
    colour = next(q for q in questions if q["params"]["message"] == "Colour?")
    withdrawn = [m for m in rest if m.get("method") == "notifications/cancelled"]
    assert [m["params"] for m in withdrawn] == [
        {"requestId": colour["id"], "reason": "the handler stopped waiting for the answer"}
    ]
    assert final["id"] == rid and final["result"]["isError"]
    assert "declined" in final["result"]["content"][0]["text"]
    deadline = time.monotonic() + 2
    while server.pending.count() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.pending.count() == 0


def test_aelicit_url_in_a_session(app):
    """aelicit_url sends the URL-mode request and returns its id once the user consented."""
    peer = session(app, {"elicitation": {"url": {}}})
    rid, stream, question = start_ask(peer, "login")
    assert question["params"]["mode"] == "url" and question["params"]["elicitationId"] == "login-1"
    peer.answer(question["id"], {"action": "accept"})
    rest = stream.rest()
    assert rest[0]["method"] == "notifications/elicitation/complete"
    assert rest[-1]["result"]["content"][0]["text"] == "consented login-1"


def test_cancellation_reaches_an_awaiting_async_handler(app, server):
    """notifications/cancelled cancels the handler's task at its awaiting aelicit (CancelledError);
    the question is withdrawn with notifications/cancelled; no response is sent."""
    peer = session(app, ELICIT)
    rid, stream, question = start_ask(peer, "wait_cancelled")
    peer.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
    rest = stream.rest()
    assert all(m.get("id") != rid for m in rest)
    assert rest[0]["method"] == "notifications/cancelled" and rest[0]["params"]["requestId"] == question["id"]
    assert SEEN == ["cancelled"] and server.pending.count() == 0


def test_two_awaiting_calls_have_loops_of_their_own_and_do_not_wait_for_each_other(app, server):
    """Two concurrent async elicitations: the second answered completes while the first still waits;
    each ran in its own loop on its own thread."""
    peer = session(app, ELICIT)
    rid1, stream1, q1 = start_ask(peer, "ask_name")
    rid2, stream2, q2 = start_ask(peer, "ask_name")
    assert server.pending.count() == 2
    time.sleep(0.1)
    peer.answer(q2["id"], {"action": "accept", "content": {"name": "Bo"}})
    assert stream2.rest()[-1]["result"]["content"][0]["text"] == "Hello, Bo"
    assert server.pending.count() == 1
    time.sleep(0.1)
    peer.answer(q1["id"], {"action": "accept", "content": {"name": "Ada"}})
    assert stream1.rest()[-1]["result"]["content"][0]["text"] == "Hello, Ada"
    (_, loop2, thread2, ticks2), (_, loop1, thread1, ticks1) = RUNS
    assert loop1 != loop2 and thread1 != thread2
    assert ticks1 > ticks2 > 0


# -- asking the client, 2026-07-28 ----------------------------------------------------------------


@pytest.mark.parametrize(
    "answer, text, is_error",
    [
        ({"action": "accept", "content": {"name": "Ada"}}, "Hello, Ada", False),
        ({"action": "decline"}, "the user declined to provide the requested information", True),
        ({"action": "cancel"}, "the user cancelled the request", True),
    ],
    ids=["accept", "decline", "cancel"],
)
def test_aelicit_by_multi_round_trip(app, answer, text, is_error):
    """The first round ends input_required from inside the coroutine; the replay gets the recorded answer."""
    client = inprocess_modern(app)
    first = client.result(client.call_tool("ask_name")[1])
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["name"]
    assert RUNS == []
    done = client.result(client.answer("ask_name", first, {"name": answer})[1])
    assert done["resultType"] == "complete" and done["isError"] is is_error
    assert text in done["content"][0]["text"]


def test_aask_all_is_one_round_and_gather_one_round_a_question(app):
    """aask_all asks both questions in one round; asyncio.gather of two aelicit asks them one round each."""
    client = inprocess_modern(app)
    answers = {
        "name": {"action": "accept", "content": {"name": "Ada"}},
        "colour": {"action": "accept", "content": {"colour": "red"}},
        "elicitation-2": {"action": "accept", "content": {"colour": "red"}},
    }
    first = client.result(client.call_tool("ask_both")[1])
    assert sorted(first["inputRequests"]) == ["colour", "name"]
    done = client.result(client.answer("ask_both", first, {k: answers[k] for k in ("name", "colour")})[1])
    assert done["content"][0]["text"] == "Ada likes red"

    first = client.result(client.call_tool("ask_twice")[1])
    assert list(first["inputRequests"]) == ["name"]
    second = client.result(client.answer("ask_twice", first, {"name": answers["name"]})[1])
    assert list(second["inputRequests"]) == ["elicitation-2"]
    done = client.result(client.answer("ask_twice", second, {"elicitation-2": answers["elicitation-2"]})[1])
    assert done["content"][0]["text"] == "Ada likes red"


def test_async_prompt_and_template_ask_by_multi_round_trip(app):
    """prompts/get and resources/read of async functions that take ctx end their round and complete on replay."""
    client = inprocess_modern(app)
    params = {"name": "brief_for", "arguments": {"topic": "tax"}}
    first = client.result(client.request("prompts/get", params))
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["audience"]
    answer = {"audience": {"action": "accept", "content": {"name": "managers"}}}
    done = client.result(
        client.request("prompts/get", {**params, "requestState": first["requestState"], "inputResponses": answer})
    )
    assert done["messages"][0]["content"]["text"] == "Brief managers on tax."

    first = client.result(client.request("resources/read", {"uri": "secret://q3"}))
    (key,) = first["inputRequests"]
    answer = {key: {"action": "accept", "content": {"show": True}}}
    done = client.result(
        client.request(
            "resources/read", {"uri": "secret://q3", "requestState": first["requestState"], "inputResponses": answer}
        )
    )
    assert done["contents"][0]["text"] == "secret q3"


# -- registration ----------------------------------------------------------------------------------


async def stream_words(name="x"):
    yield name


class StreamingObject:
    async def __call__(self, name="x"):
        yield name


@pytest.mark.parametrize(
    "register",
    [
        lambda s, f: s.tool("streams")(f),
        lambda s, f: s.resource("gen://x", name="gen")(f),
        lambda s, f: s.resource("gen://{name}", name="gen")(f),
        lambda s, f: s.prompt("streams")(f),
        lambda s, f: s.completion(prompt="p")(f),
    ],
    ids=["tool", "resource", "template", "prompt", "completion"],
)
@pytest.mark.parametrize("handler", [stream_words, StreamingObject()], ids=["function", "object"])
def test_async_generators_are_refused_at_registration(register, handler):
    """An async generator has no single result: registering one raises TypeError saying what to write instead."""
    server = zemcp.Server("gen", "1", settings=Settings(threads=4))
    with pytest.raises(TypeError, match=r"async generator \(async def with yield\).*return the whole value"):
        register(server, handler)


def test_an_ask_abandoned_by_wait_for_is_withdrawn_at_once(app, server):
    """asyncio.wait_for gives up on aelicit: the client gets notifications/cancelled for the
    question before the result, and its slot is free."""
    peer = session(app, ELICIT)
    rid, stream, question = start_ask(peer, "ask_briefly")
    rest = stream.rest()
    assert rest[0] == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": question["id"], "reason": "the handler stopped waiting for the answer"},
    }
    assert rest[-1]["id"] == rid and rest[-1]["result"]["content"][0]["text"] == "gave up"
    assert server.pending.count() == 0
    assert peer.answer(question["id"], {"action": "accept", "content": {"name": "late"}}).status_code == 400


def test_notifications_cancelled_cancels_an_async_handlers_task(app):
    """The client cancels a handler in await asyncio.sleep: it gets CancelledError there at
    once, does not go on, and no response follows."""
    peer = session(app, ELICIT)
    rid, r, stream = peer.open_call("sleeps", {}, meta={"progressToken": "p"})
    assert stream.next_message()["method"] == "notifications/progress"
    started = time.monotonic()
    peer.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
    assert all(m.get("id") != rid for m in stream.rest())
    assert time.monotonic() - started < 2, "the handler slept on"
    assert SEEN == ["cancelled"]


def test_closing_a_rounds_stream_cancels_an_async_handlers_task(app):
    """2026-07-28: the client closing the round's stream is its cancellation; the handler's
    task is cancelled at its await."""
    _, _, stream = inprocess_modern(app).open_call("sleeps", meta={"progressToken": "p"})
    assert stream.next_message()["method"] == "notifications/progress"
    started = time.monotonic()
    stream.close()
    deadline = time.monotonic() + 3
    while not SEEN and time.monotonic() < deadline:
        time.sleep(0.01)
    assert SEEN == ["cancelled"] and time.monotonic() - started < 2


def test_aelicit_in_a_task_group_ends_the_round_quietly(app, caplog):
    """2026-07-28: the end of the round inside an asyncio.TaskGroup is no failure: input_required,
    then the replay completes; nothing logged as an error, the group's other exceptions at info."""
    caplog.set_level(logging.INFO, "zemcp")
    client = inprocess_modern(app)
    first = client.result(client.call_tool("ask_in_task_group")[1])
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["name"]
    answer = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    assert client.result(client.answer("ask_in_task_group", first, answer)[1])["content"][0]["text"] == "Hi, Ada"
    first = client.result(client.call_tool("ask_beside_a_failure")[1])
    assert first["resultType"] == "input_required"
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    assert "broken sibling" in caplog.text


def test_async_def_mistakes_are_told_what_to_do(app, recwarn):
    """An async def returning an un-awaited coroutine, and awaiting ctx.log, answer with what to write."""
    peer = session(app, {})
    result = rpc(peer, "tools/call", {"name": "forgets_await", "arguments": {}})["result"]
    assert result["isError"]
    assert result["content"][0]["text"] == "tool 'forgets_await' returned a coroutine from an async def: await it"
    result = rpc(peer, "tools/call", {"name": "awaits_log", "arguments": {}})["result"]
    assert (
        result["isError"]
        and "are plain calls, not awaitable: call them without await" in (result["content"][0]["text"])
    )
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


def test_asking_more_at_once_than_the_cap_says_so(app, server):
    """Three questions at once under a per-session cap of 2: the message counts the request, not the session."""
    result = rpc(session(app, ELICIT), "tools/call", {"name": "asks_three", "arguments": {}})["result"]
    assert result["isError"]
    assert result["content"][0]["text"] == (
        "too many pending elicitations: this request asks for 3 at once, and the per-session cap is 2; "
        "ask for at most 2 at once"
    )
    assert server.pending.count() == 0


async def scaled(factor: int, value: int, ctx: zemcp.Context) -> int:
    """Multiply a value.

    Args:
        value: what to multiply
    """
    return factor * value


def scaled_sync(factor: int, value: int) -> int:
    """Multiply a value, blocking.

    Args:
        value: what to multiply
    """
    return factor * value


class Scaler:
    """Scales values (the class's text)."""

    def __init__(self, factor):
        self.factor = factor

    async def __call__(self, value: int, ctx: zemcp.Context) -> int:
        """Multiply a value by the scaler's factor.

        Args:
            value: what to multiply
        """
        return self.factor * value


class SyncScaler:
    """Multiply a value by a fixed factor, blocking."""

    def __call__(self, value: int) -> int:
        return 3 * value


async def titled(topic: str) -> str:
    """A prompt about a topic, from a partial."""
    return f"About {topic}."


@pytest.mark.parametrize(
    "handler, description",
    [
        (functools.partial(scaled, 3), "Multiply a value."),
        (functools.partial(scaled_sync, 3), "Multiply a value, blocking."),
        (Scaler(3), "Multiply a value by the scaler's factor."),
        (SyncScaler(), "Multiply a value by a fixed factor, blocking."),
    ],
    ids=["async-partial", "partial", "async-object", "object"],
)
def test_partials_and_callable_objects_are_tools(handler, description):
    """A partial or callable object, sync or async, is a tool with the schema of what runs:
    bound arguments, self and ctx left out, hints and Args: of the underlying function."""
    server = zemcp.Server("callables", "1", settings=Settings(threads=4))
    server.tool(name="scale")(handler)
    server.prompt(name="titled")(functools.partial(titled))
    peer = session(zemcp.McpApp(server), {})
    (tool,) = peer.list_tools()
    assert tool["description"] == description
    properties = tool["inputSchema"]["properties"]
    assert list(properties) == ["value"] and properties["value"]["type"] == "integer"
    result = rpc(peer, "tools/call", {"name": "scale", "arguments": {"value": 14}})["result"]
    assert result["content"][0]["text"] == "42" and not result["isError"]
    (prompt,) = rpc(peer, "prompts/list", {})["result"]["prompts"]
    assert prompt["description"] == "A prompt about a topic, from a partial."


@pytest.mark.parametrize("handler", [functools.partial(scaled, 3), Scaler(3)], ids=["partial", "object"])
def test_a_tool_without_a_name_of_its_own_needs_name(handler):
    """A partial or callable object has no __name__: registering it without name= says to give one."""
    server = zemcp.Server("callables", "1", settings=Settings(threads=4))
    with pytest.raises(TypeError, match=r"has no __name__ .*@server\.tool\(name=\.\.\.\)"):
        server.tool(handler)


def test_resuming_the_stream_of_a_cancelled_call_is_told_to_stop(app):
    """After its request was cancelled, a GET with Last-Event-ID gets what followed that id, once;
    from the stream's last event on, 404 saying nothing follows, so the client stops resuming."""
    peer = session(app, ELICIT)
    rid, _, stream = peer.open_call("wait_cancelled", {})
    assert stream.next_message()["method"] == "elicitation/create"
    question_event = stream.last_event_id
    peer.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
    stream.rest()
    replay, replayed = peer.get_stream(question_event)
    assert replay.status_code == 200 and "notifications/cancelled" in [m.get("method") for m in replayed.rest()]
    last = stream.ids[-1]
    for _ in range(2):
        gone, _ = peer.get_stream(last)
        assert gone.status_code == 404
        assert "stream has ended and nothing follows that event" in gone.get_json()["error"]["message"]
