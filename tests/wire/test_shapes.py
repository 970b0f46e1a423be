"""Annotations compiled into wire-value checks and builders."""

from __future__ import annotations

import enum
from typing import Any, Literal

import attrs
import pytest

from wire import WIRE_NAME, ShapeError
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
