"""Tools (MCP server/tools): the registry, argument checking and call results.

A handler is a plain blocking function, or an ``async def`` one, which each call runs to
completion in an event loop of its own (:mod:`zemcp.core.coroutines`). Its typed parameters
are the tool's arguments: the ``inputSchema`` is derived from them (see
:mod:`zemcp.core.schemas`), arguments are validated against it before the handler runs, and
arrive converted to the declared types. A parameter
annotated :class:`zemcp.Context` (or named ``ctx`` without annotation) receives the call's
context instead. An explicit ``input_schema`` replaces the derived one verbatim; the
arguments then arrive as the JSON values they are.

A handler returns a ``str`` (one text item), a list of content items, a full
``CallToolResult`` dict, or any other value (sent as JSON text). A tool with an output schema
returns the structured value itself (:mod:`zemcp.core.results` shapes them). Raising
:class:`ToolError` or any other exception turns into an ``isError`` result carrying the
message. Pure Python: no HTTP here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, cast

import jsonschema
from jsonschema.exceptions import ValidationError, best_match

from zemcp import logsafe
from zemcp.config.rates import parse_rate
from zemcp.core import callables, coroutines, schemas
from zemcp.core.context import Context
from zemcp.core.docstrings import docstring_summary
from zemcp.core.errors import HANDLER_ERRORS, ClientRequestError, URLElicitationRequired
from zemcp.core.forms import elicited_fields
from zemcp.core.pydantic_types import ModelInvalid, path_text
from zemcp.core.results import error_result, structured_result, to_result
from zemcp.core.type_schemas import to_python, type_hints
from zemcp.protocol import elicitation, param_headers, versions
from zemcp.protocol.caching import NO_CACHE, CacheHint, combine
from zemcp.protocol.icons import checked_icons
from zemcp.protocol.jsonrpc import ProtocolError
from zemcp.protocol.metadata import checked_meta
from zemcp.protocol.tasks import FORBIDDEN, check_support
from zemcp.protocol.validators import SchemaValidator

log = logging.getLogger("zemcp.tools")

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
#: Validators of partial arguments a tool keeps (one per set of arguments a call lacks).
PARTIAL_VALIDATORS = 16

#: The keys of ``Tool.annotations`` (MCP ToolAnnotations) and the type of each value.
ANNOTATION_KEYS = {
    "title": str,
    "readOnlyHint": bool,
    "destructiveHint": bool,
    "idempotentHint": bool,
    "openWorldHint": bool,
}


class ToolError(Exception):
    """Raise from a handler to return an ``isError`` result whose text is exactly the message."""


class Tool:
    """A registered tool.

    Args:
        name: unique name, 1-128 characters of ``A-Za-z0-9_.-``; the handler's name when None.
        handler: the function called with the arguments as keywords.
        description: what the tool does (shown to the model); when None, the first paragraph
            of the handler's docstring (before ``Args:``), else the tool's name.
        input_schema: JSON Schema of the arguments, rooted at ``type: object``, listed and
            used verbatim; derived from the handler's signature when None.
        title: optional display name.
        output_schema: JSON Schema of the structured result, rooted at ``type: object``;
            the handler's return value is the ``structuredContent``.
        structured_output: derive the output schema from the return annotation (a
            dataclass, TypedDict, pydantic model or ``dict[str, X]`` as is, other types
            under ``result``); a pydantic model as the return annotation derives it without.
        annotations: ToolAnnotations: ``title`` (str), ``readOnlyHint``,
            ``destructiveHint``, ``idempotentHint``, ``openWorldHint`` (bool).
        cache: its part of the ``tools/list`` caching hint (2026-07-28).
        elicit_missing: ask the user for missing arguments by form elicitation instead of
            failing the call (see :meth:`missing` and :meth:`run`): True for every required
            argument a form can ask for (:func:`zemcp.core.forms.form_field`), or a list of
            argument names, which are then asked for whenever they are missing, required
            by the schema or not.
        elicit_message: the question shown with that form; when None, ``"<title or name>
            needs: <the missing fields' titles or names>"`` (see :meth:`question`).
        rate_limit: a token bucket per client for this tool's calls over HTTP (a rate of
            :func:`zemcp.config.rates.parse_rate`: ``5/minute``), over the server's own;
            None: ``ZEMCP_RATE_LIMIT_TOOLS`` may name one.
        task: whether a call may run as a task (``execution.taskSupport``, MCP tasks):
            ``forbidden`` (never), ``optional`` (when the client asks for one) or
            ``required`` (only as a task).
        icons: its ``icons``: :class:`zemcp.Icon` or dicts in the schema's shape
            (:func:`zemcp.protocol.icons.checked_icons`).
        meta: its ``_meta``, keys as :func:`zemcp.protocol.metadata.checked_meta` allows.
    Raises:
        ValueError: a bad name, a schema that is not an object schema, both
            ``output_schema`` and ``structured_output``, unknown annotation keys, or an
            invalid ``x-mcp-header`` in the input schema (see :func:`zemcp.protocol.param_headers.header_annotations`),
            an ``elicit_missing`` list naming an argument the schema does not have or a form
            cannot ask for, ``elicit_missing=True`` without a required argument a form can
            ask for, an ``elicit_message`` that is not a non-empty string, or a
            ``rate_limit`` that is not a rate, a ``task`` that is not a ``taskSupport`` value,
            or bad ``icons`` or ``meta`` (the message names the icon or key and the rule).
        TypeError: a parameter or return type the schemas cannot express (the message
            names it and lists what is supported), ``structured_output`` without a
            return annotation, or a handler that is an async generator function.
        jsonschema.SchemaError: an explicit schema that is not valid JSON Schema.

    Attributes:
        name, handler, title, description, input_schema, output_schema, annotations: as
            given, with the derived name, description and schemas filled in.
        context_param: the name of the parameter that receives the Context, or None.
        header_annotations: ``{lower-cased token: property path}`` of the input schema's
            ``x-mcp-header`` marks, for :func:`zemcp.protocol.param_headers.check_params`.
        elicited: the names of the arguments asked for when missing, in schema order (empty
            without ``elicit_missing``).
        elicit_message: as given (None: a question naming the missing fields).
        rate_limit: ``rate_limit`` parsed, or None.
        task: ``forbidden``, ``optional`` or ``required``.
        icons, meta: as checked (empty when none).
    """

    def __init__(
        self,
        name: str | None,
        handler: Callable[..., Any],
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        title: str | None = None,
        *,
        output_schema: dict[str, Any] | None = None,
        structured_output: bool = False,
        annotations: dict[str, Any] | None = None,
        cache: CacheHint = NO_CACHE,
        elicit_missing: bool | list[str] | tuple[str, ...] = False,
        elicit_message: str | None = None,
        rate_limit: str | None = None,
        task: str = FORBIDDEN,
        icons: Any = (),
        meta: Any = None,
    ):
        self.name = callables.handler_name(handler, name, "tool")
        self.task = check_support(task)
        if not _NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must be 1-128 characters of A-Z, a-z, 0-9, '_', '.', '-'")
        self.icons = checked_icons(icons, f"tool {self.name!r}")
        self.meta = {} if meta is None else checked_meta(meta, f"tool {self.name!r}")
        self.rate_limit = None if rate_limit is None else parse_rate(rate_limit, f"tool {self.name!r}: rate_limit")
        self.handler = handler
        self._async = coroutines.handler_is_async(handler, f"tool {self.name!r}")
        self.cache = cache
        self.title = title
        # A partial or a callable object shows the schemas of the function that runs.
        described = callables.described(handler)
        self.description = description or docstring_summary(described) or self.name
        self.annotations = _check_annotations(self.name, annotations)
        if input_schema is None:
            self.input_schema, self.context_param = schemas.input_schema(described)
            # Parameter types to convert the JSON arguments to; None passes them unchanged.
            self._types: dict[str, Any] | None = type_hints(described)
            self._defaults = schemas.field_defaults(described)
        else:
            self.input_schema, self.context_param, self._types = (
                input_schema,
                schemas.context_parameter(described),
                None,
            )
            self._defaults = {}
        # Derived schemas are checked too: Annotated metadata may have added keywords.
        _check_object_schema(self.name, "input_schema", self.input_schema)
        try:
            self.header_annotations = param_headers.header_annotations(self.input_schema)
        except ValueError as exc:
            raise ValueError(f"tool {self.name!r}: {exc}") from None
        self._validator = SchemaValidator(self.input_schema)
        # Validators of the arguments a call gives when it lacks some it will be asked for, by
        # what it lacks (few sets: the elicited arguments are few).
        self._partial_validators: dict[tuple[str, ...], SchemaValidator] = {}
        if output_schema is not None and structured_output:
            raise ValueError(f"tool {self.name!r}: give output_schema or structured_output=True, not both")
        self._wrapped = False
        if structured_output or (output_schema is None and schemas.returns_model(described)):
            output_schema = schemas.output_schema(described)
            if output_schema is None:
                raise TypeError(
                    f"tool {self.name!r}: structured_output=True derives the output schema from the "
                    "return annotation, and the handler has none; annotate its return type or pass output_schema"
                )
            self._wrapped = schemas.wraps_result(described)
        if output_schema is not None:
            _check_object_schema(self.name, "output_schema", output_schema)
        self.output_schema = output_schema
        # No format checker, as for the arguments: in JSON Schema 2020-12 ``format`` is an
        # annotation, and what a type's schema names (pydantic's naive datetime as
        # "date-time") need not pass a strict checker of it.
        self._output_validator = SchemaValidator(output_schema) if output_schema is not None else None
        # name -> (field for the 2025-06-18 subset, field for 2025-11-25 on), built once here.
        self._fields = elicited_fields(self.name, self.input_schema, elicit_missing)
        self.elicited = tuple(self._fields)
        if elicit_message is not None and (not isinstance(elicit_message, str) or not elicit_message.strip()):
            raise ValueError(f"tool {self.name!r}: elicit_message must be a non-empty string, got {elicit_message!r}")
        self.elicit_message = elicit_message

    def definition(self) -> dict[str, Any]:
        """The tool as ``tools/list`` shows it."""
        tool: dict[str, Any] = {"name": self.name}
        if self.title:
            tool["title"] = self.title
        tool["description"] = self.description
        tool["inputSchema"] = self.input_schema
        if self.output_schema is not None:
            tool["outputSchema"] = self.output_schema
        if self.annotations:
            tool["annotations"] = self.annotations
        if self.task != FORBIDDEN:
            tool["execution"] = {"taskSupport": self.task}
        if self.icons:
            tool["icons"] = self.icons
        if self.meta:
            tool["_meta"] = self.meta
        return tool

    def check_arguments(self, arguments: dict[str, Any]) -> str | None:
        """Validate arguments against the input schema.

        Returns:
            None when they are valid, else what is wrong, naming the argument: ``invalid
            arguments for tool 'add': argument 'b': 'x' is not of type 'integer'``, ``...:
            unexpected argument 'c'``, ``...: missing required argument 'a'``.
        """
        error = _first_error(self._validator, arguments)
        if error is None:
            return None
        return f"invalid arguments for tool {self.name!r}: {_describe(error, 'argument')}"

    def missing(self, arguments: dict[str, Any]) -> list[str]:
        """The :attr:`elicited` arguments this call lacks, in schema order.

        An argument is missing when it is absent or a blank string (empty or only
        whitespace): models send ``""`` for a value they do not know.
        """
        return [
            name
            for name in self.elicited
            if name not in arguments or (isinstance(arguments[name], str) and not arguments[name].strip())
        ]

    def check_partial(self, arguments: dict[str, Any], missing: list[str]) -> str | None:
        """Validate the arguments a call gave besides the ``missing`` ones it will be asked for.

        Returns:
            None when the given ones are valid and the missing ones are all that keeps the
            call from running; else what is wrong, in the words of :meth:`check_arguments`:
            a required argument that cannot be asked for is reported as for the call as sent
            (naming every missing argument), as it was without ``elicit_missing``.
        """
        given = {k: v for k, v in arguments.items() if k not in missing}
        lacking = tuple(missing)
        relaxed = self._partial_validators.get(lacking)
        if relaxed is None:
            required = [r for r in self.input_schema.get("required", ()) if r not in missing]
            relaxed = SchemaValidator({**self.input_schema, "required": required})
            if len(self._partial_validators) < PARTIAL_VALIDATORS:
                self._partial_validators[lacking] = relaxed
        error = _first_error(relaxed, given)
        if error is None:
            return None
        if error.validator == "required" and not list(error.absolute_path):
            return self.check_arguments(arguments)
        return f"invalid arguments for tool {self.name!r}: {_describe(error, 'argument')}"

    def question(self, missing: list[str]) -> str:
        """The message of the form that asks for ``missing``: ``elicit_message``, or
        ``"<title or name> needs: <their titles or names>"``."""
        if self.elicit_message is not None:
            return self.elicit_message
        labels = ", ".join(self._fields[name][0].get("title", name) for name in missing)
        return f"{self.title or self.name} needs: {labels}"

    def ask_missing(self, arguments: dict[str, Any], missing: list[str], ctx: Context) -> dict[str, Any]:
        """Ask the user for the ``missing`` arguments in one form, and merge the answer.

        The form (MCP client/elicitation, form mode) has one required field per missing
        argument (:func:`zemcp.core.forms.form_field`), under the key of the missing names
        joined by ``,`` in the 2026-07-28 era. Only the asked names are taken from the
        answer; the merged arguments are checked against the whole input schema.

        Args:
            arguments: the call's arguments (the missing ones absent or blank).
            missing: from :meth:`missing`, not empty.
            ctx: the call's context (either era).
        Returns:
            the complete arguments.
        Raises:
            ToolError: ``Error: elicit: <why>`` when the elicitation fails (declined,
                cancelled, malformed or unfitting answer, timeout, too many pending ...),
                ``Error: elicit returned empty <names>`` for blank answers.
            zemcp.ElicitAborted: the request can no longer be answered.
        """
        titled = versions.since(ctx.client.protocol_version, versions.ELICITATION_MODES)
        schema = {
            "type": "object",
            "properties": {name: self._fields[name][1 if titled else 0] for name in missing},
            "required": list(missing),
        }
        try:
            answer = ctx.elicit(self.question(missing), schema, key=",".join(missing))
            blank = [name for name in missing if isinstance(answer[name], str) and not answer[name].strip()]
            if blank:
                raise ToolError(f"Error: elicit returned empty {', '.join(blank)}")
            merged = {
                **{k: v for k, v in arguments.items() if k not in missing},
                **{name: answer[name] for name in missing},
            }
            problem = self.check_arguments(merged)
            if problem is not None:
                raise elicitation.ElicitMalformed(f"the answer does not fit the tool's input schema: {problem}")
        except elicitation.ElicitAborted:
            raise
        except elicitation.ElicitError as exc:
            log.info("tool %r: asking for %s ended: %s", self.name, ", ".join(missing), logsafe.outcome(exc))
            _ended(ctx, exc)
            raise ToolError(f"Error: elicit: {exc}") from None
        return merged

    def run(self, arguments: dict[str, Any], ctx: Context, missing: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
        """Call the handler with arguments that passed :meth:`check_arguments` (or, with
        ``missing``, :meth:`check_partial`) and shape its outcome as a ``CallToolResult``.

        Args:
            arguments: the call's arguments.
            ctx: the call's context; the exception that ends the handler instead of a return
                is noted on its exchange (:attr:`zemcp.core.exchange.Abortable.ending`).
            missing: arguments to ask the user for first (:meth:`ask_missing`); the call
                ends with its ``isError`` result when that fails.
        Raises:
            zemcp.ElicitAborted: the request can no longer be answered (the caller sends
                nothing, or nothing reaches the client).
            zemcp.URLElicitationRequired: the handler asks for URL-mode elicitations first
                (the caller answers with error -32042).
            zemcp.ProtocolError: the handler raised it: the call is answered with that
                JSON-RPC error (a task ends ``failed``).
        """
        if missing:
            try:
                arguments = self.ask_missing(arguments, list(missing), ctx)
            except ToolError as exc:
                return error_result(str(exc))
        kwargs = {}
        for name, value in arguments.items():
            try:
                kwargs[name] = value if self._types is None else to_python(self._types.get(name, Any), value)
            except Exception as exc:
                # A dataclass's __post_init__ or a pydantic validator may refuse what the schema let through.
                return error_result(f"invalid arguments for tool {self.name!r}: {_refusal(name, exc)}")
        for name, make in self._defaults.items():
            if name not in kwargs:
                kwargs[name] = make()
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        try:
            if self._async:
                value = coroutines.call(self.handler, True, f"tool {self.name!r}", ctx, **kwargs)
            else:
                # Called here rather than through coroutines.call: the handler runs one frame nearer the request.
                value = coroutines.plain_value(self.handler(**kwargs), f"tool {self.name!r}")
        except elicitation.ElicitAborted as exc:
            _ended(ctx, exc)
            raise
        except (URLElicitationRequired, ProtocolError):
            raise
        except ToolError as exc:
            return error_result(str(exc))
        except (elicitation.ElicitError, ClientRequestError) as exc:
            # An outcome of asking the client (declined, timed out, not declared ...), not a bug: no traceback.
            log.info("tool %r ended by an outcome of asking the client: %s", self.name, logsafe.outcome(exc))
            _ended(ctx, exc)
            return error_result(str(exc))
        except HANDLER_ERRORS as exc:
            log.exception("tool %r raised", self.name)
            _ended(ctx, exc)
            return error_result(str(exc) or type(exc).__name__)
        try:
            return to_result(value) if self.output_schema is None else self._structured_result(value)
        except (TypeError, ValueError) as exc:
            log.error("tool %r returned a value that cannot be sent: %s", self.name, exc)
            return error_result(f"tool {self.name!r} returned a value that cannot be sent: {exc}")

    def _structured_result(self, value: Any) -> dict[str, Any]:
        result = structured_result(value, self._wrapped)
        validator = self._output_validator
        assert validator is not None  # a structured result is made only with an output schema
        error = _first_error(validator, result["structuredContent"])
        if error is not None:
            # The handler broke its own contract: a bug on the server side, not the caller's.
            problem = _describe(error, "field")
            log.error("tool %r: output does not match its outputSchema: %s", self.name, problem)
            return error_result(f"the output of tool {self.name!r} does not match its outputSchema: {problem}")
        return result


class ToolRegistry:
    """Tools by name, in registration order."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._definitions: list[dict[str, Any]] = []
        self._cache = NO_CACHE
        #: True once a tool with a ``rate_limit`` of its own is registered.
        self.rate_limited = False
        #: True once a tool that may run as a task is registered (the server then has tasks).
        self.tasks = False

    def __len__(self) -> int:
        return len(self._tools)

    def add(self, tool: Tool) -> Tool:
        """Register ``tool``; raises ValueError when the name is taken."""
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        if tool.rate_limit is not None:
            self.rate_limited = True
        if tool.task != FORBIDDEN:
            self.tasks = True
        # Built once here, not on every tools/list: a tool does not change once registered.
        self._definitions.append(tool.definition())
        self._cache = combine(t.cache for t in self._tools.values())
        return tool

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def cache_hint(self) -> CacheHint:
        """The caching hint of ``tools/list``: the most cautious of the tools' hints."""
        return self._cache

    def definitions(self) -> list[dict[str, Any]]:
        """Every tool as ``tools/list`` shows it, in registration order (do not modify)."""
        return self._definitions


