"""The supervisor's coordinator over the wire: ``cluster/*`` endpoints and `RemoteCoordinator`.

Workers are separate processes, so they reach the supervisor's `InProcessCoordinator` through
a private wire server (an ipc endpoint under the data directory). `RemoteCoordinator` is the
same `Coordinator` interface over a wire client, and passes the same contract suite. ``watch``
is a long poll: ``cluster/watch(after, wait)`` answers as soon as the revision passes
``after``, or with the unchanged view after ``wait`` seconds.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import trio

from actors.cluster._coordinator import (
    Claim,
    ClusterView,
    CoordinatorError,
    Lease,
    LeaseExpiredError,
    Member,
    MemberConflictError,
)
from actors.cluster._coordinator_local import InProcessCoordinator
from wire import ArgumentsInvalidError, CallContext, Client, Endpoint, EndpointSpec, Param

__all__ = ["RemoteCoordinator", "coordinator_endpoints"]

#: Longest a ``cluster/watch`` call waits before answering with an unchanged view (seconds).
#: Long: the connection's heartbeats already tell both sides the other is alive, and each
#: unchanged answer costs an idle cluster a full view's encoding and the worker's re-planning.
WATCH_WAIT = 30.0

_ERRORS: dict[str, type[CoordinatorError]] = {
    "lease-expired": LeaseExpiredError,
    "member-conflict": MemberConflictError,
}


def _refused(error: Exception) -> ArgumentsInvalidError:
    kind = next((k for k, cls in _ERRORS.items() if isinstance(error, cls)), "invalid")
    return ArgumentsInvalidError(str(error), details={"coordinatorError": kind})


def _spec(name: str, result: Any, *params: Param, mutates: bool = True) -> EndpointSpec:
    return EndpointSpec(name=name, params=params, result=result, mutates=mutates)


def _param(name: str, annotation: Any, wire_name: str | None = None) -> Param:
    return Param(name=name, wire_name=wire_name or name, annotation=annotation)


def coordinator_endpoints(coordinator: InProcessCoordinator) -> list[Endpoint]:
    """The ``cluster/*`` endpoints serving ``coordinator`` to workers."""

    async def join(context: CallContext, args: dict[str, Any]) -> Any:
        try:
            member = Member(worker_id=args["worker_id"], endpoint=args["endpoint"])
            return await coordinator.join(member, ttl=args["ttl"])
        except (CoordinatorError, ValueError) as exc:
            raise _refused(exc) from None

    async def keep_alive(context: CallContext, args: dict[str, Any]) -> Any:
        try:
            await coordinator.keep_alive(args["lease"])
        except CoordinatorError as exc:
            raise _refused(exc) from None

    async def leave(context: CallContext, args: dict[str, Any]) -> Any:
        await coordinator.leave(args["lease"])

    async def claim(context: CallContext, args: dict[str, Any]) -> Any:
        try:
            return await coordinator.claim(args["lease"], args["shard"])
        except (CoordinatorError, ValueError) as exc:
            raise _refused(exc) from None

    async def release(context: CallContext, args: dict[str, Any]) -> Any:
        return await coordinator.release(args["claim"])

    async def view(context: CallContext, args: dict[str, Any]) -> Any:
        return await coordinator.view()

    async def watch(context: CallContext, args: dict[str, Any]) -> Any:
        import trio

        with trio.move_on_after(min(float(args["wait"]), WATCH_WAIT)):
            return await coordinator.changed(args["after"])
        return coordinator.current()

    lease = _param("lease", Lease)
    return [
        Endpoint(
            spec=_spec(
                "cluster/join",
                Lease,
                _param("worker_id", str, "workerId"),
                _param("endpoint", str),
                _param("ttl", float),
            ),
            handler=join,
        ),
        Endpoint(spec=_spec("cluster/keepAlive", None, lease), handler=keep_alive),
        Endpoint(spec=_spec("cluster/leave", None, lease), handler=leave),
        Endpoint(
            spec=_spec("cluster/claim", Claim | None, lease, _param("shard", int)),
            handler=claim,
        ),
        Endpoint(spec=_spec("cluster/release", bool, _param("claim", Claim)), handler=release),
        Endpoint(spec=_spec("cluster/view", ClusterView, mutates=False), handler=view),
        Endpoint(
            spec=_spec(
                "cluster/watch",
                ClusterView,
                _param("after", int),
                _param("wait", float),
                mutates=False,
            ),
            handler=watch,
        ),
    ]


class RemoteCoordinator:
    """The `Coordinator` interface over a wire client connected to the supervisor.

    Args:
        client: An open client on the supervisor's control endpoint.
        shard_count: S, as the supervisor configured it.
    """

    def __init__(self, client: Client, shard_count: int) -> None:
        self._client = client
        self._shard_count = shard_count

    @property
    def shard_count(self) -> int:
        return self._shard_count

    async def _call(self, endpoint: str, args: dict[str, Any], result: Any) -> Any:
        try:
            return await self._client.call(endpoint, args, result=result)
        except ArgumentsInvalidError as exc:
            kind = exc.details.get("coordinatorError")
            if kind in _ERRORS:
                raise _ERRORS[kind](exc.message) from None
            if kind == "invalid":
                raise ValueError(exc.message) from None
            raise

    async def join(self, member: Member, *, ttl: float) -> Lease:
        args = {"workerId": member.worker_id, "endpoint": member.endpoint, "ttl": ttl}
        lease: Lease = await self._call("cluster/join", args, Lease)
        return lease

    async def keep_alive(self, lease: Lease) -> None:
        await self._call("cluster/keepAlive", {"lease": _wire(lease)}, None)

    async def leave(self, lease: Lease) -> None:
        await self._call("cluster/leave", {"lease": _wire(lease)}, None)

    async def claim(self, lease: Lease, shard: int) -> Claim | None:
        claim: Claim | None = await self._call(
            "cluster/claim", {"lease": _wire(lease), "shard": shard}, Claim | None
        )
        return claim

    async def bind(self, claim: Claim) -> None:
        """A no-op: the supervisor's coordinator records no storage bindings."""
        await trio.lowlevel.checkpoint()

    async def release(self, claim: Claim) -> bool:
        released: bool = await self._call("cluster/release", {"claim": _wire(claim)}, bool)
        return released

    async def view(self) -> ClusterView:
        view: ClusterView = await self._call("cluster/view", {}, ClusterView)
        return view

    async def watch(self, after: int = 0) -> AsyncGenerator[ClusterView, None]:
        while True:
            view: ClusterView = await self._call(
                "cluster/watch", {"after": after, "wait": WATCH_WAIT}, ClusterView
            )
            if view.revision > after:
                after = view.revision
                yield view


def _wire(record: Any) -> Any:
    from wire._shapes import unstructure

    return unstructure(record)
