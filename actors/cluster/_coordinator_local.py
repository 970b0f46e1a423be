"""`InProcessCoordinator`: the one-host `Coordinator`, held by the supervisor.

All state lives in one trio task's memory; every operation is atomic because it does not
await between reading and writing. Lease expiry uses the trio clock and is applied lazily at
every operation and watch wake-up, so no background task is needed.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator

import trio

from actors.cluster._coordinator import (
    Claim,
    ClusterView,
    Lease,
    LeaseExpiredError,
    Member,
    MemberConflictError,
)

__all__ = ["InProcessCoordinator"]

#: The shortest pause between a watcher's checks of lease expiry (seconds); it otherwise sleeps
#: until the earliest lease can expire, or a change.
_EXPIRY_TICK = 0.1


class InProcessCoordinator:
    """Membership and shard claims in this process's memory.

    Args:
        shard_count: Number of shards (S).
        first_revision: The revision before the first change. Epochs are fencing tokens that
            session logs remember (``fence/epoch-open`` records), so a coordinator that is
            restarted must start above every epoch it handed out before: see
            :func:`revision_floor`.
    """

    def __init__(self, shard_count: int, *, first_revision: int = 0) -> None:
        if shard_count < 1:
            raise ValueError(f"shard_count must be positive, got {shard_count}")
        if first_revision < 0:
            raise ValueError(f"first_revision must not be negative, got {first_revision}")
        self._shard_count = shard_count
        self._revision = first_revision
        self._next_lease = 1
        #: lease id -> (lease, member, expiry on the trio clock)
        self._leases: dict[int, tuple[Lease, Member, float]] = {}
        #: No lease expires before this (a renewal only moves an expiry later): the router
        #: reads the view per call, and this spares it a scan of the leases each time.
        self._next_expiry = math.inf
        self._claims: dict[int, Claim] = {}
        self._changed = trio.Event()
        self._view: ClusterView | None = None

    @property
    def shard_count(self) -> int:
        return self._shard_count

    @property
    def revision(self) -> int:
        return self._revision

    # -- membership -------------------------------------------------------------------------

    async def join(self, member: Member, *, ttl: float) -> Lease:
        await trio.lowlevel.checkpoint()
        self._expire()
        if ttl <= 0:
            raise ValueError(f"ttl must be positive, got {ttl}")
        for lease, live, _ in self._leases.values():
            if live.worker_id == member.worker_id:
                raise MemberConflictError(
                    f"worker {member.worker_id!r} is already a member (lease {lease.lease_id})"
                )
        lease = Lease(lease_id=self._next_lease, worker_id=member.worker_id, ttl=ttl)
        self._next_lease += 1
        expiry = trio.current_time() + ttl
        self._leases[lease.lease_id] = (lease, member, expiry)
        self._next_expiry = min(self._next_expiry, expiry)
        self._bump()
        return lease

    async def keep_alive(self, lease: Lease) -> None:
        await trio.lowlevel.checkpoint()
        self._expire()
        entry = self._live(lease)
        self._leases[lease.lease_id] = (entry[0], entry[1], trio.current_time() + lease.ttl)

    async def leave(self, lease: Lease) -> None:
        await trio.lowlevel.checkpoint()
        self.revoke(lease.lease_id)

    def revoke(self, lease_id: int) -> bool:
        """Drop a lease, its member and its claims now (the supervisor saw the worker exit).

        Returns whether the lease was live.
        """
        self._expire()
        if lease_id not in self._leases:
            return False
        del self._leases[lease_id]
        for shard in [s for s, c in self._claims.items() if c.lease_id == lease_id]:
            del self._claims[shard]
        self._bump()
        return True

    def lease_of(self, worker_id: str) -> Lease | None:
        """The live lease of ``worker_id``, if any."""
        self._expire()
        for lease, member, _ in self._leases.values():
            if member.worker_id == worker_id:
                return lease
        return None

    # -- claims -----------------------------------------------------------------------------

    async def claim(self, lease: Lease, shard: int) -> Claim | None:
        await trio.lowlevel.checkpoint()
        self._expire()
        if not 0 <= shard < self._shard_count:
            raise ValueError(f"shard {shard} is out of range 0..{self._shard_count - 1}")
        _, member, _ = self._live(lease)
        if shard in self._claims:
            return None
        # The claim's epoch is the revision that creates it (etcd's create_revision).
        self._bump()
        claim = Claim(
            shard=shard,
            worker_id=member.worker_id,
            endpoint=member.endpoint,
            epoch=self._revision,
            lease_id=lease.lease_id,
        )
        self._claims[shard] = claim
        return claim

    async def bind(self, claim: Claim) -> None:
        """A no-op: one host records no storage bindings (every shard stays unbound)."""
        await trio.lowlevel.checkpoint()

    async def release(self, claim: Claim) -> bool:
        await trio.lowlevel.checkpoint()
        self._expire()
        current = self._claims.get(claim.shard)
        if current is None or current.epoch != claim.epoch:
            return False
        del self._claims[claim.shard]
        self._bump()
        return True

    # -- observing --------------------------------------------------------------------------

    async def view(self) -> ClusterView:
        await trio.lowlevel.checkpoint()
        return self.current()

    def current(self) -> ClusterView:
        """The current view, without a checkpoint (the supervisor's router reads it per call)."""
        if trio.current_time() >= self._next_expiry:  # else _expire has nothing to do
            self._expire()
        if self._view is None or self._view.revision != self._revision:
            self._view = ClusterView(
                revision=self._revision,
                shard_count=self._shard_count,
                members=tuple(
                    sorted((m for _, m, _ in self._leases.values()), key=lambda m: m.worker_id)
                ),
                claims=tuple(self._claims[s] for s in sorted(self._claims)),
            )
        return self._view

    async def changed(self, after: int) -> ClusterView:
        """Wait until the revision passes ``after``; return the view then."""
        while True:
            view = self.current()
            if view.revision > after:
                await trio.lowlevel.checkpoint()
                return view
            # _next_expiry is the earliest a lease can expire (a keep-alive only moves a lease
            # later): nothing can change before then unless somebody bumps the revision.
            soonest = trio.current_time() + _EXPIRY_TICK
            with trio.move_on_at(max(self._next_expiry, soonest)):
                await self._changed.wait()

    async def watch(self, after: int = 0) -> AsyncGenerator[ClusterView, None]:
        while True:
            view = await self.changed(after)
            after = view.revision
            yield view

    # -- internals --------------------------------------------------------------------------

    def _live(self, lease: Lease) -> tuple[Lease, Member, float]:
        entry = self._leases.get(lease.lease_id)
        if entry is None:
            raise LeaseExpiredError(
                f"lease {lease.lease_id} of worker {lease.worker_id!r} expired or was revoked"
            )
        return entry

    def _expire(self) -> None:
        now = trio.current_time()
        if now < self._next_expiry:
            return
        expired = [lid for lid, (_, _, expiry) in self._leases.items() if expiry <= now]
        self._next_expiry = min(
            (expiry for _, _, expiry in self._leases.values() if expiry > now), default=math.inf
        )
        if not expired:
            return
        for lease_id in expired:
            del self._leases[lease_id]
        for shard in [s for s, c in self._claims.items() if c.lease_id in expired]:
            del self._claims[shard]
        self._bump()

    def _bump(self) -> None:
        self._revision += 1
        self._changed.set()
        self._changed = trio.Event()
