"""JSON Schema generation from annotations (``wire/_schema.py``) and what describe carries."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import attrs
import jsonschema
import pytest

from wire import (
    HANDLER_CHECKED,
    SCHEMA_DIALECT,
    ArgumentsInvalidError,
    Endpoint,
    EndpointSpec,
    Named,
    Param,
    Range,
    SchemaBuilder,
    describe_endpoints,
)
from wire._shapes import ShapeError, converter_for


class Colour(enum.StrEnum):
    """A colour."""

    RED = "red"
    BLUE = "blue"


@attrs.frozen(kw_only=True)
class Point:
    """A point on the plane.

    Second paragraph, not in the description.
    """

    x: int
    y_offset: Annotated[float, Range(min=0, max=1, max_exclusive=True)] = 0.0
    label: str | None = None


class Tagged(TypedDict):
    kind: Literal["tagged"]
    points: list[Point]
    note: NotRequired[str]
    colour: Colour


Shape = Annotated[Point | Tagged, Named("Shape")]


def build(annotation: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    builder = SchemaBuilder()
    return builder.schema(annotation), builder.defs


def validate(schema: dict[str, Any], defs: dict[str, Any], value: Any) -> None:
    jsonschema.Draft202012Validator({"$defs": defs, **schema}).validate(value)


def test_attrs_record_lists_wire_names_required_fields_and_ranges() -> None:
    """An attrs class becomes a named object: camelCase properties, required fields without
    defaults, optional ``X | None = None`` as ``X``, the Range as minimum/exclusiveMaximum."""
    schema, defs = build(Point)
    assert schema == {"$ref": "#/$defs/Point"}
    point = defs["Point"]
    assert list(point["properties"]) == ["x", "yOffset", "label"]
    assert point["required"] == ["x"]
    assert point["additionalProperties"] is False
    assert point["properties"]["yOffset"] == {
        "type": "number",
        "minimum": 0,
        "exclusiveMaximum": 1,
    }
    assert point["properties"]["label"] == {"type": "string"}
    assert point["description"] == "A point on the plane."


def test_typed_dict_keeps_key_order_and_not_required_keys() -> None:
    """A TypedDict's optional keys are left out of ``required``, even under postponed
    annotations, and nested records and enums are named once in ``$defs``."""
    _, defs = build(list[Tagged])
    tagged = defs["Tagged"]
    assert list(tagged["properties"]) == ["kind", "points", "note", "colour"]
    assert tagged["required"] == ["kind", "points", "colour"]
    assert tagged["properties"]["kind"] == {"const": "tagged"}
    assert tagged["properties"]["points"] == {"type": "array", "items": {"$ref": "#/$defs/Point"}}
    assert defs["Colour"] == {
        "title": "Colour",
        "enum": ["red", "blue"],
        "description": "A colour.",
    }


def test_named_union_is_one_definition() -> None:
    """``Named`` puts a union alias in ``$defs`` under its name."""
    schema, defs = build(dict[str, Shape])
    assert schema == {"type": "object", "additionalProperties": {"$ref": "#/$defs/Shape"}}
    assert defs["Shape"] == {"anyOf": [{"$ref": "#/$defs/Point"}, {"$ref": "#/$defs/Tagged"}]}


def test_scalars_tuples_and_any() -> None:
    """Scalars map to JSON types, bytes to msgpack bin, fixed tuples to prefixItems."""
    assert build(bytes)[0] == {"x-msgpack": "bin"}
    assert build(Any)[0] == {}
    assert build(None)[0] == {"type": "null"}
    assert build(tuple[int, str])[0] == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "items": False,
        "minItems": 2,
    }
    assert build(tuple[int, ...])[0] == {"type": "array", "items": {"type": "integer"}}


def test_two_types_with_one_name_are_refused() -> None:
    """Two different classes named alike cannot share a ``$defs`` entry."""

    @attrs.frozen
    class Point:
        z: int

    builder = SchemaBuilder()
    builder.schema(globals()["Point"])
    with pytest.raises(TypeError, match="named 'Point'"):
        builder.schema(Point)


def test_schemas_accept_what_the_converters_accept() -> None:
    """Values the wire converter accepts validate against the generated schema, and values
    it refuses for their shape fail it too."""
    schema, defs = build(Shape)
    good = [
        {"x": 1},
        {"x": 1, "yOffset": 0.5, "label": "a"},
        {"kind": "tagged", "points": [{"x": 2}], "colour": "red"},
        {"kind": "tagged", "points": [], "note": "n", "colour": "blue"},
    ]
    bad = [
        {"x": "1"},
        {"x": 1, "yOffset": 1.0},
        {"x": 1, "extra": True},
        {"kind": "tagged", "points": [], "colour": "green"},
        {"kind": "tagged", "colour": "red"},
    ]
    convert = converter_for(Shape)
    for value in good:
        convert(value, "")
        validate(schema, defs, value)
    for value in bad:
        with pytest.raises(ShapeError):
            convert(value, "")
        with pytest.raises(jsonschema.ValidationError):
            validate(schema, defs, value)


def test_handler_checked_declares_the_type_but_checks_only_the_outer_kind() -> None:
    """A HANDLER_CHECKED argument is described by its full type, while the server passes
    malformed elements through to the handler and refuses only a wrong outer kind."""
    spec = EndpointSpec(
        name="shapes/put",
        params=(
            Param(
                name="shapes",
                wire_name="shapes",
                annotation=Annotated[list[Shape], HANDLER_CHECKED],
            ),
        ),
    )

    async def handler(context: Any, args: dict[str, Any]) -> Any:
        return None

    endpoint = Endpoint(spec=spec, handler=handler)
    assert endpoint.bind({"shapes": [{"nonsense": 1}, 3]}) == {"shapes": [{"nonsense": 1}, 3]}
    with pytest.raises(ArgumentsInvalidError, match="expected an array"):
        endpoint.bind({"shapes": "no"})
    args = spec.describe()["schema"]["args"]
    assert args["properties"]["shapes"] == {"type": "array", "items": {"$ref": "#/$defs/Shape"}}


def test_describe_is_a_valid_2020_12_document_with_error_codes() -> None:
    """describe's schemas are valid 2020-12 schemas, each endpoint lists its error codes, and
    an endpoint's own codes are described by their annotation."""
    specs = [
        EndpointSpec(
            name="shapes/get",
            params=(Param(name="agent", wire_name="agentId", annotation=str, lookup="agent"),),
            result=list[Shape],
            errors=Literal["SHAPE_MISSING"],
        ),
        EndpointSpec(name="shapes/count", result=int),
    ]
    described = describe_endpoints(specs)
    assert described["$schema"] == SCHEMA_DIALECT
    by_name = {e["name"]: e for e in described["endpoints"]}
    assert by_name["shapes/get"]["errors"][-4:] == [
        "session-not-found",
        "agent-busy",
        "moved",
        "SHAPE_MISSING",
    ]
    assert "session-not-found" not in by_name["shapes/count"]["errors"]
    assert by_name["shapes/get"]["schema"]["errors"] == {"const": "SHAPE_MISSING"}
    for endpoint in described["endpoints"]:
        for part in endpoint["schema"].values():
            document = {"$schema": SCHEMA_DIALECT, "$defs": described["$defs"], **part}
            jsonschema.Draft202012Validator.check_schema(document)
