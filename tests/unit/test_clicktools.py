"""Click CLIs as MCP tools: input schemas from Click parameters (zemcp.cli.clickschema),
in-process invocation with captured output, also on several threads at once
(zemcp.cli.clickrun), tools and text commands built from a Click group (zemcp.cli.clicktools)."""

import enum
import inspect
import json
import logging
import sys
import threading
import uuid

import click
import pytest

import zemcp
from zemcp.cli.clickrun import invoke
from zemcp.cli.clickschema import command_schema
from zemcp.cli.clicktools import add_click_commands, add_click_tools
from zemcp.cli.commands import CommandError, CommandRegistry

#: [seconds] bound of every wait on another thread.
WAIT = 10.0


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@click.command()
@click.argument("src")
@click.argument("rest", nargs=-1, type=int)
@click.option("--name", required=True, help="Who it is for.")
@click.option("--level", type=click.IntRange(1, 5), default=3, help="How loud.")
@click.option("--ratio", type=click.FloatRange(0, 1, min_open=True), help="A share.")
@click.option("--clamped", type=click.IntRange(0, 9, clamp=True))
@click.option("--mode", type=click.Choice(["fast", "slow"]), default="fast")
@click.option("--color", type=click.Choice(Color), default=Color.BLUE)
@click.option("--tag", multiple=True, help="Repeatable.")
@click.option("--point", nargs=2, type=float)
@click.option("--pair", type=(int, str))
@click.option("--verbose", "-v", count=True)
@click.option("--force", is_flag=True, help="Do it anyway.")
@click.option("--cache/--no-cache", default=True)
@click.option("--upper", "case", flag_value="upper", help="Capitals.")
@click.option("--lower", "case", flag_value="lower", default=True)
@click.option("--strict", type=bool)
@click.option("--id", "ident", type=click.UUID)
@click.option("--secret", hidden=True)
def kitchen(**kwargs):
    """Exercise every kind of parameter.

    More text.
    \f
    Not shown.
    """
    plain = {
        k: v.name if isinstance(v, Color) else str(v) if isinstance(v, uuid.UUID) else v for k, v in kwargs.items()
    }
    click.echo(json.dumps(plain))


def test_schema_of_every_kind_of_parameter():
    """Types, ranges, enums, arrays, flags, switches, defaults, required and help map as documented."""
    schema = command_schema(kitchen)
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == ["src", "name"]
    props = schema["properties"]
    assert props["src"] == {"type": "string"}
    assert props["rest"] == {"type": "array", "items": {"type": "integer"}}
    assert props["name"] == {"type": "string", "description": "Who it is for."}
    assert props["level"] == {"type": "integer", "minimum": 1, "maximum": 5, "default": 3, "description": "How loud."}
    assert props["ratio"] == {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "description": "A share."}
    assert props["clamped"] == {"type": "integer"}
    assert props["mode"] == {"type": "string", "enum": ["fast", "slow"], "default": "fast"}
    assert props["color"] == {"type": "string", "enum": ["RED", "BLUE"], "default": "BLUE"}
    assert props["tag"] == {"type": "array", "items": {"type": "string"}, "description": "Repeatable."}
    assert props["point"] == {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
    assert props["pair"] == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "minItems": 2,
        "maxItems": 2,
    }
    assert props["verbose"] == {"type": "integer", "minimum": 0, "default": 0}
    assert props["force"] == {"type": "boolean", "default": False, "description": "Do it anyway."}
    assert props["cache"] == {"type": "boolean", "default": True}
    assert props["case"] == {
        "type": "string",
        "enum": ["upper", "lower"],
        "default": "lower",
        "description": "--upper: Capitals.",
    }
    assert props["strict"] == {"type": "boolean"}
    assert props["ident"] == {"type": "string", "format": "uuid"}
    assert "secret" not in props and "help" not in props


