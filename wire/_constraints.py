"""Constraints on numbers, declared in annotations and kept as data.

An endpoint says which numbers it takes the way it says their type: ``seconds:
Annotated[float, Range(min=0)]`` (or the alias :data:`NonNegativeFloat`). The server checks the
constraint with the type, before the handler runs, and answers ``arguments-invalid`` naming the
argument and the rule; ``system/describe`` lists it as data (``{"min": 0, "finite": true}``),
which is also what a JSON Schema (``minimum``, ``exclusiveMaximum``, …) is made of.

Every float is finite unless its annotation says otherwise (``Range(finite=False)``): NaN and
±infinity have no JSON spelling, JSON Schema's ``number`` excludes them, and no built-in
endpoint means anything by them (a NaN sleep, a limit of infinity). So a plain ``float``
parameter refuses them as an explicit ``Range()`` would.

Sans-IO: plain data and pure functions.
"""

from __future__ import annotations

import math
import types
import typing
from typing import Annotated, Any

import attrs

__all__ = [
    "FINITE",
    "NonNegativeFloat",
    "NonNegativeInt",
    "PositiveInt",
    "Range",
    "range_of",
]


def _bound(instance: Range, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if type(value) not in (int, float) or not math.isfinite(value):
        raise TypeError(f"Range.{attribute.name} must be a finite int or float, got {value!r}")


@attrs.frozen(kw_only=True)
class Range:
    """The values a number may take: an interval, and whether NaN and ±infinity are allowed.

    Used as ``typing.Annotated[int, Range(min=1, max=1000)]`` or ``Annotated[float,
    Range(min=0, min_exclusive=True)]``. The bounds apply to integers and floats alike.
    """

    #: Smallest allowed value (``None``: no lower bound).
    min: int | float | None = attrs.field(default=None, validator=_bound)
    #: Largest allowed value (``None``: no upper bound).
    max: int | float | None = attrs.field(default=None, validator=_bound)
    #: Whether ``min`` itself is excluded (``> min`` rather than ``>= min``).
    min_exclusive: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    #: Whether ``max`` itself is excluded (``< max`` rather than ``<= max``).
    max_exclusive: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    #: Whether NaN and ±infinity are refused (floats only; every float is finite by default).
    finite: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))

    def __attrs_post_init__(self) -> None:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"Range: min {self.min!r} is above max {self.max!r}")

    def problem(self, value: int | float, *, number: bool) -> str | None:
        """Why ``value`` is outside this range (``must be >= 1, got 0``), or ``None``.

        ``number`` says the value was declared a float (the rule then names finiteness).
        """
        low, high = self.min, self.max
        if (
            (self.finite and type(value) is float and not math.isfinite(value))
            or (low is not None and not (value > low if self.min_exclusive else value >= low))
            or (high is not None and not (value < high if self.max_exclusive else value <= high))
        ):
            return f"must be {self.rule(number=number)}, got {value!r}"
        return None

    def rule(self, *, number: bool) -> str:
        """The constraint in words: ``a finite number >= 0``, ``between 1 and 1000``."""
        if (
            self.min is not None
            and self.max is not None
            and not (self.min_exclusive or self.max_exclusive)
        ):
            bounds = f"between {self.min!r} and {self.max!r}"
        else:
            parts = []
            if self.min is not None:
                parts.append(f"{'>' if self.min_exclusive else '>='} {self.min!r}")
            if self.max is not None:
                parts.append(f"{'<' if self.max_exclusive else '<='} {self.max!r}")
            bounds = " and ".join(parts)
        if number and self.finite:
            return f"a finite number {bounds}".rstrip()
        return bounds or "any number"

    def to_wire(self, *, number: bool) -> dict[str, Any]:
        """The constraint as data (``system/describe``): only the keys that constrain.

        ``min``/``max`` when bounded, ``minExclusive``/``maxExclusive`` when true, and
        ``finite`` for numbers (floats); integers are always finite.
        """
        out: dict[str, Any] = {}
        if self.min is not None:
            out["min"] = self.min
            if self.min_exclusive:
                out["minExclusive"] = True
        if self.max is not None:
            out["max"] = self.max
            if self.max_exclusive:
                out["maxExclusive"] = True
        if number:
            out["finite"] = self.finite
        return out


#: A float ``>= 0``, finite (durations, budgets).
NonNegativeFloat = Annotated[float, Range(min=0)]
#: An integer ``>= 0`` (counts, lengths, depths).
NonNegativeInt = Annotated[int, Range(min=0)]
#: An integer ``>= 1`` (limits, sizes).
PositiveInt = Annotated[int, Range(min=1)]

#: The implied constraint of a plain ``float``.
FINITE = Range()


def range_of(annotation: Any) -> tuple[Range, bool] | None:
    """The number constraint of ``annotation`` and whether it is a float, or ``None``.

    Looks through an optional (``X | None``) to the number inside; a plain ``float`` has the
    implied :data:`FINITE`, a plain ``int`` none. Other annotations have none.
    """
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        found = [r for a in typing.get_args(annotation) if (r := range_of(a)) is not None]
        return found[0] if len(found) == 1 else None
    if origin is Annotated:
        base, *metadata = typing.get_args(annotation)
        ranges = [m for m in metadata if isinstance(m, Range)]
        if base in (int, float) and ranges:
            return ranges[-1], base is float
        return range_of(base)
    if annotation is float:
        return FINITE, True
    return None
