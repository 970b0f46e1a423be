"""Annotations compiled into wire-value checks and builders."""

from __future__ import annotations

import enum
import math
import sys
from typing import Annotated, Any, Literal

import attrs
import pytest

from wire import (
    WIRE_NAME,
    EndpointSpec,
    NonNegativeFloat,
    NonNegativeInt,
    Param,
    PositiveInt,
    Range,
    ShapeError,
)
from wire._shapes import converter_for, describe_type, unstructure


class Color(enum.StrEnum):
    RED = "red"


@attrs.frozen(kw_only=True)
class Inner:
    display_title: str | None = None
    size: int
    kind: str = attrs.field(default="file", metadata={WIRE_NAME: "type"})


@attrs.frozen(kw_only=True)
class Outer:
    items: list[Inner]
    color: Color = Color.RED


def convert(annotation: Any, value: Any) -> Any:
    return converter_for(annotation)(value, "arg")


@pytest.mark.parametrize(
    ("annotation", "value", "expected"),
    [
        (str, "s", "s"),
        (int, 3, 3),
        (float, 3, 3.0),
        (bool, True, True),
        (bytes, b"x", b"x"),
        (str | None, None, None),
        (list[int], [1, 2], [1, 2]),
        (tuple[int, ...], [1, 2], (1, 2)),
        (tuple[int, str], [1, "a"], (1, "a")),
        (dict[str, int], {"a": 1}, {"a": 1}),
        (Literal["a", "b"], "b", "b"),
        (Color, "red", Color.RED),
        (Any, {"x": [1]}, {"x": [1]}),
    ],
)
def test_accepts(annotation: Any, value: Any, expected: Any) -> None:
    """Values of the declared shape pass (and are built where needed)."""
    assert convert(annotation, value) == expected


@pytest.mark.parametrize(
    ("annotation", "value", "message"),
    [
        (str, 1, "arg: expected a string, got an integer"),
        (int, True, "arg: expected an integer, got a boolean"),
        (int, 1.5, "arg: expected an integer, got a number"),
        (float, "1", "arg: expected a number, got a string"),
        (list[int], [1, "x"], "arg[1]: expected an integer, got a string"),
        (dict[str, int], {"a": "b"}, "arg.a: expected an integer, got a string"),
        (Literal["a"], "c", "arg: expected one of ['a'], got 'c'"),
        (Color, "blue", "arg: expected one of ['red'], got 'blue'"),
        (str | None, 5, "arg: expected string | nil, got an integer"),
    ],
)
def test_rejects_with_path(annotation: Any, value: Any, message: str) -> None:
    """A mismatch names where in the value it is and what was expected."""
    with pytest.raises(ShapeError) as info:
        convert(annotation, value)
    assert str(info.value) == message


def test_attrs_records_use_wire_names() -> None:
    """Records travel as maps with camelCase (or overridden) names, omitting nil optionals."""
    record = Outer(items=[Inner(size=1), Inner(size=2, display_title="T", kind="dir")])
    wire = unstructure(record)
    assert wire == {
        "items": [{"size": 1, "type": "file"}, {"displayTitle": "T", "size": 2, "type": "dir"}],
        "color": "red",
    }
    assert convert(Outer, wire) == record


def test_attrs_record_errors() -> None:
    """Missing and unknown record fields are rejected with their path."""
    with pytest.raises(ShapeError, match=r"^arg\.items\[0\]\.size: missing required field$"):
        convert(Outer, {"items": [{}]})
    with pytest.raises(ShapeError, match=r"^arg\.items\[0\]: unknown field\(s\) bogus for Inner$"):
        convert(Outer, {"items": [{"size": 1, "bogus": 2}]})


def test_describe_type() -> None:
    """Annotations are spelled language-neutrally for system/describe."""
    assert describe_type(list[Inner] | None) == "array<Inner> | nil"
    assert describe_type(dict[str, float]) == "map<string, number>"
    assert describe_type(Literal["a", "b"]) == '"a" | "b"'


def test_unsupported_annotation() -> None:
    """An annotation with no wire shape is a TypeError at declaration time."""
    with pytest.raises(TypeError, match=r"^no wire shape for annotation"):
        converter_for(set[int])


