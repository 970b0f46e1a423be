"""Marks an annotation can carry (``Annotated[T, mark]``) for the wire's type descriptions.

- :class:`Named` gives a type alias (a union of records, a literal union) a name of its own in
  the JSON Schema ``$defs`` of ``system/describe`` and in the generated declarations, the way a
  TypeScript ``type ContentBlock = TextContent | …`` has one. Records and enums are named by
  their class already.
- :data:`HANDLER_CHECKED` says the handler checks the value itself, with its own error codes:
  the schema still declares the type, but the server checks only the outer kind of the value
  (an array, a string) and passes its contents through. DSH's ``prepare`` reports a malformed
  reference as ``SESSION_REFERENCE_INVALID_REFERENCE`` with upstream's exact message, which a
  generic ``arguments-invalid`` would pre-empt.
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Any

import attrs

__all__ = [
    "HANDLER_CHECKED",
    "Named",
    "erased",
    "is_record",
    "is_typed_dict",
    "named_in",
    "typed_dict_fields",
]


@attrs.frozen
class Named:
    """``Annotated[A | B, Named("Alias")]``: the alias's name in schemas and declarations."""

    name: str


class _HandlerChecked(enum.Enum):
    HANDLER_CHECKED = "handler-checked"


#: ``Annotated[list[SessionReferenceInput], HANDLER_CHECKED]``: declared for callers, checked
#: by the handler (see the module docstring).
HANDLER_CHECKED = _HandlerChecked.HANDLER_CHECKED


def named_in(metadata: tuple[Any, ...]) -> str | None:
    """The :class:`Named` name among ``Annotated`` metadata, if any."""
    names = [m.name for m in metadata if isinstance(m, Named)]
    return names[-1] if names else None


def is_typed_dict(annotation: Any) -> bool:
    return isinstance(annotation, type) and typing.is_typeddict(annotation)


def typed_dict_fields(cls: type) -> list[tuple[str, Any, bool]]:
    """A ``TypedDict``'s ``(key, annotation, required)`` in key order.

    ``Required``/``NotRequired`` are read from the evaluated annotations: under
    ``from __future__ import annotations`` Python 3.11's ``__required_keys__`` misses them.
    """
    required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
    fields = []
    for key, hint in typing.get_type_hints(cls, include_extras=True).items():
        required = key in required_keys
        while typing.get_origin(hint) in (typing.Required, typing.NotRequired):
            required = typing.get_origin(hint) is typing.Required
            hint = typing.get_args(hint)[0]
        fields.append((key, hint, required))
    return fields


def is_record(annotation: Any) -> bool:
    """An attrs class or a ``TypedDict``: a map with named fields."""
    return isinstance(annotation, type) and (attrs.has(annotation) or is_typed_dict(annotation))


def erased(annotation: Any) -> Any:
    """``annotation`` with every record, enum and literal inside it widened to ``Any``.

    What the server checks of a :data:`HANDLER_CHECKED` value: its outer kinds only
    (``list[SessionReferenceInput]`` → ``list[Any]``; ``str | list[ContentBlock]`` →
    ``str | list[Any]``).
    """
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return erased(args[0])
    if is_record(annotation) or origin is typing.Literal:
        return Any
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return Any
    if origin in (typing.Union, types.UnionType):
        options = [erased(a) for a in args]
        if any(o is Any for o in options):
            return Any
        return typing.Union[tuple(dict.fromkeys(options))]  # noqa: UP007 (built from a tuple)
    if origin is list:
        return list[erased(args[0]) if args else Any]  # type: ignore[misc]
    if origin is dict:
        return dict[str, erased(args[1]) if args else Any]  # type: ignore[misc]
    return annotation
