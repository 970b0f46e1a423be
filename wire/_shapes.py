"""Values on the wire ⇄ Python values shaped by type annotations.

The server checks call arguments against a handler's annotations and the client checks results
against the declared result type, both with :func:`converter_for`: an annotation is compiled
once into a function that validates (and, for attrs classes and enums, builds) the value. attrs
instances travel as maps keyed by their wire names: the field's ``metadata[WIRE_NAME]`` if set,
else the camelCase form of the field name (``display_title`` → ``displayTitle``). A number's
constraint (``Annotated[float, Range(min=0)]``, see ``_constraints``) is checked with its type,
and a plain ``float`` must be finite.
"""

from __future__ import annotations

import enum
import functools
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from wire._constraints import FINITE, Range
from wire._marks import HANDLER_CHECKED, erased, is_typed_dict, named_in, typed_dict_fields

__all__ = [
    "WIRE_NAME",
    "ShapeError",
    "camel_case",
    "converter_for",
    "describe_type",
    "field_wire_name",
    "unstructure",
    "unstructure_default",
]

#: ``attrs.field(metadata={WIRE_NAME: "x"})`` overrides the camelCase wire name of a field.
WIRE_NAME = "wire.name"

Converter = Callable[[Any, str], Any]


class ShapeError(ValueError):
    """A value does not have the declared shape.

    Attributes:
        path: Where in the value, e.g. ``references[2].sessionId``.
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


class _OutOfRange(ShapeError):
    """A value of the right type outside its declared :class:`Range`."""


def camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def field_wire_name(field: attrs.Attribute[Any]) -> str:
    """An attrs field's name on the wire: ``metadata[WIRE_NAME]``, else its camelCase."""
    override = field.metadata.get(WIRE_NAME)
    return override if isinstance(override, str) else camel_case(field.alias or field.name)


def unstructure_default(value: Any) -> Any:
    """msgpack ``default`` hook: attrs instances become maps, enums their values."""
    if attrs.has(type(value)):
        return {
            field_wire_name(f): getattr(value, f.name)
            for f in attrs.fields(type(value))
            if not _is_omitted(f, getattr(value, f.name))
        }
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"cannot send a value of type {type(value).__name__}")


def _is_omitted(field: attrs.Attribute[Any], value: Any) -> bool:
    # Optional fields that hold None are left out, the way the JSON contract omits absent keys
    # (e.g. a candidate's `cwd` when unknown).
    return value is None and field.default is None


