"""Endpoint declarations the server dispatches on and the client builds proxies from.

``wire`` knows nothing of agents: a parameter may be marked as a *lookup* (``agent`` → wire
``agentId``), and resolving it is the job of whoever registers the handler (the actor system).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

import attrs

from wire._codes import ErrorCode
from wire._constraints import range_of
from wire._errors import ArgumentsInvalidError
from wire._schema import DIALECT, SchemaBuilder, codes_of
from wire._shapes import (
    ShapeError,
    converter_for,
    describe_record,
    describe_type,
    records_in,
)

__all__ = [
    "CALL_ERRORS",
    "DEFERRED",
    "LOOKUP_ERRORS",
    "REQUIRED",
    "CallContext",
    "Endpoint",
    "EndpointSpec",
    "Handler",
    "Param",
    "Registry",
    "describe_endpoints",
]


class _Required(enum.Enum):
    """Marks a parameter without a default (``attrs.NOTHING`` would mean "no attrs default")."""

    REQUIRED = "required"


REQUIRED = _Required.REQUIRED


class _Deferred(enum.Enum):
    """What :attr:`Endpoint.run_inline` returns when the call cannot complete right now."""

    DEFERRED = "deferred"


DEFERRED = _Deferred.DEFERRED


#: The codes any call may end with, whatever its endpoint (``docs/protocol.md`` § Errors).
CALL_ERRORS: tuple[ErrorCode, ...] = (
    ErrorCode.ARGUMENTS_INVALID,
    ErrorCode.CANCELLED,
    ErrorCode.DEADLINE_EXCEEDED,
    ErrorCode.OVERLOADED,
    ErrorCode.TOO_LARGE,
    ErrorCode.UNAUTHORIZED,
    ErrorCode.UNAVAILABLE,
    ErrorCode.PEER_LOST,
    ErrorCode.INTERNAL,
)

#: The codes a call that names an agent may end with besides :data:`CALL_ERRORS`.
LOOKUP_ERRORS: tuple[ErrorCode, ...] = (
    ErrorCode.SESSION_NOT_FOUND,
    ErrorCode.AGENT_BUSY,
    ErrorCode.MOVED,
)


@attrs.frozen(kw_only=True)
class Param:
    """One named parameter of an endpoint."""

    #: Python name in the handler's signature (``agent``).
    name: str
    #: Name on the wire (``agentId``).
    wire_name: str
    #: Annotation the wire value must match (a lookup's wire value is a string).
    annotation: Any = Any
    #: Default if the caller omits it; ``REQUIRED`` means required.
    default: Any = REQUIRED
    #: Lookup kind (``"agent"``) if the runtime resolves this value to a live object.
    lookup: str | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@attrs.frozen(kw_only=True)
class EndpointSpec:
    """Everything about an endpoint but its implementation."""

    #: ``namespace/method``.
    name: str
    params: tuple[Param, ...] = ()
    result: Any = Any
    #: Whether the call changes state (runs exclusively on its actor).
    mutates: bool = False
    doc: str = ""
    #: The codes the endpoint answers with besides the generic ones (a literal union, an enum,
    #: or a union of them); ``None``: only the generic ones.
    errors: Any = None

    @property
    def error_codes(self) -> list[str]:
        """Every code a call of this endpoint may end with: generic, lookup, its own."""
        generic = [*CALL_ERRORS, *(LOOKUP_ERRORS if any(p.lookup for p in self.params) else ())]
        return list(dict.fromkeys([*map(str, generic), *codes_of(self.errors)]))

    @property
    def namespace(self) -> str:
        return self.name.split("/", 1)[0]

    @property
    def method(self) -> str:
        return self.name.split("/", 1)[1]

    def describe(self, schemas: SchemaBuilder | None = None) -> dict[str, Any]:
        """This endpoint in ``system/describe``; its schemas' named types go to ``schemas``."""
        schemas = schemas if schemas is not None else SchemaBuilder()
        return {
            "name": self.name,
            "params": [
                {
                    "name": p.wire_name,
                    "type": describe_type(p.annotation),
                    "required": p.required,
                    **({"lookup": p.lookup} if p.lookup else {}),
                    **_constraints(p.annotation),
                }
                for p in self.params
            ],
            "result": describe_type(self.result),
            "mutates": self.mutates,
            "doc": self.doc,
            "errors": self.error_codes,
            "schema": {
                "args": schemas.object_of(
                    [(p.wire_name, p.annotation, p.required) for p in self.params]
                ),
                "result": schemas.schema(self.result),
                **({"errors": schemas.schema(self.errors)} if self.errors is not None else {}),
            },
        }


def _constraints(annotation: Any) -> dict[str, Any]:
    """``{"constraints": {...}}`` for a number parameter (``Range.to_wire``), else ``{}``."""
    found = range_of(annotation)
    if found is None:
        return {}
    allowed, is_float = found
    return {"constraints": allowed.to_wire(number=is_float)}


class CallContext(Protocol):
    """What a handler learns about its call, and how it reports admission."""

    @property
    def peer(self) -> bytes: ...

    @property
    def call_id(self) -> int: ...

    def running(self) -> None:
        """Report that the call left its queue and began executing (for ``cancelled`` errors)."""

    @property
    def reservation(self) -> Any:
        """What the endpoint's ``on_arrival`` returned for this call (``None`` without one)."""


