"""JSON Schema (2020-12) for the values of the wire, generated from Python annotations.

``system/describe`` carries, for every endpoint, the schema of its arguments (one object), of
its result and of the error codes it can answer with; the records those schemas use (attrs
classes, ``TypedDict`` s, enums and :class:`~wire.Named` aliases) sit once in ``$defs`` under
their own names, so generated declarations (TypeScript, docs) name them the same way.

How Python annotations map:

- ``str``, ``bool``, ``None`` → ``string``, ``boolean``, ``null``; ``int`` → ``integer``;
  ``float`` → ``number``; a :class:`~wire.Range` adds ``minimum``/``maximum``/``exclusive…``
  (a float is finite: JSON has no NaN or infinity anyway); ``bytes`` → msgpack *bin*, which
  JSON Schema has no type for: ``{"x-msgpack": "bin"}``; ``Any`` → ``{}`` (anything).
- ``list[T]`` / ``tuple[T, ...]`` → ``array`` of ``T``; ``tuple[A, B]`` → ``prefixItems``;
  ``dict[str, T]`` → ``object`` with ``additionalProperties`` ``T``.
- ``Literal[...]`` and enums → ``const`` / ``enum``; unions → ``anyOf``.
- Records → ``object`` with ``properties`` under their wire names, ``required`` for the fields
  that have no default (attrs) or are required keys (``TypedDict``), no other properties. An
  attrs field ``X | None = None`` is optional and travels absent rather than nil, so its
  property is ``X``.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from wire._constraints import Range
from wire._marks import is_typed_dict, named_in, typed_dict_fields
from wire._shapes import field_wire_name

__all__ = ["DIALECT", "SchemaBuilder", "codes_of"]

#: The JSON Schema dialect of every schema ``system/describe`` gives.
DIALECT = "https://json-schema.org/draft/2020-12/schema"

_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bytes: {"x-msgpack": "bin"},
    type(None): {"type": "null"},
}


class SchemaBuilder:
    """Builds schemas that refer to one shared ``$defs``.

    Raises:
        TypeError: an annotation with no wire shape, or two different types under one name.
    """

    def __init__(self) -> None:
        #: Named schemas by name, in the order first met.
        self.defs: dict[str, dict[str, Any]] = {}
        self._named: dict[str, Any] = {}

    def schema(self, annotation: Any) -> dict[str, Any]:
        """The schema of ``annotation``; named types become ``$ref`` s into :attr:`defs`."""
        if annotation in (Any, object):
            return {}
        if annotation is None:
            annotation = type(None)
        if annotation in _SCALARS:
            return dict(_SCALARS[annotation])
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin is typing.Annotated:
            return self._annotated(args[0], args[1:])
        if origin in (typing.Union, types.UnionType):
            return {"anyOf": [self.schema(a) for a in args]}
        if origin is typing.Literal:
            return _literal(args)
        if origin in (list, Sequence) or (origin is tuple and args[-1:] == (...,)):
            return {"type": "array", "items": self.schema(args[0] if args else Any)}
        if origin is tuple:
            return {
                "type": "array",
                "prefixItems": [self.schema(a) for a in args],
                "items": False,
                "minItems": len(args),
            }
        if origin in (dict, Mapping):
            return {"type": "object", "additionalProperties": self.schema(args[1] if args else Any)}
        if isinstance(annotation, type):
            if issubclass(annotation, enum.Enum):
                return self._ref(annotation.__name__, annotation, lambda: _enum(annotation))
            if attrs.has(annotation):
                return self._ref(annotation.__name__, annotation, lambda: self._attrs(annotation))
            if is_typed_dict(annotation):
                return self._ref(
                    annotation.__name__, annotation, lambda: self._typed_dict(annotation)
                )
        raise TypeError(f"no JSON Schema for annotation {annotation!r}")

    def object_of(
        self, fields: Sequence[tuple[str, Any, bool]], *, title: str = ""
    ) -> dict[str, Any]:
        """An object schema from ``(name, annotation, required)`` fields."""
        properties = {name: self.schema(annotation) for name, annotation, _ in fields}
        required = [name for name, _, is_required in fields if is_required]
        out: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            out["required"] = required
        out["additionalProperties"] = False
        if title:
            out["title"] = title
        return out

    def _annotated(self, base: Any, metadata: tuple[Any, ...]) -> dict[str, Any]:
        name = named_in(metadata)
        if name is not None:
            return self._ref(name, (base, metadata), lambda: self.schema(base))
        schema = self.schema(base)
        for mark in metadata:
            if isinstance(mark, Range):
                schema.update(_range(mark))
        return schema

    def _ref(
        self, name: str, owner: Any, build: typing.Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        known = self._named.get(name)
        if known is None:
            self._named[name] = owner
            self.defs[name] = {}  # taken before building: records may refer to themselves
            self.defs[name] = build()
        elif known != owner:
            raise TypeError(f"two different types are both named {name!r} on the wire")
        return {"$ref": f"#/$defs/{name}"}

    def _attrs(self, cls: type) -> dict[str, Any]:
        hints = typing.get_type_hints(cls, include_extras=True)
        fields = []
        for field in attrs.fields(cls):
            if not field.init:
                continue
            hint = hints[field.name]
            if field.default is None:
                hint = _without_none(hint)
            fields.append((field_wire_name(field), hint, field.default is attrs.NOTHING))
        return self.object_of(fields, title=cls.__name__) | _description(cls)

    def _typed_dict(self, cls: type) -> dict[str, Any]:
        return self.object_of(typed_dict_fields(cls), title=cls.__name__) | _description(cls)


def codes_of(annotation: Any) -> list[str]:
    """The strings a literal union, an enum or a union of them allows (error code sets)."""
    if annotation is None:
        return []
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return codes_of(args[0])
    if origin is typing.Literal:
        return [str(v.value if isinstance(v, enum.Enum) else v) for v in args]
    if origin in (typing.Union, types.UnionType):
        return [code for a in args for code in codes_of(a)]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [str(m.value) for m in annotation]
    raise TypeError(f"not a set of codes: {annotation!r}")


def _without_none(annotation: Any) -> Any:
    """``X | None`` → ``X`` (an attrs field whose ``None`` travels as an absent key)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        return typing.Union[tuple(rest)] if len(rest) > 1 else rest[0]  # noqa: UP007
    return annotation


def _literal(values: tuple[Any, ...]) -> dict[str, Any]:
    plain = [v.value if isinstance(v, enum.Enum) else v for v in values]
    return {"const": plain[0]} if len(plain) == 1 else {"enum": plain}


def _enum(cls: type[enum.Enum]) -> dict[str, Any]:
    return {"title": cls.__name__, "enum": [m.value for m in cls]} | _description(cls)


def _range(allowed: Range) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if allowed.min is not None:
        out["exclusiveMinimum" if allowed.min_exclusive else "minimum"] = allowed.min
    if allowed.max is not None:
        out["exclusiveMaximum" if allowed.max_exclusive else "maximum"] = allowed.max
    return out


def _description(cls: type) -> dict[str, Any]:
    """The first paragraph of the class's own docstring, if it has one."""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or not doc.strip():
        return {}
    return {"description": inspect.cleandoc(doc).split("\n\n", 1)[0].replace("\n", " ")}
