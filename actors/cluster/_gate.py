"""A worker's shard gate: which shards it owns, and the calls in flight on each.

Every call for an agent passes the gate (wire calls through `gated_registry`, actor-to-actor
calls through the worker's router): a shard the worker does not own, or is handing over,
answers ``moved``; an owned shard counts the call until it ends, so a handover can wait until
the shard is drained before its sessions are closed and its claim released.

The gate also holds the worker's lease clock (`LeaseClock`, set by the keeper). Once the lease
may have expired (past its deadline minus the margin) the worker is *fenced*: reads of the
shards it held are still served, but calls that change a session answer ``unavailable``, and
`ShardGate.may_ack` refuses the ack of an append already under way (self-fencing).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from actors.cluster._coordinator import Claim, ClusterView
from actors.cluster._fencing import LeaseClock
from actors.cluster._shards import shard_of
from wire import CallContext, Endpoint, Registry
from wire._errors import MovedError, UnavailableError

__all__ = ["CREATE_ENDPOINT", "ClusterRegistry", "ShardGate", "gated_registry", "shard_map"]

#: The endpoint that creates a session: its ``sessionId`` names the shard the session lives in.
CREATE_ENDPOINT = "sessions/create"

#: Fresh ids tried before giving up on landing in an owned shard (each try is one BLAKE2b).
_FRESH_ID_TRIES = 10_000


def shard_map(view: ClusterView | None, *, self_id: str | None = None) -> dict[str, Any]:
    """The ``cluster`` entry of ``system/describe``: the shard map a client routes by."""
    if view is None:
        return {"revision": 0, "shardCount": 0, "hash": "blake2b-64", "workers": {}, "owners": []}
    owners = view.owners()
    return {
        "revision": view.revision,
        "shardCount": view.shard_count,
        "hash": "blake2b-64",
        "workers": {m.worker_id: m.endpoint for m in view.members},
        "owners": [c.worker_id if c is not None else None for c in owners],
        "epochs": [c.epoch if c is not None else None for c in owners],
        **({"self": self_id} if self_id is not None else {}),
    }


class ClusterRegistry(Registry):
    """A registry whose ``system/describe`` also carries the shard map (``cluster``) of the
    view ``view()`` returns (``self_id``: the worker it describes, if any)."""

    def __init__(
        self,
        view: Callable[[], ClusterView | None],
        *,
        self_id: str | None = None,
        endpoints: Any = (),
    ) -> None:
        super().__init__(endpoints)
        self._view = view
        self._self_id = self_id
        self._described: dict[str, Any] | None = None
        self._base: dict[str, Any] | None = None
        self._mapped: ClusterView | None = None

    def describe(self) -> dict[str, Any]:
        """The registry's description and the current shard map; the same object until
        either changes, so the server's encoding of it is reused (``system/describe``).

        The map is built again only when the view is another one (a view never changes):
        every describe call asks, and building it was most of a describe's own cost."""
        base, view = self.base_description(), self._view()
        known = self._described
        if known is not None and self._base is base and self._mapped is view:
            return known
        cluster = shard_map(view, self_id=self._self_id)
        if known is None or self._base is not base or known["cluster"] != cluster:
            self._described = known = {**base, "cluster": cluster}
        self._base, self._mapped = base, view
        return known

    def base_description(self) -> dict[str, Any]:
        """The description without the shard map."""
        return super().describe()


