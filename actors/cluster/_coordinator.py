"""The `Coordinator` interface: membership, shard claims with fencing epochs, and a watch.

One host ships `InProcessCoordinator` (held by the supervisor) and `RemoteCoordinator` (the
workers' view of it over the wire); the multi-host issue backs the same interface with etcd.
Every implementation must pass ``tests/actors/cluster/coordinator_contract.py``. The rules,
written so they map one to one onto etcd v3:

- **Revision.** Every change (join, leave, lease expiry, claim, release) increments one
  cluster-wide revision (etcd's header revision).
- **Leases.** `join` registers a member under a lease with a TTL (etcd: a lease and a
  ``members/<id>`` key attached to it). `keep_alive` extends it; a lease that is not kept alive
  for ``ttl`` seconds expires, and `leave` revokes it. Either way the member *and all its
  claims* disappear in one revision.
- **Claims.** `claim` succeeds only when the shard is free (etcd: a transaction "create
  ``shards/<s>`` if absent", attached to the lease). Its **epoch** is the revision that created
  it (etcd: the key's ``create_revision``), so epochs increase strictly over all claims, and a
  later owner of a shard always holds a higher epoch than an earlier one (a fencing token).
- **Bindings** (where a coordinator records them): `bind` records that a shard's sessions
  live on the claimer's storage, only while the claim still holds the shard (etcd: "create
  ``bindings/<s>`` if absent, and only if ``shards/<s>`` has ``create_revision`` == epoch").
  A claim never writes a binding; it is refused on a shard bound to another storage.
- **Release** deletes the claim only if it is still the one with that epoch (etcd: "delete if
  ``create_revision`` == epoch"); releasing a claim that expired or was revoked is a no-op.
- **Watch** yields the cluster view whenever the revision moved past the last one it yielded.
  Views may be coalesced (a watcher sees the latest state, not every step), revisions never go
  backwards, and a claim never appears in a view whose revision is below its epoch.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator
from typing import Protocol

import attrs

__all__ = [
    "Binding",
    "BoundElsewhereError",
    "Claim",
    "ClaimLostError",
    "ClusterView",
    "Coordinator",
    "CoordinatorError",
    "Lease",
    "LeaseExpiredError",
    "Member",
    "MemberConflictError",
]


class CoordinatorError(Exception):
    """A coordinator refused an operation (the message names the member, lease or shard)."""


class LeaseExpiredError(CoordinatorError):
    """The lease expired or was revoked; its member and claims are gone."""


class MemberConflictError(CoordinatorError):
    """A member with that id is already registered under a live lease."""


class ClaimLostError(CoordinatorError):
    """`bind` refused: the claim no longer holds its shard (released, expired or revoked)."""


class BoundElsewhereError(CoordinatorError):
    """`bind` refused: the shard is already bound to another storage."""


@attrs.frozen(kw_only=True)
class Member:
    """A worker that takes part in the cluster."""

    #: Stable id (``w1``, ``w2`` …): a restarted worker keeps it, so it gets its shards back.
    worker_id: str
    #: Private wire endpoint the worker serves on (``ipc://…`` or ``tcp://…``).
    endpoint: str
    #: Which storage the worker sees (``<host-id>:<data dir>``, or a shared mount's name);
    #: empty where the coordinator does not track storage (one host).
    storage_id: str = ""


@attrs.frozen(kw_only=True)
class Lease:
    """A member's registration; expires unless kept alive."""

    #: Unique per grant (a restarted worker gets a new lease).
    lease_id: int
    worker_id: str
    #: Seconds without keep-alive after which the lease expires.
    ttl: float


@attrs.frozen(kw_only=True)
class Claim:
    """Ownership of one shard."""

    shard: int
    worker_id: str
    #: The owner's endpoint (what a ``moved`` answer and the shard map point to).
    endpoint: str
    #: Fencing token: the revision that created this claim (etcd ``create_revision``).
    epoch: int
    #: The lease the claim is attached to.
    lease_id: int


@attrs.frozen(kw_only=True)
class Binding:
    """A shard's sessions live on one storage: only workers that see it may own the shard.

    Recorded when a storage first holds one of the shard's sessions (`Coordinator.bind`:
    before the first write of a session in an unbound shard, or at a claim when the claimer's
    storage already holds such sessions) and kept without a lease (etcd ``bindings/<s>``), so
    it outlives every worker; only ``cluster evict-host`` removes it.
    """

    shard: int
    storage_id: str


@attrs.frozen(kw_only=True)
class ClusterView:
    """The members and the claims at one revision."""

    revision: int
    shard_count: int
    #: Live members, sorted by id.
    members: tuple[Member, ...] = ()
    #: Live claims, sorted by shard.
    claims: tuple[Claim, ...] = ()
    #: Storage bindings, sorted by shard (none on one host: every shard is unbound).
    bindings: tuple[Binding, ...] = ()

    def owner(self, shard: int) -> Claim | None:
        """The claim on ``shard``, or None when it is free."""
        return self._claims_by_shard.get(shard)

    @functools.cached_property
    def _claims_by_shard(self) -> dict[int, Claim]:
        # Built once per view (a view is never changed): the supervisor's relay and the
        # workers' gate look an owner up per call. Not a field, so not on the wire; the first
        # claim of a shard wins, as a scan of ``claims`` would find it.
        return {claim.shard: claim for claim in reversed(self.claims)}

    def owners(self) -> list[Claim | None]:
        """The claim of every shard, indexed by shard."""
        table: list[Claim | None] = [None] * self.shard_count
        for claim in self.claims:
            table[claim.shard] = claim
        return table

    def worker_ids(self) -> list[str]:
        return [member.worker_id for member in self.members]

    def binding(self, shard: int) -> str | None:
        """The storage ``shard`` is bound to, or None when it is unbound."""
        for binding in self.bindings:
            if binding.shard == shard:
                return binding.storage_id
        return None


class Coordinator(Protocol):
    """Membership and shard ownership (see the module docstring for the rules)."""

    @property
    def shard_count(self) -> int:
        """Number of shards (fixed for the life of the cluster)."""
        ...

    async def join(self, member: Member, *, ttl: float) -> Lease:
        """Register ``member`` under a new lease.

        Raises:
            MemberConflictError: the id is held by a live lease.
        """
        ...

    async def keep_alive(self, lease: Lease) -> None:
        """Extend ``lease`` by its TTL.

        Raises:
            LeaseExpiredError: it expired or was revoked.
        """
        ...

    async def leave(self, lease: Lease) -> None:
        """Revoke ``lease``: the member and its claims go (a no-op when already gone)."""
        ...

    async def claim(self, lease: Lease, shard: int) -> Claim | None:
        """Claim ``shard`` for the lease's member; None when another claim holds it.

        Raises:
            LeaseExpiredError: the lease is gone.
            ValueError: ``shard`` is out of range.
        """
        ...

    async def bind(self, claim: Claim) -> None:
        """Bind ``claim``'s shard to this coordinator's storage (a no-op where bindings are not
        recorded, or when the shard is already bound to this storage).

        Raises:
            ClaimLostError: ``claim`` no longer holds its shard; nothing was bound.
            BoundElsewhereError: the shard is bound to another storage.
            CoordinatorError: the coordinator did not answer.
        """
        ...

    async def release(self, claim: Claim) -> bool:
        """Delete ``claim`` if it still holds its shard with its epoch; whether it did."""
        ...

    async def view(self) -> ClusterView:
        """The current members and claims."""
        ...

    def watch(self, after: int = 0) -> AsyncGenerator[ClusterView, None]:
        """Views with a revision above ``after``, the latest each time, until cancelled."""
        ...
