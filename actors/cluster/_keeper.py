"""A worker's side of shard ownership: join, keep the lease alive, claim and hand over.

On every new view the worker computes the shards it should own (rendezvous hashing over the
live members) and converges on them: a shard it should no longer own is drained (no new
calls, calls in flight finish), its actors are passivated and its session states closed
(writers flushed, lock files released), and only then is the claim released; a shard it should
own is claimed only when the view shows it free. So two workers never hold one shard: the
coordinator grants a claim only on a free shard, and a worker gives a shard up before anyone
else can claim it (release-then-claim).

Failures of the coordinator (etcd) are survived, not fatal. The lease clock (`LeaseClock`)
says until when the lease is surely alive: a keep-alive that goes unanswered is retried until
that deadline minus the margin, and meanwhile the worker keeps serving (reads and writes) but
claims nothing new. Past it the worker fences itself: writes answer ``unavailable`` (reads of
the shards it held are still served), and once the coordinator answers again the worker gives
everything up (shards closed, old lease revoked) and rejoins under a new lease, claiming its
shards afresh with new epochs. A lease the coordinator reports expired is given up at once.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from actors.cluster._coordinator import (
    Claim,
    ClusterView,
    Coordinator,
    CoordinatorError,
    Lease,
    LeaseExpiredError,
    Member,
)
from actors.cluster._fencing import KEEP_ALIVE_FRACTION, LeaseClock
from actors.cluster._gate import ShardGate
from actors.cluster._shards import desired_shards
from wire import WireError

__all__ = ["keep_shards"]

log = logging.getLogger("actors.cluster")

#: How long a handover waits for a shard's calls in flight before closing its sessions anyway.
DRAIN_GRACE = 10.0
#: How long giving up a lease waits for calls in flight before closing the sessions anyway.
DROP_GRACE = 2.0
#: A worker re-checks its desired shards this often even without a new view (seconds), so a
#: claim that failed while the coordinator was away is retried once it is back.
CONVERGE_RETRY = 1.0
#: Pauses between retries of a coordinator request that went unanswered (seconds).
_RETRY = 0.1
_RETRY_MAX = 1.0

#: What "the coordinator did not answer" looks like: etcd unreachable or without quorum
#: (`EtcdUnavailableError` is a `CoordinatorError`), or the supervisor's control endpoint gone.
_UNANSWERED = (CoordinatorError, WireError)


@attrs.define
class _Holding:
    """What the keeper knows about the lease it holds now."""

    lease: Lease
    clock: LeaseClock
    #: Set to send a keep-alive now (a view says we lost shards, or a claim saw the lease gone).
    check: trio.Event = attrs.Factory(trio.Event)


async def keep_shards(
    coordinator: Coordinator,
    gate: ShardGate,
    member: Member,
    *,
    ttl: float,
    close_shard: Callable[[int], Awaitable[None]],
    on_view: Callable[[ClusterView], None] | None = None,
    after_claim: Callable[[Claim], Awaitable[None]] | None = None,
    margin: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Own this worker's shards until cancelled (then leave the cluster).

    Args:
        coordinator: Membership and claims (etcd, or the supervisor's).
        gate: The worker's gate; its lease clock and fence are kept up to date here.
        member: This worker.
        ttl: Lease TTL asked for (the coordinator may round it up).
        close_shard: Passivate a shard's actors and close its sessions (locks released).
        on_view: Called with every view seen.
        after_claim: Awaited with each claim granted, once the gate owns it (binds the shard
            when this storage already holds its sessions; must not raise).
        margin: Fencing margin (default `default_margin` of the granted TTL).
        clock: Monotonic seconds (the same clock the gate's `may_ack` is asked with).
        task_status: Started with the first lease once joined.
    """
    started = False
    holding: _Holding | None = None
    try:
        while True:
            holding = await _join(coordinator, gate, member, ttl, margin, clock)
            if not started:
                started = True
                task_status.started(holding.lease)
            expired = await _hold(
                coordinator, gate, holding, close_shard, on_view, clock, after_claim
            )
            if not expired:
                # Fenced: keep serving reads of what we held until the coordinator answers.
                expired = await _wait_answer(coordinator, holding.lease)
            log.warning(
                "worker %s: giving up lease %d (%s); rejoining",
                member.worker_id,
                holding.lease.lease_id,
                "expired" if expired else "deadline passed while the coordinator was away",
            )
            await _drop_all(gate, close_shard)
            await _revoke(coordinator, holding.lease)
            holding = None
    finally:
        if holding is not None:
            with trio.move_on_after(2, shield=True), contextlib.suppress(Exception):
                await coordinator.leave(holding.lease)