def _ended(ctx: Any, exc: BaseException) -> None:
    """Note on the call's exchange that ``exc`` ended the handler (the audit record's outcome);
    a ``ctx`` that is no :class:`Context` (a direct call of :meth:`Tool.run`) has none."""
    if isinstance(ctx, Context):
        ctx._ended_by(exc)


def _check_object_schema(tool: str, which: str, schema: Any) -> None:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError(f"tool {tool!r}: {which} must be a JSON Schema with type 'object'")
    jsonschema.Draft202012Validator.check_schema(schema)


def _check_annotations(tool: str, annotations: dict[str, Any] | None) -> dict[str, Any]:
    if annotations is None:
        return {}
    for key, value in annotations.items():
        kind = ANNOTATION_KEYS.get(key)
        if kind is None:
            raise ValueError(f"tool {tool!r}: unknown annotation {key!r}; known: {', '.join(ANNOTATION_KEYS)}")
        if not isinstance(value, kind):
            raise ValueError(f"tool {tool!r}: annotation {key!r} must be a {kind.__name__}, got {value!r}")
    return dict(annotations)


def _first_error(validator: SchemaValidator, instance: Any) -> ValidationError | None:
    """The most telling validation error, or None when ``instance`` is valid."""
    # The common case, valid arguments, needs no ranking of errors.
    if validator.is_valid(instance):
        return None
    error: ValidationError | None = best_match(validator.iter_errors(instance))
    while error is not None and error.validator in ("anyOf", "oneOf") and error.context:
        # For ``X | None`` the null branch only says the value is not null; X's error says why.
        telling = [e for e in error.context if e.schema != {"type": "null"}]
        if not telling:
            break
        error = best_match(telling)
    return error


