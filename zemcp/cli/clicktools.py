"""Existing Click command-line interfaces as MCP tools, or as text commands.

:func:`add_click_tools` registers every command of a Click group as a tool whose input schema
is built from the command's options and arguments; :func:`add_click_commands` registers them
as text commands of a :class:`zemcp.cli.commands.CommandRegistry`, run behind one ``*_execute``
tool. Either way a call runs the command in-process with Click's own parsing, through the
root group, so group callbacks (which often set up ``ctx.obj``) run as on the command line.

What a command writes to ``sys.stdout`` and ``sys.stderr`` (``click.echo``, ``print``) is the
call's output. Tools run on several threads at once, and ``click.testing.CliRunner`` swaps
the process's streams (two concurrent calls get each other's output), so the streams are
replaced instead, while any call runs, by proxies that send each write to the buffer of the
call running on the writing thread, and everything else to the stream they replaced. Output
of threads that a command starts itself is not captured: it goes to the process's streams.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import inspect
import io
import logging
import re
import shlex
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import click

from zemcp.cli.commands import CommandContext, CommandError, CommandRegistry
from zemcp.core.tools import ToolError

if TYPE_CHECKING:
    from zemcp.core.server import Server

log = logging.getLogger("zemcp.clicktools")

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.-]")
# Click 8.3 marks a parameter without a default with a sentinel; older versions use None.
_UNSET = getattr(click.core, "UNSET", None)


# -- running a command with its output captured -----------------------------------------------


@dataclass(frozen=True)
class ClickResult:
    """The outcome of one in-process run of a Click command.

    Attributes:
        output: what the run wrote to stdout and stderr, interleaved in the order written.
        exit_code: 0 on success; Click's code of a refused command line (2 for a usage
            error, 1 for other ``ClickException`` and ``Abort``); the code of
            ``ctx.exit(code)``, ``click.exceptions.Exit`` or ``SystemExit``.
        failure: None on success, else one line saying why, with the exit code:
            ``Missing option '--name'. (exit code 2)``, ``Aborted! (exit code 1)``,
            ``exit code 3``.
    """

    output: str
    exit_code: int
    failure: str | None

    def error_text(self) -> str:
        """The failure line, then the output when there is any (the text of an error result)."""
        output = self.output.rstrip("\n")
        return f"{self.failure}\n{output}" if output else str(self.failure)


def invoke(root: click.Command, argv: Sequence[str], *, prog_name: str | None = None) -> ClickResult:
    """Run ``root`` with the command line ``argv`` in this thread, capturing its output.

    Safe to call from several threads at once: each call gets its own output and an empty
    stdin (a prompt sees end of input, which Click turns into ``Abort``).

    Args:
        root: the command or group, as the console script would run it.
        argv: the arguments after the program name, e.g. ``["db", "migrate", "--dry-run"]``.
        prog_name: the program name in usage and help texts; ``root.name`` when omitted.
    Returns:
        the output, exit code and failure (see :class:`ClickResult`).
    Raises:
        Exception: whatever the command's callback raises other than Click's exceptions,
            ``EOFError`` and ``SystemExit``, unchanged (a tool call turns it into an
            ``isError`` result and logs the traceback).
    """
    with _captured() as capture:
        code, failure = 0, None
        try:
            # As Command.main does, but catching Exit itself: main(standalone_mode=False)
            # returns an exit code and a callback's return value alike.
            with root.make_context(prog_name or root.name or "cli", list(argv)) as ctx:
                root.invoke(ctx)
        except click.exceptions.Exit as exc:
            code = exc.exit_code
        except click.ClickException as exc:
            code, failure = exc.exit_code, f"{exc.format_message()} (exit code {exc.exit_code})"
        except (click.Abort, EOFError):
            code, failure = 1, "Aborted! (exit code 1)"
        except SystemExit as exc:
            # sys.exit("message") is exit code 1 with that message, as for Python itself.
            if isinstance(exc.code, str):
                code, failure = 1, f"{exc.code} (exit code 1)"
            else:
                code = exc.code or 0
        if code and failure is None:
            failure = f"exit code {code}"
        return ClickResult(capture.text(), code, failure)


class _CaptureText(io.TextIOBase):
    """One side (stdout or stderr) of a call's output, appended to the call's chunks."""

    # Constant, so that Click takes it as a proper text stream and does not re-wrap it.
    encoding = "utf-8"
    errors = "replace"

    def __init__(self, chunks: list[str], name: str):
        self._chunks = chunks
        self.name = name
        self.buffer = _CaptureBytes(chunks)

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        # Refusing bytes is how click.echo tells a text stream from a binary one.
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._chunks.append(text)
        return len(text)


class _CaptureBytes(io.RawIOBase):
    """The ``buffer`` of a :class:`_CaptureText`, for ``click.echo(b"...")``."""

    def __init__(self, chunks: list[str]):
        self._chunks = chunks

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        data = bytes(data)
        self._chunks.append(data.decode("utf-8", "replace"))
        return len(data)


class _Capture:
    """The streams of one call: its stdout and stderr (one ordered record) and an empty stdin."""

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self.stdout = _CaptureText(self._chunks, "<stdout>")
        self.stderr = _CaptureText(self._chunks, "<stderr>")
        self.stdin = io.StringIO()

    def text(self) -> str:
        return "".join(self._chunks)


# The capture of the call running in this thread (a ContextVar is per thread, and per task).
_CURRENT: contextvars.ContextVar[_Capture | None] = contextvars.ContextVar("zemcp_click_capture", default=None)


class _Routed:
    """Stands in for ``sys.stdout``, ``sys.stderr`` or ``sys.stdin`` while calls run: the
    current thread's capture if it has one, else the stream it replaced."""

    # Click caches its view of sys.stdout per stream object and decides once whether to
    # re-wrap it, so these must not depend on the thread that asks first.
    encoding = "utf-8"
    errors = "replace"

    def __init__(self, replaced: Any, side: str):
        self._replaced = replaced
        self._side = side

    def _stream(self) -> Any:
        capture = _CURRENT.get()
        return self._replaced if capture is None else getattr(capture, self._side)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream(), name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._stream())