class ShardGate:
    """Ownership and in-flight calls per shard, for one worker.

    Args:
        worker_id: This worker's id (named in ``moved`` answers it gives about itself).
        shard_count: S.
    """

    def __init__(self, worker_id: str, shard_count: int) -> None:
        self.worker_id = worker_id
        self.shard_count = shard_count
        #: The latest cluster view seen (for the owner named in ``moved``).
        self.view: ClusterView | None = None
        self._owned: dict[int, Claim] = {}
        self._draining: set[int] = set()
        self._in_flight = [0] * shard_count
        self._drained: dict[int, trio.Event] = {}
        self._changed = trio.Event()
        #: The lease as the keeper last recorded it (None: no lease yet, or given up).
        self.lease: LeaseClock | None = None
        self._fenced = False

    # -- calls ------------------------------------------------------------------------------

    def enter(self, agent_id: str, *, mutates: bool = False) -> int:
        """Admit a call for ``agent_id``; return its shard (pass it to :meth:`leave`).

        Args:
            agent_id: The agent the call is for.
            mutates: Whether the call changes the session (refused while fenced).

        Raises:
            MovedError: the shard is not owned here, or is being handed over.
            UnavailableError: the call changes the session and the worker is fenced.
        """
        shard = shard_of(agent_id, self.shard_count)
        if shard not in self._owned or shard in self._draining:
            raise self.moved(agent_id, shard)
        if mutates and self._fenced:
            raise self.fenced_error(agent_id, shard)
        self._in_flight[shard] += 1
        return shard

    def leave(self, shard: int) -> None:
        self._in_flight[shard] -= 1
        if self._in_flight[shard] == 0 and shard in self._drained:
            self._drained.pop(shard).set()

    def owns(self, agent_id: str) -> bool:
        shard = shard_of(agent_id, self.shard_count)
        return shard in self._owned and shard not in self._draining

    def fresh_session_id(self) -> str:
        """A new session id (a UUID, as upstream's), in a shard this worker owns and is not
        handing over when it owns one (so the session is created where its shard lives);
        else any (the caller routes the create to its shard's owner)."""
        shards = {s for s in self._owned if s not in self._draining}
        if shards:
            # Not `shard_of` itself: random ids would only evict its cache.
            hashed = shard_of.__wrapped__
            for _ in range(_FRESH_ID_TRIES):
                session_id = str(uuid.uuid4())
                if hashed(session_id, self.shard_count) in shards:
                    return session_id
        return str(uuid.uuid4())

    def claim_of(self, shard: int) -> Claim | None:
        """The claim this worker holds on ``shard`` (also while handing it over), or None."""
        return self._owned.get(shard)

    def epoch_for(self, agent_id: str) -> int | None:
        """The fencing epoch of the claim on ``agent_id``'s shard, None when not owned here.

        A shard being handed over still answers its epoch: its calls in flight write under it.
        """
        claim = self._owned.get(shard_of(agent_id, self.shard_count))
        return claim.epoch if claim is not None else None

    # -- self-fencing -----------------------------------------------------------------------

    @property
    def fenced(self) -> bool:
        """Whether the worker fenced itself (writes refused, reads still served)."""
        return self._fenced

    def fence(self) -> None:
        """Stop every write: the lease may have expired, so another worker may own our shards."""
        if not self._fenced:
            self._fenced = True
            self._notify()

    def set_lease(self, lease: LeaseClock | None) -> None:
        """Record the keeper's lease clock (None: the lease is given up)."""
        self.lease = lease

    def unfence(self) -> None:
        """Writes are allowed again (a new lease was granted and nothing is owned yet)."""
        self._fenced = False
        self._notify()

    def may_ack(self, agent_id: str, now: float) -> bool:
        """Whether an append to ``agent_id`` may be acknowledged at ``now``: the shard is
        still owned here, the worker is not fenced, and the lease is safely before its deadline
        minus the margin (past it the worker fences itself: this call returns False from then
        on)."""
        shard = shard_of(agent_id, self.shard_count)
        if self._fenced or shard not in self._owned:
            return False
        if self.lease is None or not self.lease.may_ack(now):
            self.fence()
            return False
        return True

    def fenced_error(self, agent_id: str, shard: int) -> UnavailableError:
        """The ``unavailable`` answer to a write the fence refuses."""
        return UnavailableError(
            f"agent {agent_id!r} (shard {shard}): worker {self.worker_id!r} cannot confirm its "
            "cluster lease (the coordinator is unreachable or the lease expired); writes are "
            "refused until it rejoins",
            details={"agentId": agent_id, "shard": shard, "reason": "lease"},
        )

    def moved(self, agent_id: str, shard: int) -> MovedError:
        owner = self.view.owner(shard) if self.view is not None else None
        if owner is not None and owner.worker_id == self.worker_id:
            owner = None  # our own claim, being handed over: no owner to name yet
        return MovedError(
            f"agent {agent_id!r} is in shard {shard}, "
            + (f"owned by worker {owner.worker_id!r}" if owner else "which is being handed over"),
            details={
                "agentId": agent_id,
                "shard": shard,
                "owner": owner.worker_id if owner else None,
                "endpoint": owner.endpoint if owner else None,
                "revision": self.view.revision if self.view is not None else 0,
            },
        )

    # -- ownership --------------------------------------------------------------------------

    @property
    def owned(self) -> dict[int, Claim]:
        return dict(self._owned)

    def in_flight(self, shard: int) -> int:
        return self._in_flight[shard]

    def own(self, claim: Claim) -> None:
        self._owned[claim.shard] = claim
        self._draining.discard(claim.shard)
        self._notify()

    async def drain(self, shard: int, *, grace: float) -> bool:
        """Stop admitting calls for ``shard`` and wait (at most ``grace`` s) for those in
        flight; whether it drained."""
        self._draining.add(shard)
        self._notify()
        if self._in_flight[shard] == 0:
            await trio.lowlevel.checkpoint()
            return True
        event = self._drained.setdefault(shard, trio.Event())
        with trio.move_on_after(grace):
            await event.wait()
        return self._in_flight[shard] == 0

    def forget(self, shard: int) -> None:
        """The shard is no longer ours (released, or revoked by the coordinator)."""
        self._owned.pop(shard, None)
        self._draining.discard(shard)
        self._notify()

    def observe(self, view: ClusterView) -> list[int]:
        """Adopt ``view``; return the shards we thought we owned that it says we lost (the
        lease expired): they are dropped at once, so nothing more is admitted for them.

        A view older than one already seen is ignored, and a claim is never judged by a view
        whose revision is below its epoch: such a view predates the claim (a lagging watch),
        so the claim's absence from it means nothing. A shard being handed over whose claim is
        gone is forgotten but not reported: our own release got there first.
        """
        if self.view is not None and view.revision < self.view.revision:
            return []
        self.view = view
        lost = []
        for shard, claim in list(self._owned.items()):
            if view.revision < claim.epoch:
                continue
            current = view.owner(shard)
            if current is None or current.epoch != claim.epoch:
                if shard not in self._draining:
                    lost.append(shard)
                self.forget(shard)
        self._notify()
        return lost

    async def wait_changed(self, seconds: float) -> None:
        """Wait until ownership or the view changes (or ``seconds`` pass)."""
        with trio.move_on_after(seconds):
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


