"""pydantic (v2) types in a tool's schemas and an elicitation's form, where the application uses them.

zemcp never imports pydantic on its own: a pydantic type can reach a signature, a return
annotation or ``ctx.elicit`` only after the application imported pydantic, so every check here
first looks for the module in ``sys.modules`` and answers "not pydantic" at once when it is
absent (pydantic is the optional extra ``zemcp[pydantic]``).

The types that are pydantic's, found by :func:`involves`: a ``BaseModel`` subclass or pydantic
dataclass, a type of pydantic's own modules (``EmailStr``, ``AnyUrl`` ...), ``Annotated``
metadata of pydantic or annotated_types (``Field(description=..., ge=...)``,
``AfterValidator``, ``annotated_types.Gt``), and the standard types JSON has no type for that
pydantic maps to strings (:data:`STANDARD_TYPES`: ``datetime``, ``date``, ``time``, ``UUID``,
``Decimal``), anywhere inside an annotation. For them pydantic
makes the JSON Schema (``TypeAdapter.json_schema``, 2020-12, named definitions under
``$defs``) and validates the JSON values (``TypeAdapter.validate_json``); the standard-library
mapping of :mod:`zemcp.core.type_schemas` does the rest. Pure Python: no HTTP here.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import inspect
import json
import sys
import typing
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    from pydantic import TypeAdapter

#: The standard types pydantic gives a schema, validation and JSON form (ISO 8601 and RFC 4122
#: text; a Decimal as a number or numeric string, sent as a string), where pydantic is imported.
STANDARD_TYPES = (datetime.datetime, datetime.date, datetime.time, uuid.UUID, decimal.Decimal)
#: The packages whose types and ``Annotated`` metadata pydantic handles.
_PACKAGES = ("pydantic", "pydantic_core", "annotated_types")
#: Distinct annotations whose ``TypeAdapter`` is kept (building one compiles a validator).
ADAPTER_CACHE_SIZE = 256
#: The longest ``repr`` of a refused value an error message quotes.
_QUOTE = 60


class ModelInvalid(ValueError):
    """pydantic refused a value: each problem's location and pydantic's message.

    Attributes:
        problems: ``[(location, message)]``; a location is a tuple of field names (as the
            JSON has them) and list indexes, ``()`` for the value itself; the message ends with
            the refused value, ``(got -1)``, when that is a string, number, boolean or null.
    """

    def __init__(self, problems: list[tuple[tuple[str | int, ...], str]]):
        self.problems = problems
        super().__init__("; ".join(f"at {path_text(loc)}: {text}" if loc else text for loc, text in problems))


def path_text(location: tuple[str | int, ...] | list[str | int]) -> str:
    """A location as zemcp's messages write it: ``item.tags[0]``."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in location).lstrip(".")


def involves(annotation: Any) -> bool:
    """True when pydantic must make the schema of ``annotation`` and validate its values.

    Args:
        annotation: a declared type, as in a signature (``Annotated`` allowed).
    Returns:
        False at once when the application has not imported pydantic.
    """
    if sys.modules.get("pydantic") is None:
        return False
    return _involves(annotation)


def _involves(tp: Any) -> bool:
    if typing.get_origin(tp) is typing.Annotated:
        return any(_is_pydantic(type(item)) for item in tp.__metadata__) or _involves(tp.__origin__)
    if isinstance(tp, type) and (
        tp in STANDARD_TYPES or _is_pydantic(tp) or is_model(tp) or _is_pydantic_dataclass(tp)
    ):
        return True
    # Literal's arguments are values, not types: none of them is pydantic's.
    return any(_involves(arg) for arg in typing.get_args(tp))


def _is_pydantic(cls: type) -> bool:
    return cls.__module__.split(".", 1)[0] in _PACKAGES


def _is_pydantic_dataclass(tp: type) -> bool:
    from pydantic.dataclasses import is_pydantic_dataclass

    return is_pydantic_dataclass(tp)


def is_model(tp: Any) -> bool:
    """True when ``tp`` is a pydantic ``BaseModel`` subclass (False when pydantic is not imported)."""
    if sys.modules.get("pydantic") is None or not isinstance(tp, type):
        return False
    from pydantic import BaseModel

    return issubclass(tp, BaseModel)


def is_model_instance(value: Any) -> bool:
    """True when ``value`` is an instance of a pydantic ``BaseModel`` (False when pydantic is not imported)."""
    return is_model(type(value))


def dump(value: Any) -> Any:
    """The JSON form of a model instance: ``model_dump(mode="json", by_alias=True)``, the
    shape its serialization schema describes (aliases, computed fields)."""
    return value.model_dump(mode="json", by_alias=True)


def standard_json(value: Any) -> str | None:
    """The JSON form pydantic gives a value of one of :data:`STANDARD_TYPES` (``"2026-12-02"``
    for a date, a Decimal as a string); None for any other value, or when pydantic is not imported."""
    if sys.modules.get("pydantic") is None or type(value) not in STANDARD_TYPES:
        return None
    return cast(str, _adapter(type(value)).dump_python(value, mode="json"))