def test_required_variadic_argument_needs_one_item_and_prompting_option_without_default_is_required():
    """nargs=-1 with required=True gets minItems 1; a prompting option is required unless it has a default."""

    @click.command()
    @click.argument("files", nargs=-1, required=True)
    @click.option("--password", prompt=True, hide_input=True)
    @click.option("--city", prompt=True, default="Oslo")
    def login(files, password, city):
        click.echo(f"{len(files)} {password} {city}")

    schema = command_schema(login)
    assert schema["properties"]["files"]["minItems"] == 1
    assert schema["required"] == ["files", "password"]
    assert schema["properties"]["city"]["default"] == "Oslo"
    server = zemcp.Server("t")
    add_click_tools(server, login)
    # The prompting option's default is passed explicitly: its prompt would meet end of input.
    assert _run(server, "login", {"files": ["a"], "password": "pw"}) == (False, "1 pw Oslo\n")


def _run(server: zemcp.Server, name: str, arguments: dict) -> tuple[bool, str]:
    """Call a tool's handler as the server does after validation: ``(isError, text)``."""
    tool = server.tools.get(name)
    assert tool.check_arguments(arguments) is None, tool.check_arguments(arguments)
    result = tool.run(arguments, None)
    return result["isError"], result["content"][0]["text"]


def test_arguments_become_the_command_line_click_parses():
    """Every kind of value reaches the callback as Click converts it, dashes and spaces included."""
    server = zemcp.Server("t")
    add_click_tools(server, kitchen)
    error, text = _run(
        server,
        "kitchen",
        {
            "src": "-not-an-option",
            "rest": [1, -2],
            "name": "Ada Lovelace",
            "level": 5,
            "ratio": 0.5,
            "clamped": 42,
            "mode": "slow",
            "color": "RED",
            "tag": ["a", "-b"],
            "point": [1.5, -2],
            "pair": [7, "x y"],
            "verbose": 2,
            "force": True,
            "cache": False,
            "case": "upper",
            "strict": False,
            "ident": "12345678-1234-5678-1234-567812345678",
        },
    )
    assert error is False, text
    assert json.loads(text) == {
        "src": "-not-an-option",
        "rest": [1, -2],
        "name": "Ada Lovelace",
        "level": 5,
        "ratio": 0.5,
        "clamped": 9,
        "mode": "slow",
        "color": "RED",
        "tag": ["a", "-b"],
        "point": [1.5, -2.0],
        "pair": [7, "x y"],
        "verbose": 2,
        "force": True,
        "cache": False,
        "case": "upper",
        "strict": False,
        "ident": "12345678-1234-5678-1234-567812345678",
        "secret": None,
    }
    _, text = _run(server, "kitchen", {"src": "s", "name": "n"})
    defaults = json.loads(text)
    assert (defaults["level"], defaults["color"], defaults["case"], defaults["cache"], defaults["force"]) == (
        3,
        "BLUE",
        "lower",
        True,
        False,
    )


@click.group()
@click.pass_context
def tasks(ctx):
    """Tasks."""
    ctx.obj = {"greeting": "Hello"}


@tasks.command()
@click.argument("name")
@click.option("--shout", is_flag=True)
@click.pass_obj
def greet(obj, name, shout):
    """Greet someone.

    \b
    Keeps its layout.
    """
    text = f"{obj['greeting']}, {name}!"
    click.echo(text.upper() if shout else text)


@tasks.group("db")
def db():
    """Database."""


@db.command("migrate")
@click.option("--to", "target", type=int, required=True)
def migrate(target):
    click.echo(f"out {target}")
    click.echo("err line", err=True)
    print("printed")
    click.echo(click.style("styled", fg="red"))
    click.echo(b"bytes\xc3\xa9")


@db.command("bad:name", hidden=False)
def bad_name():
    """A name with a colon."""
    click.echo("ok")


@tasks.command(hidden=True)
def secret():
    """Hidden."""


@tasks.command()
@click.option("--code", type=int, default=0)
@click.option("--message")
@click.pass_context
def leave(ctx, code, message):
    """Exit in the ways a command can."""
    click.echo("before")
    if message:
        sys.exit(message)
    if code < 0:
        raise SystemExit(-code)
    ctx.exit(code)


