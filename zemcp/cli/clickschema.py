"""Click parameters as JSON Schema, and tool arguments back as a command line.

:func:`command_schema` is the MCP ``inputSchema`` of a Click command. Underneath, each visible
parameter becomes a :class:`Binding`: its schema property and how a value of it is rendered
as command-line tokens, so that :func:`command_line` turns validated tool arguments into the
``argv`` Click parses as it would in a terminal.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import click

# Click 8.3 marks a parameter without a default with a sentinel; older versions use None.
_UNSET = getattr(click.core, "UNSET", None)


@dataclass
class Binding:
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


def _option_binding(option: click.Option) -> Binding:
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
    return Binding(
        option.name, schema, required, render, fill=option.prompt is not None and has_default and not required
    )


def _switch_binding(name: str, options: list[click.Option]) -> Binding:
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
    return Binding(name, schema, any(o.required for o in options), lambda value: [by_value[value]])


def _argument_binding(argument: click.Argument) -> Binding:
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
    return Binding(argument.name, schema, argument.required, _tokens, positional=True)


def command_bindings(command: click.Command) -> list[Binding]:
    """The command's visible parameters as schema properties, in declaration order.

    Args:
        command: a Click command (not a group).
    Returns:
        one :class:`Binding` per visible parameter; feature switches sharing a name make one.
    Raises:
        ValueError: two parameters (other than feature switches) share a name.
    """
    params = [p for p in command.params if p.name and not getattr(p, "hidden", False)]
    switches: dict[str, list[click.Option]] = {}
    for p in params:
        if isinstance(p, click.Option) and p.is_flag and not p.is_bool_flag:
            switches.setdefault(p.name, []).append(p)
    bindings: list[Binding] = []
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


def bindings_schema(bindings: list[Binding]) -> dict[str, Any]:
    """The input schema made of ``bindings`` (see :func:`command_schema`).

    Args:
        bindings: the properties, as :func:`command_bindings` returns them.
    Returns:
        a JSON Schema rooted at ``type: object`` with ``additionalProperties: false``.
    """
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
    return bindings_schema(command_bindings(command))


def command_line(bindings: list[Binding], arguments: dict[str, Any]) -> list[str]:
    """The command-line tokens of validated tool arguments, options first, then ``--`` and arguments.

    Args:
        bindings: the command's properties, as :func:`command_bindings` returns them.
        arguments: tool arguments valid against :func:`bindings_schema` of ``bindings``.
    Returns:
        the tokens after the command's path of names, e.g. ``["--dry-run", "--", "my table"]``.
    """
    options: list[str] = []
    positional: list[str] = []
    for b in bindings:
        if b.name in arguments:
            (positional if b.positional else options).extend(b.render(arguments[b.name]))
        elif b.fill:
            options.extend(b.render(b.schema["default"]))
    # "--" keeps argument values that start with "-" from being read as options.
    return options + (["--", *positional] if positional else [])