async def _join(
    coordinator: Coordinator,
    gate: ShardGate,
    member: Member,
    ttl: float,
    margin: float | None,
    clock: Callable[[], float],
) -> _Holding:
    """Join under a new lease, retrying while the coordinator does not answer."""
    pause = _RETRY
    while True:
        sent = clock()
        try:
            lease = await coordinator.join(member, ttl=ttl)
        except _UNANSWERED as exc:
            # A member conflict too: our own old lease may still be live for a moment.
            log.warning("worker %s: join failed (%s); retrying", member.worker_id, exc)
            await trio.sleep(pause)
            pause = min(pause * 2, _RETRY_MAX)
            continue
        lease_clock = LeaseClock.granted(sent_at=sent, ttl=lease.ttl, margin=margin)
        gate.set_lease(lease_clock)
        gate.unfence()
        return _Holding(lease=lease, clock=lease_clock)


async def _hold(
    coordinator: Coordinator,
    gate: ShardGate,
    holding: _Holding,
    close_shard: Callable[[int], Awaitable[None]],
    on_view: Callable[[ClusterView], None] | None,
    clock: Callable[[], float],
    after_claim: Callable[[Claim], Awaitable[None]] | None = None,
) -> bool:
    """Keep the lease and the shards until the lease is lost; whether it was reported
    expired (False: its deadline passed unconfirmed, and the gate is fenced)."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            _follow, coordinator, gate, holding, close_shard, on_view, clock, after_claim
        )
        expired = await _keep_alive(coordinator, gate, holding, clock)
        gate.fence()
        nursery.cancel_scope.cancel()
    return expired


async def _keep_alive(
    coordinator: Coordinator, gate: ShardGate, holding: _Holding, clock: Callable[[], float]
) -> bool:
    """Renew the lease until it is lost; whether it was reported expired (else fenced)."""
    lease = holding.lease
    while True:
        now = clock()
        if holding.clock.fenced(now):
            log.warning(
                "worker %s: lease %d unconfirmed past its deadline minus margin; fencing",
                lease.worker_id,
                lease.lease_id,
            )
            return False
        with trio.move_on_after(max(0.0, holding.clock.next_keep_alive(now) - now)):
            await holding.check.wait()
        holding.check = trio.Event()
        sent = clock()
        if holding.clock.fenced(sent):
            continue
        # An attempt may not outlast the lease: at the deadline we must be free to fence.
        budget = max(0.0, min(holding.clock.time_left(sent), lease.ttl * KEEP_ALIVE_FRACTION))
        try:
            with trio.move_on_after(budget) as scope:
                await coordinator.keep_alive(lease)
        except LeaseExpiredError:
            return True
        except _UNANSWERED as exc:
            log.warning("worker %s: keep-alive failed (%s)", lease.worker_id, exc)
            holding.clock = holding.clock.failed()
        else:
            if scope.cancelled_caught:
                log.warning("worker %s: keep-alive unanswered in %.2g s", lease.worker_id, budget)
                holding.clock = holding.clock.failed()
            else:
                holding.clock = holding.clock.renewed(sent_at=sent)
        gate.set_lease(holding.clock)


async def _follow(
    coordinator: Coordinator,
    gate: ShardGate,
    holding: _Holding,
    close_shard: Callable[[int], Awaitable[None]],
    on_view: Callable[[ClusterView], None] | None,
    clock: Callable[[], float],
    after_claim: Callable[[Claim], Awaitable[None]] | None = None,
) -> None:
    """Watch the cluster and converge on the desired shards (retried every second until
    settled, then on the next change)."""
    changed = trio.Event()
    latest: list[ClusterView] = []

    async def watch() -> None:
        nonlocal changed
        async with contextlib.aclosing(coordinator.watch(0)) as views:
            async for view in views:
                lost = gate.observe(view)
                if lost:
                    log.warning("worker %s lost shards %s", holding.lease.worker_id, lost)
                    holding.check.set()  # the lease is probably gone: find out now
                if on_view is not None:
                    on_view(view)
                latest[:] = [view]
                changed.set()
                changed = trio.Event()

    def may_claim() -> bool:
        return holding.clock.may_claim(clock())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        converged: ClusterView | None = None
        settled = False
        while True:
            if latest and latest[0] is not converged:
                pass  # a view came while we converged on the one before
            elif settled:
                # Nothing to retry: an idle worker sleeps until the cluster changes.
                await changed.wait()
            else:
                with trio.move_on_after(CONVERGE_RETRY):
                    await changed.wait()
            if latest:
                converged = latest[0]
                settled = await _converge(
                    coordinator, gate, holding, converged, close_shard, may_claim, after_claim
                )


async def _converge(
    coordinator: Coordinator,
    gate: ShardGate,
    holding: _Holding,
    view: ClusterView,
    close_shard: Callable[[int], Awaitable[None]],
    may_claim: Callable[[], bool],
    after_claim: Callable[[Claim], Awaitable[None]] | None = None,
) -> bool:
    """Hand over the shards ``view`` no longer gives us and claim the free ones it does;
    whether we then own exactly the desired shards (else the caller retries)."""
    lease = holding.lease
    desired = desired_shards(lease.worker_id, view)
    owned = gate.owned
    async with trio.open_nursery() as nursery:
        for shard, claim in owned.items():
            if shard not in desired:
                nursery.start_soon(_hand_over, coordinator, gate, claim, close_shard)
    for shard in sorted(desired - set(owned)):
        if view.owner(shard) is None:
            if not may_claim():
                return False  # no new claims while the lease is unconfirmed
            try:
                granted = await coordinator.claim(lease, shard)
            except LeaseExpiredError:
                holding.check.set()
                return False
            except _UNANSWERED as exc:
                log.warning("worker %s: claim of shard %d failed (%s)", lease.worker_id, shard, exc)
                return False  # retried on the next view or tick
            if granted is not None:
                gate.own(granted)
                if after_claim is not None:
                    await after_claim(granted)
    return set(gate.owned) == desired


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
        # Until the release is answered the claim blocks the next owner; it goes with the
        # lease at the latest, and giving the lease up cancels this retry.
        pause = _RETRY
        while True:
            try:
                await coordinator.release(claim)
                break
            except _UNANSWERED as exc:
                log.warning("shard %d: release failed (%s); retrying", claim.shard, exc)
                await trio.sleep(pause)
                pause = min(pause * 2, _RETRY_MAX)
    finally:
        gate.forget(claim.shard)


async def _wait_answer(coordinator: Coordinator, lease: Lease) -> bool:
    """Wait until the coordinator answers a keep-alive; whether the lease had expired."""
    pause = _RETRY
    while True:
        try:
            with trio.move_on_after(lease.ttl * KEEP_ALIVE_FRACTION) as scope:
                await coordinator.keep_alive(lease)
        except LeaseExpiredError:
            return True
        except _UNANSWERED:
            pass
        else:
            if not scope.cancelled_caught:
                return False
        await trio.sleep(pause)
        pause = min(pause * 2, _RETRY_MAX)


async def _drop_all(gate: ShardGate, close_shard: Callable[[int], Awaitable[None]]) -> None:
    """Give every shard up locally: drain briefly, close every shard's sessions (a lost shard
    may still have open sessions holding their locks), forget the claims."""
    owned = gate.owned

    async def drain(shard: int) -> None:
        await gate.drain(shard, grace=DROP_GRACE)

    async with trio.open_nursery() as nursery:
        for shard in owned:
            nursery.start_soon(drain, shard)
    for shard in range(gate.shard_count):
        try:
            await close_shard(shard)
        except Exception:
            log.exception("shard %d: closing its sessions failed", shard)
    for shard in owned:
        gate.forget(shard)


async def _revoke(coordinator: Coordinator, lease: Lease) -> None:
    """Revoke ``lease``, retrying until the coordinator answers (a no-op when it is gone)."""
    pause = _RETRY
    while True:
        try:
            await coordinator.leave(lease)
            return
        except _UNANSWERED as exc:
            log.warning(
                "worker %s: revoking lease %d failed (%s)", lease.worker_id, lease.lease_id, exc
            )
            await trio.sleep(pause)
            pause = min(pause * 2, _RETRY_MAX)