def _describe(error: ValidationError, noun: str) -> str:
    """A validation error as text whose subject is the top-level ``noun`` at fault."""
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        # The schema holding additionalProperties is an object schema.
        schema = cast(Mapping[str, Any], error.schema)
        known = schema.get("properties", {})
        patterns = schema.get("patternProperties", {})
        extra = [k for k in error.instance if k not in known and not any(re.search(p, k) for p in patterns)]
        problem = f"unexpected {_plural('field' if path else noun, extra)} {', '.join(map(repr, extra))}"
    elif error.validator == "required" and isinstance(error.instance, dict):
        missing = [k for k in cast(list[str], error.validator_value) if k not in error.instance]
        problem = f"missing required {_plural('field' if path else noun, missing)} {', '.join(map(repr, missing))}"
    else:
        problem = error.message
    if not path:
        return problem
    return f"{_where(noun, path)}: {problem}"


def _where(noun: str, path: list[Any]) -> str:
    """``argument 'item'``, or ``argument 'item' at item.tags[0]`` below the top level."""
    return f"{noun} {path[0]!r}" + (f" at {path_text(path)}" if len(path) > 1 else "")


def _refusal(name: str, exc: Exception) -> str:
    """What a conversion of argument ``name`` refused, as :func:`_describe` words it."""
    if isinstance(exc, ModelInvalid):
        return "; ".join(f"{_where('argument', [name, *loc])}: {text}" for loc, text in exc.problems)
    return f"argument {name!r}: {exc}"


def _plural(noun: str, items: list[Any]) -> str:
    return noun if len(items) == 1 else f"{noun}s"