@tasks.command()
@click.option("--value", type=int)
def refuse(value):
    """Refuse things."""
    if value == 1:
        raise click.BadParameter("must not be one", param_hint="'--value'")
    if value == 2:
        raise click.UsageError("use it differently")
    if value == 3:
        raise click.ClickException("the database is locked")
    if value == 4:
        raise click.Abort()
    if value == 5:
        click.prompt("Your name")
    if value == 6:
        raise RuntimeError("a bug")
    click.echo("fine")


def test_group_commands_become_tools_named_by_path():
    """Nested groups join names with '_'; hidden commands are left out; a prefix comes first; bad characters become '_'."""
    server = zemcp.Server("t")
    names = add_click_tools(server, tasks)
    assert names == ["db_bad_name", "db_migrate", "greet", "leave", "refuse"]
    greet_tool = server.tools.get("greet").definition()
    assert greet_tool["description"] == "Greet someone.\n\nKeeps its layout."
    assert server.tools.get("db_migrate").definition()["description"] == "Run the command 'db migrate'."
    other = zemcp.Server("t")
    assert add_click_tools(other, tasks, prefix="ops")[:2] == ["ops_db_bad_name", "ops_db_migrate"]
    single = zemcp.Server("t")
    assert add_click_tools(single, greet) == ["greet"]
    assert add_click_tools(single, greet, prefix="hello") == ["hello"]


def test_tool_options_pass_through_and_clashes_are_refused():
    """annotations and the like reach server.tool; a taken name raises ValueError."""
    server = zemcp.Server("t")
    add_click_tools(server, tasks, annotations={"readOnlyHint": True})
    assert server.tools.get("greet").definition()["annotations"] == {"readOnlyHint": True}
    with pytest.raises(ValueError, match="already registered"):
        add_click_tools(server, tasks)


def test_group_callback_runs_and_output_is_captured():
    """The root group's callback sets ctx.obj; stdout, stderr, print and bytes are captured in order, colour stripped."""
    server = zemcp.Server("t")
    add_click_tools(server, tasks)
    assert _run(server, "greet", {"name": "Ada", "shout": True}) == (False, "HELLO, ADA!\n")
    assert _run(server, "db_migrate", {"target": 7}) == (False, "out 7\nerr line\nprinted\nstyled\nbytesé\n")


def test_failures_are_error_results_with_the_message_output_and_code():
    """Usage errors, bad parameters, ClickException, Abort, prompts, Exit and SystemExit are isError results."""
    server = zemcp.Server("t")
    add_click_tools(server, tasks)
    assert _run(server, "refuse", {}) == (False, "fine\n")
    assert _run(server, "refuse", {"value": 1}) == (
        True,
        "Error: Invalid value for '--value': must not be one (exit code 2)",
    )
    assert _run(server, "refuse", {"value": 2}) == (True, "Error: use it differently (exit code 2)")
    assert _run(server, "refuse", {"value": 3}) == (True, "Error: the database is locked (exit code 1)")
    assert _run(server, "refuse", {"value": 4}) == (True, "Error: Aborted! (exit code 1)")
    # A prompt in the command's body meets end of input (no terminal): Click aborts.
    assert _run(server, "refuse", {"value": 5}) == (True, "Error: Aborted! (exit code 1)\nYour name: ")
    assert _run(server, "leave", {"code": 3}) == (True, "Error: exit code 3\nbefore")
    assert _run(server, "leave", {"code": -4}) == (True, "Error: exit code 4\nbefore")
    assert _run(server, "leave", {"message": "gave up"}) == (True, "Error: gave up (exit code 1)\nbefore")
    assert _run(server, "leave", {"code": 0}) == (False, "before\n")
    # Other exceptions are the server's to report (logged with their traceback).
    assert _run(server, "refuse", {"value": 6}) == (True, "a bug")


def test_invoke_reports_help_and_usage_errors():
    """--help exits 0 with the help as output; an unknown option is a usage error with code 2."""
    result = invoke(tasks, ["greet", "--help"], prog_name="tasks")
    assert result.exit_code == 0 and result.failure is None
    assert result.output.startswith("Usage: tasks greet [OPTIONS] NAME")
    result = invoke(tasks, ["greet", "--nope"])
    # Click's wording of the message differs between versions.
    assert result.exit_code == 2 and result.failure.startswith("No such option") and "--nope" in result.failure
    assert result.failure.endswith(" (exit code 2)")