#: ``handler(context, args)``; ``args`` maps Python parameter names to validated values.
Handler = Callable[[CallContext, dict[str, Any]], Awaitable[Any]]


@attrs.frozen(kw_only=True)
class Endpoint:
    spec: EndpointSpec
    handler: Handler
    #: If true the handler calls ``context.running()`` itself (after its own admission).
    admits_itself: bool = False
    #: Called synchronously with the bound arguments when the call arrives, in arrival order,
    #: before its task starts (tasks start in no particular order); the result reaches the
    #: handler as ``context.reservation``. The actor system reserves mailbox turns here.
    on_arrival: Callable[[dict[str, Any]], Any] | None = None
    #: Optional synchronous fast path: ``run_inline(context, args)`` runs the whole call in the
    #: server's receive path, without a task or a cancel scope, and returns its value; or it
    #: returns :data:`DEFERRED` (having done nothing) when the call cannot complete right now
    #: (an actor not yet active, a mailbox turn that must wait), and the call takes the task
    #: path (``on_arrival``, then ``handler``). It cannot be cancelled while it runs, so only
    #: handlers that never block belong here.
    run_inline: Callable[[CallContext, dict[str, Any]], Any] | None = None
    #: Per parameter, compiled once: ``(wire name, Python name, converter, default)``.
    _plan: tuple[tuple[str, str, Callable[[Any, str], Any], Any], ...] = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: tuple(
                (p.wire_name, p.name, converter_for(p.annotation), p.default)
                for p in self.spec.params
            ),
            takes_self=True,
        ),
    )

    def bind(self, wire_args: Mapping[str, Any]) -> dict[str, Any]:
        """Validate wire arguments and map them to Python parameter names.

        Raises:
            ArgumentsInvalidError: a missing, unknown or mistyped argument (``details.path``).
        """
        bound: dict[str, Any] = {}
        seen = 0
        for wire_name, name, convert, default in self._plan:
            if wire_name in wire_args:
                seen += 1
                try:
                    bound[name] = convert(wire_args[wire_name], wire_name)
                except ShapeError as exc:
                    raise ArgumentsInvalidError(
                        f"{self.spec.name}: {exc}", details={"path": exc.path}
                    ) from None
            elif default is REQUIRED:
                raise ArgumentsInvalidError(
                    f"{self.spec.name}: missing argument {wire_name!r}",
                    details={"path": wire_name},
                )
            else:
                bound[name] = default
        if seen != len(wire_args):
            known = {p.wire_name for p in self.spec.params}
            extra = sorted(str(k) for k in wire_args if k not in known)
            raise ArgumentsInvalidError(
                f"{self.spec.name}: unknown argument(s) {', '.join(map(repr, extra))}",
                details={"path": extra[0] if extra else ""},
            )
        return bound


class Registry:
    """Endpoints by name; what a server dispatches on."""

    def __init__(self, endpoints: Iterable[Endpoint] = ()) -> None:
        self._endpoints: dict[str, Endpoint] = {}
        #: The describe() result, built once (it resolves every record type's annotations)
        #: and dropped when an endpoint is added.
        self._description: dict[str, Any] | None = None
        for endpoint in endpoints:
            self.add(endpoint)

    def add(self, endpoint: Endpoint) -> None:
        name = endpoint.spec.name
        if name in self._endpoints:
            raise ValueError(f"endpoint {name!r} is registered twice")
        if name.count("/") != 1 or not all(name.split("/")):
            raise ValueError(f"endpoint name {name!r} must be 'namespace/method'")
        self._endpoints[name] = endpoint
        self._description = None

    def get(self, name: str) -> Endpoint | None:
        return self._endpoints.get(name)

    def __iter__(self) -> Any:
        return iter(self._endpoints.values())

    def describe(self) -> dict[str, Any]:
        """The ``system/describe`` result: endpoints and the record types they use.

        Built on the first call and kept until an endpoint is added; callers must not modify
        it.
        """
        if self._description is None:
            self._description = self._build_description()
        return self._description

    def _build_description(self) -> dict[str, Any]:
        return describe_endpoints(e.spec for e in self)


def describe_endpoints(specs: Iterable[EndpointSpec]) -> dict[str, Any]:
    """The ``system/describe`` result for ``specs``, without a server (for generators).

    ``endpoints`` by name, each with readable ``params``/``result`` spellings and its
    ``schema`` (``args``, ``result``, ``errors``) referring to the shared ``$defs``; ``types``
    spells the records readably.
    """
    ordered = sorted(specs, key=lambda spec: spec.name)
    records: list[type] = []
    for spec in ordered:
        for annotation in (spec.result, *(p.annotation for p in spec.params)):
            for record in records_in(annotation):
                if record not in records:
                    records.append(record)
    schemas = SchemaBuilder()
    endpoints = [spec.describe(schemas) for spec in ordered]
    return {
        "endpoints": endpoints,
        "types": {r.__name__: describe_record(r) for r in records},
        "$schema": DIALECT,
        "$defs": schemas.defs,
    }