def unstructure(value: Any) -> Any:
    """Turn ``value`` into plain maps, arrays and scalars (what msgpack and JSON carry)."""
    if isinstance(value, dict):
        return {k: unstructure(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [unstructure(v) for v in value]
    if isinstance(value, str | int | float | bool | bytes) or value is None:
        return value
    return unstructure(unstructure_default(value))


@functools.cache
def converter_for(annotation: Any) -> Converter:
    """Compile ``annotation`` into ``convert(value, path) -> value`` raising :class:`ShapeError`."""
    if annotation in (Any, object, typing.Any):
        return _identity
    if annotation is None or annotation is type(None):
        return _exact_none
    if annotation is bool:
        return _scalar(bool, "a boolean")
    if annotation is int:
        return _integer
    if annotation is float:
        return _finite_number
    if annotation is str:
        return _scalar(str, "a string")
    if annotation is bytes:
        return _scalar(bytes, "binary")
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        if HANDLER_CHECKED in args[1:]:
            return converter_for(erased(args[0]))
        return _annotated(args[0], args[1:])
    if origin in (typing.Union, types.UnionType):
        return _union([converter_for(a) for a in args], describe_type(annotation))
    if origin is typing.Literal:
        return _literal(args)
    if origin in (list, Sequence, tuple) and (origin is not tuple or args[-1:] == (...,)):
        return _array(converter_for(args[0] if args else Any), origin is tuple)
    if origin is tuple:
        return _fixed_tuple([converter_for(a) for a in args])
    if origin in (dict, Mapping):
        return _map(converter_for(args[1] if args else Any))
    if origin is None and isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return _enum(annotation)
        if attrs.has(annotation):
            return _attrs_class(annotation)
        if is_typed_dict(annotation):
            return _typed_dict(annotation)
    raise TypeError(f"no wire shape for annotation {annotation!r}")


def _identity(value: Any, path: str) -> Any:
    return value


def _exact_none(value: Any, path: str) -> Any:
    if value is not None:
        raise ShapeError(path, f"expected nil, got {_kind(value)}")
    return None


def _scalar(cls: type, expected: str) -> Converter:
    def convert(value: Any, path: str) -> Any:
        if type(value) is not cls:
            raise ShapeError(path, f"expected {expected}, got {_kind(value)}")
        return value

    return convert


def _integer(value: Any, path: str) -> Any:
    if type(value) is not int:
        raise ShapeError(path, f"expected an integer, got {_kind(value)}")
    return value


def _number(value: Any, path: str) -> Any:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise ShapeError(path, f"expected a number, got {_kind(value)}")


def _finite_number(value: Any, path: str) -> Any:
    """A plain ``float``: finite unless its annotation says otherwise (``_constraints``)."""
    if type(value) is float:
        if math.isfinite(value):
            return value
        raise _OutOfRange(path, f"must be {FINITE.rule(number=True)}, got {value!r}")
    return _number(value, path)


def _annotated(base: Any, metadata: tuple[Any, ...]) -> Converter:
    ranges = [m for m in metadata if isinstance(m, Range)]
    if not ranges:
        return converter_for(base)
    if base is int:
        return _ranged(_integer, ranges[-1], number=False)
    if base is float:
        return _ranged(_number, ranges[-1], number=True)
    raise TypeError(f"Range applies to int or float, not {base!r}")


def _ranged(convert_number: Converter, allowed: Range, *, number: bool) -> Converter:
    def convert(value: Any, path: str) -> Any:
        value = convert_number(value, path)
        problem = allowed.problem(value, number=number)
        if problem is not None:
            raise _OutOfRange(path, problem)
        return value

    return convert


def _union(options: list[Converter], expected: str) -> Converter:
    def convert(value: Any, path: str) -> Any:
        closest: ShapeError | None = None
        for option in options:
            try:
                return option(value, path)
            except _OutOfRange as exc:
                closest = closest or exc
            except ShapeError as exc:
                # An alternative that failed inside the value (a record's field) had the
                # right kind; its error says more than "expected A | B".
                if exc.path != path:
                    closest = closest or exc
        if closest is not None:
            raise closest
        raise ShapeError(path, f"expected {expected}, got {_kind(value)}")

    return convert


def _literal(allowed: tuple[Any, ...]) -> Converter:
    def convert(value: Any, path: str) -> Any:
        if value not in allowed or type(value) not in {type(a) for a in allowed}:
            raise ShapeError(path, f"expected one of {list(allowed)!r}, got {value!r}")
        return value

    return convert


def _array(item: Converter, as_tuple: bool) -> Converter:
    def convert(value: Any, path: str) -> Any:
        if not isinstance(value, list | tuple):
            raise ShapeError(path, f"expected an array, got {_kind(value)}")
        items = [item(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if as_tuple else items

    return convert


def _fixed_tuple(items: list[Converter]) -> Converter:
    def convert(value: Any, path: str) -> Any:
        if not isinstance(value, list | tuple) or len(value) != len(items):
            raise ShapeError(path, f"expected an array of {len(items)}, got {_kind(value)}")
        return tuple(
            c(v, f"{path}[{i}]") for i, (c, v) in enumerate(zip(items, value, strict=True))
        )

    return convert


def _map(item: Converter) -> Converter:
    def convert(value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise ShapeError(path, f"expected a map, got {_kind(value)}")
        out = {}
        for key, v in value.items():
            if not isinstance(key, str):
                raise ShapeError(path, f"map keys must be strings, got {_kind(key)}")
            out[key] = item(v, f"{path}.{key}" if path else key)
        return out

    return convert


def _enum(cls: type[enum.Enum]) -> Converter:
    def convert(value: Any, path: str) -> Any:
        try:
            return cls(value)
        except ValueError:
            allowed = [m.value for m in cls]
            raise ShapeError(path, f"expected one of {allowed!r}, got {value!r}") from None

    return convert


def _attrs_class(cls: type) -> Converter:
    hints = typing.get_type_hints(cls, include_extras=True)
    plan = [
        (
            field_wire_name(f),
            f.alias or f.name,
            converter_for(hints[f.name]),
            f.default is attrs.NOTHING,
        )
        for f in attrs.fields(cls)
        if f.init
    ]
    known = {wire for wire, *_ in plan}

    def convert(value: Any, path: str) -> Any:
        if attrs.has(type(value)) and isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise ShapeError(path, f"expected a map ({cls.__name__}), got {_kind(value)}")
        unknown = sorted(str(k) for k in value if k not in known)
        if unknown:
            raise ShapeError(path, f"unknown field(s) {', '.join(unknown)} for {cls.__name__}")
        kwargs = {}
        for wire, init_name, convert_field, required in plan:
            here = f"{path}.{wire}" if path else wire
            if wire in value:
                kwargs[init_name] = convert_field(value[wire], here)
            elif required:
                raise ShapeError(here, "missing required field")
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise ShapeError(path, str(exc)) from None

    return convert


def _typed_dict(cls: type) -> Converter:
    """A ``TypedDict``: a map with its required keys, no others; the value stays a dict."""
    fields = [
        (key, converter_for(hint), required) for key, hint, required in typed_dict_fields(cls)
    ]
    known = {key for key, _, _ in fields}

    def convert(value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise ShapeError(path, f"expected a map ({cls.__name__}), got {_kind(value)}")
        unknown = sorted(str(k) for k in value if k not in known)
        if unknown:
            raise ShapeError(path, f"unknown field(s) {', '.join(unknown)} for {cls.__name__}")
        out = {}
        for key, convert_field, required in fields:
            here = f"{path}.{key}" if path else key
            if key in value:
                out[key] = convert_field(value[key], here)
            elif required:
                raise ShapeError(here, "missing required field")
        # The sender's key order is kept: DSH records are compared byte for byte.
        return {key: out[key] for key in value}

    return convert


def describe_type(annotation: Any) -> str:
    """A readable, language-neutral spelling of an annotation, used by ``system/describe``."""
    if annotation in (Any, object, typing.Any):
        return "any"
    if annotation is None or annotation is type(None):
        return "nil"
    simple = {bool: "boolean", int: "integer", float: "number", str: "string", bytes: "binary"}
    if annotation in simple:
        return simple[annotation]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        # The constraint is listed beside the type, as data (``Range.to_wire``).
        return named_in(args[1:]) or describe_type(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(describe_type(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(repr(a).replace("'", '"') for a in args)
    if origin in (list, Sequence) or (origin is tuple and args[-1:] == (...,)):
        return f"array<{describe_type(args[0] if args else Any)}>"
    if origin is tuple:
        return f"[{', '.join(describe_type(a) for a in args)}]"
    if origin in (dict, Mapping):
        return f"map<string, {describe_type(args[1] if args else Any)}>"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(f'"{m.value}"' for m in annotation)
    if isinstance(annotation, type):
        return annotation.__name__
    return repr(annotation)


def describe_record(cls: type) -> dict[str, str]:
    """Field wire names → type spellings for a record (the ``types`` of describe)."""
    if is_typed_dict(cls):
        return {
            key + ("" if required else "?"): describe_type(hint)
            for key, hint, required in typed_dict_fields(cls)
        }
    hints = typing.get_type_hints(cls, include_extras=True)
    return {field_wire_name(f): describe_type(hints[f.name]) for f in attrs.fields(cls)}


def records_in(annotation: Any) -> list[type]:
    """Every attrs class reachable from ``annotation`` (for ``system/describe``)."""
    found: list[type] = []

    def visit(a: Any) -> None:
        if isinstance(a, type) and (attrs.has(a) or is_typed_dict(a)):
            if a in found:
                return
            found.append(a)
            for hint in typing.get_type_hints(a, include_extras=True).values():
                visit(hint)
            return
        for arg in typing.get_args(a):
            visit(arg)

    visit(annotation)
    return found


def _kind(value: object) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bytes):
        return "binary"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "a map"
    return type(value).__name__