def test_concurrent_calls_get_their_own_output_and_streams_come_back(capsys):
    """Two calls interleaving on two threads each get only their own lines; other threads' writes pass through."""
    barrier = threading.Barrier(3, timeout=WAIT)

    @click.command()
    @click.argument("word")
    def say(word):
        for _ in range(3):
            click.echo(word)
            print(word, file=sys.stderr)
            barrier.wait()

    before = (sys.stdout, sys.stderr, sys.stdin)
    results = {}

    def call(word):
        results[word] = invoke(say, [word])

    threads = [threading.Thread(target=call, args=(w,)) for w in ("alpha", "beta")]
    for t in threads:
        t.start()
    for _ in range(3):
        # The main thread writes while both calls are inside the command.
        print("bystander")
        barrier.wait()
    for t in threads:
        t.join(WAIT)
        assert not t.is_alive()
    for word in ("alpha", "beta"):
        assert results[word].output == f"{word}\n{word}\n" * 3, results
    assert (sys.stdout, sys.stderr, sys.stdin) == before
    assert capsys.readouterr().out == "bystander\n" * 3


def test_without_elicit_missing_support_a_warning_is_logged(caplog):
    """A server.tool without elicit_missing gets none, and the module says so; with it, only askable tools get True."""

    class OldServer:
        def __init__(self):
            self.server = zemcp.Server("t")
            self.seen = []

        def tool(self, name=None, *, description=None, input_schema=None, annotations=None):
            self.seen.append(name)
            return self.server.tool(name, description=description, input_schema=input_schema, annotations=annotations)

    old = OldServer()
    with caplog.at_level(logging.WARNING, "zemcp.clicktools"):
        add_click_tools(old, tasks, elicit_missing=True)
    assert "has no elicit_missing" in caplog.text
    assert old.seen == ["db_bad_name", "db_migrate", "greet", "leave", "refuse"]
    if "elicit_missing" not in inspect.signature(zemcp.Server.tool).parameters:
        pytest.skip("server.tool has no elicit_missing yet")
    server = zemcp.Server("t")
    add_click_tools(server, tasks, elicit_missing=True)
    assert server.tools.get("greet").elicited == ("name",)
    assert server.tools.get("db_migrate").elicited == ("target",)
    assert server.tools.get("refuse").elicited == ()
    listed = zemcp.Server("t")
    add_click_tools(listed, tasks, elicit_missing=["name"])
    assert listed.tools.get("greet").elicited == ("name",)
    assert listed.tools.get("db_migrate").elicited == ()


def test_click_commands_register_as_text_commands():
    """Text commands: shlex splitting, case-insensitive names, --help, failures as CommandError."""
    registry = CommandRegistry()
    assert add_click_commands(registry, tasks) == ["db bad:name", "db migrate", "greet", "leave", "refuse"]
    assert {c.name: c.help for c in registry.commands()}["greet"] == "Greet someone."
    ctx = None
    assert registry.dispatch("greet 'Ada Lovelace' --shout", ctx) == "HELLO, ADA LOVELACE!\n"
    assert registry.dispatch("DB Migrate --to 3", ctx).startswith("out 3\n")
    assert "Usage: tasks greet [OPTIONS] NAME" in registry.dispatch("greet --help", ctx)
    with pytest.raises(CommandError, match=r"^Missing argument 'NAME'\. \(exit code 2\)$"):
        registry.dispatch("greet", ctx)
    with pytest.raises(CommandError, match=r"^exit code 5\nbefore$"):
        registry.dispatch("leave --code 5", ctx)
    with pytest.raises(CommandError, match="cannot split the arguments"):
        registry.dispatch("greet 'Ada", ctx)
    prefixed = CommandRegistry()
    assert add_click_commands(prefixed, greet, prefix="say") == ["say"]