@attrs.frozen
class _Refused:
    error: MovedError | UnavailableError


@attrs.frozen
class _Admitted:
    shard: int
    inner: Any


class _InnerContext:
    """The wire context of a gated call, handing the inner endpoint its own reservation."""

    __slots__ = ("_outer", "reservation")

    def __init__(self, outer: CallContext, reservation: Any) -> None:
        self._outer = outer
        self.reservation = reservation

    @property
    def peer(self) -> bytes:
        return self._outer.peer

    @property
    def call_id(self) -> int:
        return self._outer.call_id

    def running(self) -> None:
        self._outer.running()


def _gated(endpoint: Endpoint, lookup: str, gate: ShardGate) -> Endpoint:
    inner_arrival = endpoint.on_arrival
    inner_handler = endpoint.handler
    inner_inline = endpoint.run_inline

    mutates = endpoint.spec.mutates

    def on_arrival(args: dict[str, Any]) -> Any:
        try:
            shard = gate.enter(args[lookup], mutates=mutates)
        except (MovedError, UnavailableError) as exc:
            return _Refused(exc)
        return _Admitted(shard, inner_arrival(args) if inner_arrival is not None else None)

    async def handler(context: CallContext, args: dict[str, Any]) -> Any:
        reservation = context.reservation
        if isinstance(reservation, _Refused):
            raise reservation.error
        if not isinstance(reservation, _Admitted):  # a call that skipped on_arrival
            reservation = _Admitted(gate.enter(args[lookup], mutates=mutates), None)
        try:
            return await inner_handler(_InnerContext(context, reservation.inner), args)
        finally:
            gate.leave(reservation.shard)

    def run_inline(context: CallContext, args: dict[str, Any]) -> Any:
        assert inner_inline is not None
        shard = gate.enter(args[lookup], mutates=mutates)
        try:
            return inner_inline(context, args)
        finally:
            gate.leave(shard)

    return attrs.evolve(
        endpoint,
        handler=handler,
        on_arrival=on_arrival,
        run_inline=run_inline if inner_inline is not None else None,
    )


def _routed_create(
    endpoint: Endpoint, route: Callable[[str, dict[str, Any]], Awaitable[Any]]
) -> Endpoint:
    """``sessions/create`` through the worker's router (``route(name, wire_args)``), which
    creates a session only in a shard this worker owns and sends others to their owner."""
    wire_names = {p.name: p.wire_name for p in endpoint.spec.params}

    async def handler(context: CallContext, args: dict[str, Any]) -> Any:
        wire_args = {wire_names[k]: v for k, v in args.items() if v is not None}
        return await route(endpoint.spec.name, wire_args)

    return attrs.evolve(endpoint, handler=handler, on_arrival=None, run_inline=None)


def gated_registry(
    registry: Registry,
    gate: ShardGate,
    *,
    route_creates: Callable[[str, dict[str, Any]], Awaitable[Any]] | None = None,
) -> ClusterRegistry:
    """A copy of ``registry`` whose agent endpoints pass ``gate``; its describe carries the
    shard map as this worker sees it. With ``route_creates`` (storage bindings are recorded),
    ``sessions/create`` goes through it, so a session is created only by its shard's owner,
    on the owner's storage."""
    out = ClusterRegistry(lambda: gate.view, self_id=gate.worker_id)
    for endpoint in registry:
        lookup = next((p.name for p in endpoint.spec.params if p.lookup == "agent"), None)
        if endpoint.spec.name.startswith("system/"):
            continue  # the server adds its own
        if route_creates is not None and endpoint.spec.name == CREATE_ENDPOINT:
            out.add(_routed_create(endpoint, route_creates))
            continue
        out.add(endpoint if lookup is None else _gated(endpoint, lookup, gate))
    return out
