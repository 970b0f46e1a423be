"""``@Remote`` declarations, mirroring the DSH decorators.

A service class derives from :class:`RemoteService` and names its service key; the key is also
its wire namespace unless ``namespace=`` says otherwise. Each method marked ``@Remote`` (or
``@Remote("alias")``) becomes the endpoint ``namespace/alias``. So upstream's::

    @Remote('candidates') remoteExportCandidates(agent, query, signal)

reads here as::

    class SessionReferenceResolver(RemoteService, key="sessionReferenceResolver"):
        @Remote("candidates")
        async def remote_export_candidates(self, agent: Agent, query: str = "") -> list[...]:
            ...

A parameter named ``agent`` is a *lookup*: on the wire it is ``agentId`` (a session id) and the
runtime resolves it to the live agent actor. Cancellation needs no parameter (upstream's trailing
``signal``): the handler runs in a trio cancel scope that the caller's cancel reaches. Other
parameters travel under their camelCase names and are checked against their annotations,
number constraints included (``seconds: NonNegativeFloat``, ``limit: Annotated[int,
Range(min=1, max=1000)]``, see ``wire.Range``); a plain ``float`` must be finite.

A ``@Remote`` method may also be a plain ``def``. When its actor is active and its mailbox turn
is free on arrival, the server runs it *inline*, in its receive path: no task, no cancel scope,
about a third of the server's cost of an ``async def`` call. Such a method therefore cannot be
cancelled while it runs (a cancel that arrives later finds the call finished) and must never
block: it holds up every other call of the process while it runs. When the call has to wait
(a cold actor, a busy mailbox) it runs in a task like any other, admitted in arrival order.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar, overload

import attrs

from wire import EndpointSpec, Param
from wire._endpoints import REQUIRED
from wire._shapes import camel_case

__all__ = ["AGENT_PARAMETER", "Remote", "RemoteMethod", "RemoteService"]

#: The parameter name that marks an agent lookup (wire name ``agentId``).
AGENT_PARAMETER = "agent"

F = TypeVar("F", bound=Callable[..., Any])


@attrs.frozen
class RemoteMethod:
    """The marker ``@Remote`` leaves on a method."""

    #: Endpoint method name (the alias, or the Python name).
    name: str | None
    #: Whether the method changes the agent's state (runs exclusively, in arrival order).
    mutates: bool
    #: The error codes it answers with besides the generic ones (``EndpointSpec.errors``).
    errors: Any = None


_MARKER = "__remote_method__"


@overload
def Remote(function: F, /) -> F: ...


@overload
def Remote(
    alias: str | None = None, /, *, mutates: bool = False, errors: Any = None
) -> Callable[[F], F]: ...


def Remote(target: Any = None, /, *, mutates: bool = False, errors: Any = None) -> Any:
    """Mark a method as a remote endpoint.

    ``@Remote``, ``@Remote("alias")``, ``@Remote(mutates=True)``. Read-only methods (the
    default) may run concurrently on one agent; ``mutates=True`` methods run exclusively, in
    arrival order. ``errors`` names the codes the method answers with besides the generic
    ones, as a literal union or an enum (``errors=SessionReferenceErrorCode``); they are
    listed with the endpoint in ``system/describe``. An ``async def`` method runs in its own
    task and can be cancelled at any checkpoint; a plain ``def`` method may run inline and
    cannot be cancelled once it started (see the module docstring): use it only for work that
    never blocks.
    """

    def mark(function: F, alias: str | None) -> F:
        if not inspect.isfunction(function) or (
            inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function)
        ):
            raise TypeError(
                f"@Remote method {getattr(function, '__qualname__', function)!r} must be a "
                "plain or async function, not a generator"
            )
        setattr(function, _MARKER, RemoteMethod(name=alias, mutates=mutates, errors=errors))
        return function

    if callable(target):
        return mark(target, None)
    if target is not None and not isinstance(target, str):
        raise TypeError("@Remote takes an optional alias string")
    return lambda function: mark(function, target)


class RemoteService:
    """Base of services whose ``@Remote`` methods are served over the wire.

    Subclass with ``class X(RemoteService, key="serviceKey", namespace=None)``; the class then
    carries ``__remote_endpoints__`` (its endpoint declarations) for the server and for client
    proxies alike.
    """

    __service_key__: typing.ClassVar[str]
    __namespace__: typing.ClassVar[str]
    __remote_endpoints__: typing.ClassVar[tuple[EndpointSpec, ...]] = ()
    #: Python method name for each endpoint name.
    __remote_implementations__: typing.ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, *, key: str | None = None, namespace: str | None = None) -> None:
        super().__init_subclass__()
        cls.__service_key__ = (
            key or getattr(cls, "__service_key__", None) or _lower_first(cls.__name__)
        )
        cls.__namespace__ = namespace or cls.__service_key__
        specs: list[EndpointSpec] = []
        implementations: dict[str, str] = {}
        for attribute, function in inspect.getmembers(cls, inspect.isfunction):
            marker = getattr(function, _MARKER, None)
            if not isinstance(marker, RemoteMethod):
                continue
            spec = _endpoint_spec(cls.__namespace__, marker, function)
            specs.append(spec)
            implementations[spec.name] = attribute
        cls.__remote_endpoints__ = tuple(sorted(specs, key=lambda s: s.name))
        cls.__remote_implementations__ = implementations


def _endpoint_spec(namespace: str, marker: RemoteMethod, function: Any) -> EndpointSpec:
    name = f"{namespace}/{marker.name or function.__name__}"
    hints = typing.get_type_hints(function, include_extras=True)
    params: list[Param] = []
    for parameter in list(inspect.signature(function).parameters.values())[1:]:
        if parameter.kind not in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
            raise TypeError(f"{name}: parameter {parameter.name!r} must be a named parameter")
        default = REQUIRED if parameter.default is parameter.empty else parameter.default
        if parameter.name == AGENT_PARAMETER:
            params.append(
                Param(name=AGENT_PARAMETER, wire_name="agentId", annotation=str, lookup="agent")
            )
            continue
        if parameter.name not in hints:
            raise TypeError(f"{name}: parameter {parameter.name!r} needs a type annotation")
        params.append(
            Param(
                name=parameter.name,
                wire_name=camel_case(parameter.name),
                annotation=hints[parameter.name],
                default=default,
            )
        )
    doc = inspect.getdoc(function) or ""
    return EndpointSpec(
        name=name,
        params=tuple(params),
        result=hints.get("return", Any),
        mutates=marker.mutates,
        doc=doc.split("\n\n", 1)[0],
        errors=marker.errors,
    )


def _lower_first(name: str) -> str:
    return name[:1].lower() + name[1:]
