"""A worker's side of shard ownership: join, keep the lease alive, claim and hand over.

On every new view the worker computes the shards it should own (rendezvous hashing over the
live members) and converges on them: a shard it should no longer own is drained (no new
calls, calls in flight finish), its actors are passivated and its session states closed
(writers flushed, lock files released), and only then is the claim released; a shard it should
own is claimed only when the view shows it free. So two workers never hold one shard: the
coordinator grants a claim only on a free shard, and a worker gives a shard up before anyone
else can claim it (release-then-claim).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from actors.cluster._coordinator import Claim, ClusterView, Coordinator, Lease, Member
from actors.cluster._gate import ShardGate
from actors.cluster._shards import desired_shards

__all__ = ["keep_shards"]

log = logging.getLogger("actors.cluster")

#: How long a handover waits for a shard's calls in flight before closing its sessions anyway.
DRAIN_GRACE = 10.0


async def keep_shards(
    coordinator: Coordinator,
    gate: ShardGate,
    member: Member,
    *,
    ttl: float,
    close_shard: Callable[[int], Awaitable[None]],
    on_view: Callable[[ClusterView], None] | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Own this worker's shards until cancelled (then leave the cluster).

    Raises:
        LeaseExpiredError: the lease was lost (the worker must stop serving and restart).
    """
    lease = await coordinator.join(member, ttl=ttl)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_keep_alive, coordinator, lease)
            task_status.started(lease)
            async with contextlib.aclosing(coordinator.watch(0)) as views:
                async for view in views:
                    lost = gate.observe(view)
                    if lost:
                        log.warning("worker %s lost shards %s", member.worker_id, lost)
                    if on_view is not None:
                        on_view(view)
                    await _converge(coordinator, gate, lease, view, close_shard)
    finally:
        with trio.move_on_after(2, shield=True):
            with contextlib.suppress(Exception):
                await coordinator.leave(lease)


async def _keep_alive(coordinator: Coordinator, lease: Lease) -> None:
    while True:
        await trio.sleep(lease.ttl / 3)
        await coordinator.keep_alive(lease)


async def _converge(
    coordinator: Coordinator,
    gate: ShardGate,
    lease: Lease,
    view: ClusterView,
    close_shard: Callable[[int], Awaitable[None]],
) -> None:
    desired = desired_shards(lease.worker_id, view.worker_ids(), view.shard_count)
    owned = gate.owned
    async with trio.open_nursery() as nursery:
        for shard, claim in owned.items():
            if shard not in desired:
                nursery.start_soon(_hand_over, coordinator, gate, claim, close_shard)
    for shard in sorted(desired - set(owned)):
        if view.owner(shard) is None:
            granted = await coordinator.claim(lease, shard)
            if granted is not None:
                gate.own(granted)


async def _hand_over(
    coordinator: Coordinator,
    gate: ShardGate,
    claim: Claim,
    close_shard: Callable[[int], Awaitable[None]],
) -> None:
    if not await gate.drain(claim.shard, grace=DRAIN_GRACE):
        log.warning(
            "shard %d: %d call(s) still running after %g s; closing its sessions anyway",
            claim.shard,
            gate.in_flight(claim.shard),
            DRAIN_GRACE,
        )
    try:
        await close_shard(claim.shard)
    finally:
        await coordinator.release(claim)
        gate.forget(claim.shard)