class TestRange:
    """Number constraints declared with ``Annotated[..., Range(...)]``."""

    @pytest.mark.parametrize(
        ("annotation", "value", "expected"),
        [
            (NonNegativeFloat, 0, 0.0),
            (NonNegativeFloat, 2.5, 2.5),
            (NonNegativeFloat, sys.float_info.max, sys.float_info.max),
            (NonNegativeInt, 0, 0),
            (PositiveInt, 2**64 - 1, 2**64 - 1),
            (Annotated[int, Range(min=1, max=10)], 10, 10),
            (Annotated[float, Range(max=1, max_exclusive=True)], 0.5, 0.5),
            (Annotated[float, Range(finite=False)], math.inf, math.inf),
            (Annotated[int, Range(min=0)] | None, None, None),
            (float, -0.0, -0.0),
            (list[NonNegativeInt], [0, 1], [0, 1]),
        ],
    )
    def test_accepts_values_in_range(self, annotation: Any, value: Any, expected: Any) -> None:
        """Values inside the range, at its closed edges, and nil for an optional pass."""
        assert convert(annotation, value) == expected

    @pytest.mark.parametrize(
        ("annotation", "value", "message"),
        [
            (NonNegativeFloat, -1, "arg: must be a finite number >= 0, got -1.0"),
            (NonNegativeFloat, math.nan, "arg: must be a finite number >= 0, got nan"),
            (NonNegativeFloat, math.inf, "arg: must be a finite number >= 0, got inf"),
            (NonNegativeFloat, -0.5e-300, "arg: must be a finite number >= 0, got -5e-301"),
            (float, math.nan, "arg: must be a finite number, got nan"),
            (float, -math.inf, "arg: must be a finite number, got -inf"),
            (float | None, math.inf, "arg: must be a finite number, got inf"),
            (NonNegativeInt, -1, "arg: must be >= 0, got -1"),
            (PositiveInt, 0, "arg: must be >= 1, got 0"),
            (Annotated[int, Range(min=1, max=10)], 11, "arg: must be between 1 and 10, got 11"),
            (
                Annotated[float, Range(min=0, min_exclusive=True, max=1, max_exclusive=True)],
                1,
                "arg: must be a finite number > 0 and < 1, got 1.0",
            ),
            (Annotated[float, Range(min=0, finite=False)], math.nan, "arg: must be >= 0, got nan"),
            (Annotated[int, Range(min=0)] | None, -3, "arg: must be >= 0, got -3"),
            (NonNegativeInt, 1.0, "arg: expected an integer, got a number"),
            (NonNegativeFloat, True, "arg: expected a number, got a boolean"),
            (list[NonNegativeInt], [0, -1], "arg[1]: must be >= 0, got -1"),
        ],
    )
    def test_rejects_values_out_of_range(self, annotation: Any, value: Any, message: str) -> None:
        """A value outside its range is refused with its path, the rule and the value."""
        with pytest.raises(ShapeError) as info:
            convert(annotation, value)
        assert str(info.value) == message

    def test_record_fields_are_checked(self) -> None:
        """A constrained field of a record is checked where the record is converted."""

        @attrs.frozen(kw_only=True)
        class Page:
            limit: PositiveInt

        assert convert(Page, {"limit": 3}) == Page(limit=3)
        with pytest.raises(ShapeError, match=r"^arg\.limit: must be >= 1, got 0$"):
            convert(Page, {"limit": 0})
        with pytest.raises(ShapeError, match=r"^arg\.limit: must be >= 1, got 0$"):
            convert(Page | None, {"limit": 0})

    def test_describe_lists_constraints_as_data(self) -> None:
        """system/describe keeps the type spelling and adds the constraint as data."""
        spec = EndpointSpec(
            name="t/m",
            params=(
                Param(name="seconds", wire_name="seconds", annotation=NonNegativeFloat),
                Param(name="ratio", wire_name="ratio", annotation=float),
                Param(
                    name="limit",
                    wire_name="limit",
                    annotation=Annotated[int, Range(min=1, max=5, max_exclusive=True)] | None,
                ),
                Param(name="count", wire_name="count", annotation=int),
            ),
        )
        params = {p["name"]: p for p in spec.describe()["params"]}
        assert params["seconds"]["type"] == "number"
        assert params["seconds"]["constraints"] == {"min": 0, "finite": True}
        assert params["ratio"]["constraints"] == {"finite": True}
        assert params["limit"]["type"] == "integer | nil"
        assert params["limit"]["constraints"] == {"min": 1, "max": 5, "maxExclusive": True}
        assert "constraints" not in params["count"]

    @pytest.mark.parametrize(
        ("kwargs", "error"),
        [
            ({"min": 2, "max": 1}, ValueError),
            ({"min": math.nan}, TypeError),
            ({"max": True}, TypeError),
            ({"min": "0"}, TypeError),
        ],
    )
    def test_invalid_range_is_a_declaration_error(
        self, kwargs: dict[str, Any], error: type[Exception]
    ) -> None:
        """A range that admits nothing or has a non-numeric bound fails when declared."""
        with pytest.raises(error):
            Range(**kwargs)

    def test_range_on_a_non_number_is_a_declaration_error(self) -> None:
        """Range constrains numbers only; on another type it fails when compiled."""
        with pytest.raises(TypeError, match=r"^Range applies to int or float"):
            converter_for(Annotated[str, Range(min=0)])
