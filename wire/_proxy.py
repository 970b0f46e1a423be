"""Client-side proxies built from endpoint declarations.

A service class exposes its declarations as ``__remote_endpoints__`` (a tuple of
:class:`~wire._endpoints.EndpointSpec`; ``actors`` sets it for ``@Remote`` classes). Proxies map
Python calls onto wire calls: positional arguments follow the declared parameter order, keyword
arguments may use the Python or the wire name, and a lookup parameter (``agent``) takes the
agent id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from wire._endpoints import EndpointSpec, Param
from wire._errors import ArgumentsInvalidError, UnknownEndpointError

__all__ = ["AgentProxy", "ProxyTarget", "ServiceProxy", "specs_from_describe", "specs_of"]


class ProxyTarget(Protocol):
    """What a proxy needs of its client (`wire.Client` is one); proxies never see the socket."""

    async def call(
        self,
        endpoint: str,
        args: Mapping[str, Any] | None = None,
        *,
        supersede: str | None = None,
        result: Any = Any,
    ) -> Any: ...

    async def spec(self, endpoint: str) -> EndpointSpec | None: ...

    def remote(self, service: type) -> Any: ...


def specs_of(service: type) -> tuple[EndpointSpec, ...]:
    specs = getattr(service, "__remote_endpoints__", None)
    if not isinstance(specs, tuple):
        raise TypeError(f"{service.__name__} declares no remote endpoints")
    return specs


def specs_from_describe(described: dict[str, Any]) -> list[EndpointSpec]:
    """Declarations from a ``system/describe`` result (parameter types are not checked)."""
    return [
        EndpointSpec(
            name=e["name"],
            params=tuple(
                Param(
                    name=p["name"],
                    wire_name=p["name"],
                    lookup=p.get("lookup"),
                    **({} if p.get("required", True) else {"default": None}),
                )
                for p in e.get("params", ())
            ),
            mutates=bool(e.get("mutates", False)),
        )
        for e in described.get("endpoints", ())
    ]


def build_args(
    spec: EndpointSpec, agent_id: str | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Map a Python call onto wire-named arguments.

    Raises:
        ArgumentsInvalidError: too many positional arguments, or an unknown keyword.
    """
    wire: dict[str, Any] = {}
    positional = list(args)
    by_name = {p.name: p for p in spec.params} | {p.wire_name: p for p in spec.params}
    for param in spec.params:
        if param.lookup is not None and agent_id is not None:
            wire[param.wire_name] = agent_id
        elif positional:
            wire[param.wire_name] = positional.pop(0)
    if positional:
        raise ArgumentsInvalidError(f"{spec.name}: too many positional arguments")
    for key, value in kwargs.items():
        named = by_name.get(key)
        if named is None:
            raise ArgumentsInvalidError(f"{spec.name}: unknown argument {key!r}")
        if named.wire_name in wire:
            raise ArgumentsInvalidError(f"{spec.name}: argument {key!r} given twice")
        wire[named.wire_name] = value
    return wire


class _Method:
    __slots__ = ("_agent_id", "_client", "_endpoint", "_spec")

    def __init__(
        self, client: ProxyTarget, endpoint: str, spec: EndpointSpec | None, agent_id: str | None
    ) -> None:
        self._client = client
        self._endpoint = endpoint
        self._spec = spec
        self._agent_id = agent_id

    async def __call__(self, *args: Any, supersede: str | None = None, **kwargs: Any) -> Any:
        spec = self._spec or await self._client.spec(self._endpoint)
        if spec is None:
            raise UnknownEndpointError(f"unknown endpoint {self._endpoint!r}")
        wire = build_args(spec, self._agent_id, args, kwargs)
        return await self._client.call(
            self._endpoint, wire, supersede=supersede, result=spec.result
        )


class ServiceProxy:
    """``client.remote(Service)``: one awaitable attribute per declared method."""

    def __init__(self, client: ProxyTarget, service: type, agent_id: str | None = None) -> None:
        self._client = client
        self._methods = {spec.method: spec for spec in specs_of(service)}
        self._service = service
        self._agent_id = agent_id

    def __getattr__(self, method: str) -> _Method:
        spec = self._methods.get(method)
        if spec is None:
            raise AttributeError(f"{self._service.__name__} has no remote method {method!r}")
        return _Method(self._client, spec.name, spec, self._agent_id)

    def __dir__(self) -> list[str]:
        return sorted(self._methods)


class _Namespace:
    def __init__(self, client: ProxyTarget, namespace: str, agent_id: str) -> None:
        self._client = client
        self._namespace = namespace
        self._agent_id = agent_id

    def __getattr__(self, method: str) -> _Method:
        if method.startswith("_"):
            raise AttributeError(method)
        endpoint = f"{self._namespace}/{method}"
        return _Method(self._client, endpoint, None, self._agent_id)


class AgentProxy:
    """``client.agent(agent_id)``: namespaces as attributes, the agent id filled in."""

    def __init__(self, client: ProxyTarget, agent_id: str) -> None:
        self._client = client
        self.agent_id = agent_id

    def __getattr__(self, namespace: str) -> _Namespace:
        if namespace.startswith("_"):
            raise AttributeError(namespace)
        return _Namespace(self._client, namespace, self.agent_id)

    def remote(self, service: type) -> ServiceProxy:
        """Typed proxy for ``service`` on this agent: ``.candidates(query)``."""
        self._client.remote(service)
        return ServiceProxy(self._client, service, self.agent_id)