def json_schema(annotation: Any, mode: Literal["validation", "serialization"], where: str) -> dict[str, Any]:
    """pydantic's JSON Schema of ``annotation``.

    A root that is only a ``$ref`` (a model that refers to itself) is replaced by the
    definition it names, so that a model's schema is always an object schema; the named
    definitions stay under the root's ``$defs``, where every ``#/$defs/...`` reference
    resolves once the schema is the root of a document (see :func:`zemcp.core.schemas.lift_defs`
    for a schema that becomes part of another).

    Args:
        annotation: the declared type.
        mode: ``"validation"`` for what a client sends (arguments, elicitation answers),
            ``"serialization"`` for what the handler returns.
        where: what declares it, for messages (``"f() parameter 'item'"``).
    Returns:
        the schema, a new dict the caller may change.
    Raises:
        TypeError: pydantic cannot make a schema of it; the message names ``where``.
    """
    from pydantic import PydanticUserError

    try:
        schema = _adapter(annotation).json_schema(mode=mode)
    except PydanticUserError as exc:
        raise TypeError(f"{where}: pydantic cannot make a JSON Schema of {annotation!r}: {exc.message}") from None
    ref = schema.get("$ref")
    defs = schema.get("$defs", {})
    if isinstance(ref, str) and ref.startswith("#/$defs/") and set(schema) == {"$ref", "$defs"}:
        schema = {**defs[ref.removeprefix("#/$defs/")], "$defs": defs}
    return schema


def validate(annotation: Any, value: Any) -> Any:
    """The value of ``annotation`` that pydantic makes of a JSON value (in JSON mode, as sent).

    Args:
        annotation: the declared type.
        value: the JSON value (a tool argument, an elicitation's accepted content).
    Returns:
        the validated value: a model instance for a model.
    Raises:
        ModelInvalid: pydantic refused it; every problem with its location.
    """
    from pydantic import ValidationError

    try:
        return _adapter(annotation).validate_json(json.dumps(value))
    except ValidationError as exc:
        raise ModelInvalid([(tuple(e["loc"]), _message(e)) for e in exc.errors(include_url=False)]) from None


def _message(error: Any) -> str:
    value = error.get("input")
    if value is None or isinstance(value, (str, int, float)):
        quoted = repr(value)
        return f"{error['msg']} (got {quoted if len(quoted) <= _QUOTE else quoted[:_QUOTE] + '...'})"
    return str(error["msg"])


def parameter_default(annotation: Any, default: Any, where: str) -> tuple[Any, Callable[[], Any] | None]:
    """A tool parameter's default: the signature's, or that of a pydantic ``Field`` in its annotation.

    ``Annotated[int, Field(default=7)]`` (or ``default_factory=...``) makes the parameter
    optional, as pydantic makes such a model field optional: the handler gets the default when
    the argument is left out. A ``Field(...)`` as the signature default is refused: it would be
    passed to the handler itself.

    Args:
        annotation: the parameter's annotation.
        default: its signature default, ``inspect.Parameter.empty`` for none.
        where: what declares it, for messages (``"f() parameter 'k'"``).
    Returns:
        ``(default, factory)``: the default value (``inspect.Parameter.empty`` for none) and the
        ``default_factory`` that makes one per call (None for none); at most one is set.
    Raises:
        TypeError: a ``Field(...)`` as the signature default, or a default given both in the
            signature and in ``Field``; the message shows the form to use instead.
    """
    if sys.modules.get("pydantic") is None:
        return default, None
    from pydantic.fields import FieldInfo
    from pydantic_core import PydanticUndefined

    if isinstance(default, FieldInfo):
        raise TypeError(
            f"{where}: a pydantic Field(...) cannot be the default of a tool argument; put it in the "
            "annotation and the default after it: Annotated[int, Field(ge=1)] = 10"
        )
    value, factory = inspect.Parameter.empty, None
    # pydantic merges several Field(...) of one annotation, the later ones over the earlier.
    for info in _field_infos(annotation):
        if info.default_factory is not None:
            value, factory = inspect.Parameter.empty, info.default_factory
        elif info.default is not PydanticUndefined:
            value, factory = info.default, None
    if value is inspect.Parameter.empty and factory is None:
        return default, None
    if default is not inspect.Parameter.empty:
        raise TypeError(
            f"{where}: the default is given twice, in Field(...) and after the annotation; keep one of them"
        )
    return value, cast("Callable[[], Any] | None", factory)


def check_parameter_field(annotation: Any, where: str) -> None:
    """Refuse a pydantic alias on a tool parameter (``Annotated[str, Field(alias="X")]``).

    An argument is named by its parameter: pydantic applies aliases to a model's fields only
    (outside a model it warns that the alias has no effect), so the schema would list the
    parameter's name and refuse the alias the author meant.

    Raises:
        TypeError: ``alias``, ``validation_alias`` or ``serialization_alias`` is set; the
            message says what to do instead.
    """
    for info in _field_infos(annotation):
        alias = info.alias or info.validation_alias or info.serialization_alias
        if alias is not None:
            raise TypeError(
                f"{where}: a pydantic alias ({alias!r}) cannot name a tool argument, which is named by its "
                "parameter; rename the parameter, or give an explicit input_schema and take the arguments "
                "as **kwargs (for a name that is not a Python identifier)"
            )


def _field_infos(annotation: Any) -> list[Any]:
    """The pydantic ``FieldInfo`` items of an ``Annotated`` annotation's metadata (none when
    pydantic is not imported)."""
    if sys.modules.get("pydantic") is None or typing.get_origin(annotation) is not typing.Annotated:
        return []
    from pydantic.fields import FieldInfo

    return [item for item in annotation.__metadata__ if isinstance(item, FieldInfo)]


def _adapter(annotation: Any) -> TypeAdapter[Any]:
    try:
        hash(annotation)
    except TypeError:
        # Annotated metadata may be a dict of keywords: such annotations are built anew.
        return _new_adapter(annotation)
    return _cached_adapter(annotation)


@functools.lru_cache(maxsize=ADAPTER_CACHE_SIZE)
def _cached_adapter(annotation: Any) -> TypeAdapter[Any]:
    return _new_adapter(annotation)


def _new_adapter(annotation: Any) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(annotation)