_SIDES = ("stdout", "stderr", "stdin")
_routing_lock = threading.Lock()
_routing_users = 0
_routing: dict[str, _Routed] = {}


@contextlib.contextmanager
def _captured() -> Iterator[_Capture]:
    """Route this thread's standard streams to a new capture for the duration of the block."""
    global _routing_users
    capture = _Capture()
    with _routing_lock:
        if _routing_users == 0:
            for side in _SIDES:
                _routing[side] = _Routed(getattr(sys, side), side)
                setattr(sys, side, _routing[side])
        _routing_users += 1
    token = _CURRENT.set(capture)
    try:
        yield capture
    finally:
        _CURRENT.reset(token)
        with _routing_lock:
            _routing_users -= 1
            if _routing_users == 0:
                for side in _SIDES:
                    # Someone who replaced the stream meanwhile keeps it.
                    if getattr(sys, side) is _routing[side]:
                        setattr(sys, side, _routing[side]._replaced)
                _routing.clear()


# -- input schemas from Click parameters ------------------------------------------------------


@dataclass
class _Binding:
    """One property of the input schema and how its value becomes command-line tokens.

    Attributes:
        name: the property name (the parameter's Python name).
        schema: the property's JSON Schema.
        required: whether the property is required.
        render: the value -> its tokens.
        positional: an argument's tokens, placed after ``--``.
        fill: give the default explicitly when the value is left out (a prompting option,
            which would otherwise prompt and meet end of input).
    """

    name: str
    schema: dict[str, Any]
    required: bool
    render: Callable[[Any], list[str]]
    positional: bool = False
    fill: bool = False


def _choice_token(choice: Any) -> str:
    # Click 8.2+ accepts Enum members as choices and matches them by member name.
    return choice.name if isinstance(choice, enum.Enum) else str(choice)


def _type_schema(ptype: click.ParamType[Any]) -> dict[str, Any]:
    """The JSON Schema of one value of a Click type (one item of a multiple or nargs parameter)."""
    if isinstance(ptype, click.Choice):
        return {"type": "string", "enum": [_choice_token(c) for c in ptype.choices]}
    if isinstance(ptype, (click.IntRange, click.FloatRange)):
        schema: dict[str, Any] = {"type": "integer" if isinstance(ptype, click.IntRange) else "number"}
        # A clamping range takes any number and moves it into the range.
        if not ptype.clamp:
            if ptype.min is not None:
                schema["exclusiveMinimum" if ptype.min_open else "minimum"] = ptype.min
            if ptype.max is not None:
                schema["exclusiveMaximum" if ptype.max_open else "maximum"] = ptype.max
        return schema
    if isinstance(ptype, click.types.IntParamType):
        return {"type": "integer"}
    if isinstance(ptype, click.types.FloatParamType):
        return {"type": "number"}
    if isinstance(ptype, click.types.BoolParamType):
        return {"type": "boolean"}
    if isinstance(ptype, click.types.UUIDParameterType):
        return {"type": "string", "format": "uuid"}
    # STRING, paths, files, datetimes and custom types: Click converts the text itself.
    return {"type": "string"}


def _value_schema(param: click.Parameter) -> dict[str, Any]:
    """The schema of one occurrence of the parameter: a value, or an array of nargs values."""
    if isinstance(param.type, click.Tuple):
        items = [_type_schema(t) for t in param.type.types]
        return {"type": "array", "prefixItems": items, "minItems": len(items), "maxItems": len(items)}
    if param.nargs > 1:
        return {"type": "array", "items": _type_schema(param.type), "minItems": param.nargs, "maxItems": param.nargs}
    return _type_schema(param.type)


def _token(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _tokens(value: Any) -> list[str]:
    return [_token(v) for v in value] if isinstance(value, list) else [_token(value)]


def _json_default(param: click.Parameter) -> tuple[bool, Any]:
    """``(True, default)`` when the parameter has a default with a JSON form, else ``(False, None)``."""
    default = param.default
    if (default is None or default is _UNSET) and isinstance(param, click.Option) and param.is_bool_flag:
        # A boolean flag without a default is off: Click 8.5 reports UNSET, older versions False.
        return True, False
    if default is None or default is _UNSET or callable(default):
        return False, None

    def convert(value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return _choice_token(value)
        if isinstance(value, (list, tuple)):
            return [convert(v) for v in value]
        if isinstance(value, (str, int, float, bool)):
            return value
        raise TypeError

    try:
        return True, convert(default)
    except TypeError:
        return False, None


def _option_name(option: click.Option) -> str:
    """The option's spelling on the command line: its first long form, else its first form."""
    return next((o for o in option.opts if o.startswith("--")), option.opts[0])


def _is_long(opt: str) -> bool:
    # Click's parser splits "--name=value" (and "-name=value") but not short "-n=value".
    return not (len(opt) == 2 and opt[0] != opt[1])


def _option_binding(option: click.Option) -> _Binding:
    opt = _option_name(option)
    schema: dict[str, Any]
    if option.is_flag and option.is_bool_flag:
        schema = {"type": "boolean"}
        off = option.secondary_opts[0] if option.secondary_opts else None

        def render(value: Any) -> list[str]:
            return [opt] if value else ([off] if off else [])
    elif option.count:
        schema = {"type": "integer", "minimum": 0}

        def render(value: Any) -> list[str]:
            return [opt] * value
    else:
        one = _value_schema(option)
        schema = {"type": "array", "items": one} if option.multiple else one

        def render_one(value: Any) -> list[str]:
            if isinstance(value, list) or not _is_long(opt):
                return [opt, *_tokens(value)]
            return [f"{opt}={_token(value)}"]

        def render(value: Any) -> list[str]:
            if not option.multiple:
                return render_one(value)
            return [token for item in value for token in render_one(item)]

    has_default, default = _json_default(option)
    # A prompting option without a default cannot be left out: its prompt would meet end of input.
    required = option.required or (option.prompt is not None and not has_default and not option.is_flag)
    if has_default and not required:
        schema["default"] = default
    if option.help:
        schema["description"] = option.help
    return _Binding(
        option.name, schema, required, render, fill=option.prompt is not None and has_default and not required
    )


def _switch_binding(name: str, options: list[click.Option]) -> _Binding:
    """Feature switches: flags that set one parameter to their own ``flag_value``."""
    by_value = {_token(o.flag_value): _option_name(o) for o in options}
    schema: dict[str, Any] = {"type": "string", "enum": list(by_value)}
    chosen = [
        o
        for o in options
        if o.default is True or (o.default not in (None, _UNSET, False) and o.default == o.flag_value)
    ]
    if chosen:
        schema["default"] = _token(chosen[0].flag_value)
    helps = [f"{_option_name(o)}: {o.help}" for o in options if o.help]
    if helps:
        schema["description"] = "; ".join(helps)
    return _Binding(name, schema, any(o.required for o in options), lambda value: [by_value[value]])


def _argument_binding(argument: click.Argument) -> _Binding:
    if argument.nargs == -1:
        schema: dict[str, Any] = {"type": "array", "items": _type_schema(argument.type)}
        if argument.required:
            schema["minItems"] = 1
    else:
        schema = _value_schema(argument)
    has_default, default = _json_default(argument)
    if has_default and not argument.required:
        schema["default"] = default
    # Arguments have no help in Click 8; a subclass may add one.
    help_text = getattr(argument, "help", None)
    if help_text:
        schema["description"] = help_text
    return _Binding(argument.name, schema, argument.required, _tokens, positional=True)


def _bindings(command: click.Command) -> list[_Binding]:
    """The command's visible parameters as schema properties, in declaration order.

    Raises:
        ValueError: two parameters (other than feature switches) share a name.
    """
    params = [p for p in command.params if p.name and not getattr(p, "hidden", False)]
    switches: dict[str, list[click.Option]] = {}
    for p in params:
        if isinstance(p, click.Option) and p.is_flag and not p.is_bool_flag:
            switches.setdefault(p.name, []).append(p)
    bindings: list[_Binding] = []
    seen: set[str] = set()
    for p in params:
        if p.name in seen:
            if p.name in switches:
                continue
            raise ValueError(f"command {command.name!r}: two parameters are named {p.name!r}")
        seen.add(p.name)
        if p.name in switches:
            bindings.append(_switch_binding(p.name, switches[p.name]))
        elif isinstance(p, click.Option):
            bindings.append(_option_binding(p))
        else:
            # click's parameters are options or arguments.
            bindings.append(_argument_binding(cast(click.Argument, p)))
    return bindings


def _schema(bindings: list[_Binding]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {b.name: b.schema for b in bindings}}
    required = [b.name for b in bindings if b.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def command_schema(command: click.Command) -> dict[str, Any]:
    """The MCP ``inputSchema`` of a Click command.

    One property per visible parameter, under its Python name: STRING and other types ->
    string, INT -> integer, FLOAT -> number, BOOL and boolean flags -> boolean, Choice ->
    string ``enum`` (Enum choices by member name), IntRange/FloatRange -> ``minimum`` /
    ``maximum`` (exclusive for open bounds, none when clamping), UUID -> string ``uuid``,
    count options -> integer from 0, ``nargs`` > 1 and tuple types -> fixed-length arrays,
    ``nargs=-1`` and ``multiple`` -> arrays, feature switches (flags sharing a name) -> a
    string ``enum`` of their flag values. ``required``, JSON defaults and help texts carry
    over; a prompting option without a default is required. Hidden parameters and
    ``--help`` are left out.

    Args:
        command: a Click command (not a group).
    Returns:
        a JSON Schema rooted at ``type: object`` with ``additionalProperties: false``.
    Raises:
        ValueError: two parameters other than feature switches share a name.
    """
    return _schema(_bindings(command))


def _argv(bindings: list[_Binding], arguments: dict[str, Any]) -> list[str]:
    """The command-line tokens of validated tool arguments, options first, then ``--`` and arguments."""
    options: list[str] = []
    positional: list[str] = []
    for b in bindings:
        if b.name in arguments:
            (positional if b.positional else options).extend(b.render(arguments[b.name]))
        elif b.fill:
            options.extend(b.render(b.schema["default"]))
    # "--" keeps argument values that start with "-" from being read as options.
    return options + (["--", *positional] if positional else [])


# -- walking a group --------------------------------------------------------------------------


def _commands(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """``(path of names, command)`` for every visible leaf command under ``command``."""
    if not isinstance(command, click.Group):
        yield path, command
        return
    ctx = click.Context(command, info_name=command.name)
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        yield from _commands(sub, (*path, name))


def _description(command: click.Command, path: tuple[str, ...]) -> str:
    """The command's help text as the tool's description, without Click's layout marks."""
    text = command.help or command.short_help or ""
    # "\f" ends the help Click shows; a "\b" line marks a paragraph Click must not rewrap.
    text = inspect.cleandoc(text.split("\f", 1)[0])
    text = "\n".join(line for line in text.splitlines() if line.strip() != "\b").strip()
    return text or f"Run the command '{' '.join(path) or command.name}'."


def add_click_tools(
    server: Server,
    group: click.Command,
    *,
    prefix: str | None = None,
    elicit_missing: bool | Sequence[str] = False,
    prog_name: str | None = None,
    **tool_options: Any,
) -> list[str]:
    """Register every command of a Click group as a tool of ``server``.

    A command's tool is named after its path of command names joined with ``_``
    (``db_migrate`` for ``cli db migrate``; characters a tool name cannot have become ``_``),
    after ``prefix`` and ``_`` when given. ``group`` may also be a single command: its tool
    is named ``prefix``, else after the command. Its input schema is
    :func:`command_schema`; its description is the command's help. A call builds the command
    line from the arguments and runs it through ``group`` (see :func:`invoke`): the result
    is the output as text, or an ``isError`` result ``Error: <failure>`` followed by the
    output when the command line is refused (usage error, bad parameter), aborts or exits
    with a non-zero code. The group's own parameters keep their defaults.

    Args:
        server: the server to register the tools on.
        group: the Click group (nested groups are walked; hidden commands are skipped) or command.
        prefix: joined before every tool name with ``_``.
        elicit_missing: passed to ``server.tool`` when it accepts it: True (for the commands
            with a required parameter a form can ask for: string, number, integer, boolean,
            Choice), or the names of the parameters to ask for (narrowed to each command's
            own parameters). A call that lacks them asks the user for them by elicitation.
            Without that support in ``server.tool`` a warning is logged and such calls are
            refused as any call without a required argument is.
        prog_name: the program name in usage and help texts; the group's name when omitted.
        tool_options: more options of ``server.tool`` for every tool (``annotations``,
            ``scopes``, ``ttl_ms``, ``cache_scope``).
    Returns:
        the names of the registered tools, in the group's order.
    Raises:
        ValueError: a tool name is taken or invalid (longer than 128 characters), or a
            command has two parameters of one name.
    """
    supports_elicit = "elicit_missing" in inspect.signature(server.tool).parameters
    if elicit_missing and not supports_elicit:
        log.warning(
            "server.tool has no elicit_missing: calls of Click commands without a required "
            "parameter are refused instead of asking the user for it"
        )
    names = []
    for path, command in _commands(group):
        parts = [prefix] if prefix else []
        parts += list(path) if path or prefix else [command.name or "cli"]
        name = _NOT_IN_NAME.sub("_", "_".join(parts))
        bindings = _bindings(command)
        options = dict(tool_options)
        if elicit_missing and supports_elicit:
            if isinstance(elicit_missing, bool):
                # server.tool refuses True for a tool without a required argument a form can
                # ask for (such as a command whose only argument is nargs=-1).
                if any(b.required and _askable(b.schema) for b in bindings):
                    options["elicit_missing"] = True
            else:
                own = [n for n in elicit_missing if any(b.name == n for b in bindings)]
                if own:
                    options["elicit_missing"] = own
        server.tool(name, description=_description(command, path), input_schema=_schema(bindings), **options)(
            _tool_handler(group, path, bindings, prog_name)
        )
        names.append(name)
    return names


def _askable(schema: dict[str, Any]) -> bool:
    """Whether a form can ask for the property: a primitive, and a string enum only of non-empty strings."""
    if schema.get("type") not in ("string", "number", "integer", "boolean"):
        return False
    return all(isinstance(v, str) and v for v in schema.get("enum", ["x"]))


def _tool_handler(
    root: click.Command, path: tuple[str, ...], bindings: list[_Binding], prog_name: str | None
) -> Callable[..., str]:
    def run(**arguments: Any) -> str:
        result = invoke(root, [*path, *_argv(bindings, arguments)], prog_name=prog_name)
        if result.failure is not None:
            raise ToolError(f"Error: {result.error_text()}")
        return result.output

    return run


def add_click_commands(
    registry: CommandRegistry, group: click.Command, *, prefix: str | None = None, prog_name: str | None = None
) -> list[str]:
    """Register every command of a Click group as a text command of ``registry``.

    A command is registered under its path of command names (``db migrate``), after
    ``prefix`` when given; its help line is Click's short help. The rest of the line is split
    as a shell would (:func:`shlex.split`) and parsed by Click, so ``db migrate --dry-run
    'my table'`` and ``db migrate --help`` work as in a terminal. A refused command line,
    an abort or a non-zero exit raises :class:`zemcp.cli.commands.CommandError` with the
    failure and the output, which the ``*_execute`` tool returns as ``Error: ...``.

    Args:
        registry: the registry behind an ``add_execute_tool`` tool.
        group: the Click group (nested groups are walked; hidden commands are skipped) or command.
        prefix: one or more words before every command name.
        prog_name: the program name in usage and help texts; the group's name when omitted.
    Returns:
        the registered command names, in the group's order.
    Raises:
        ValueError: a command name is already registered.
    """
    names = []
    for path, command in _commands(group):
        words = ([prefix] if prefix else []) + (list(path) if path or prefix else [command.name or "cli"])
        name = " ".join(words)
        registry.command(name, command.get_short_help_str(limit=100))(_text_handler(group, path, prog_name))
        names.append(name)
    return names


def _text_handler(
    root: click.Command, path: tuple[str, ...], prog_name: str | None
) -> Callable[[CommandContext, str], str]:
    def run(ctx: CommandContext, args: str) -> str:
        try:
            tokens = shlex.split(args)
        except ValueError as exc:
            raise CommandError(f"cannot split the arguments {args!r}: {exc}") from None
        result = invoke(root, [*path, *tokens], prog_name=prog_name)
        if result.failure is not None:
            raise CommandError(result.error_text())
        return result.output

    return run
