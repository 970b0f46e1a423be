"""The contract every `Coordinator` implementation must pass.

Subclass `CoordinatorContract` in a ``test_*.py`` module and override the ``coordinator``
fixture to yield a fresh implementation with 8 shards (in-process, over the wire, etcd …).
Each test names the rule of ``actors/cluster/_coordinator.py`` it checks.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import trio

from actors.cluster import (
    Claim,
    ClusterView,
    LeaseExpiredError,
    Member,
    MemberConflictError,
)

SHARDS = 8
TTL = 30.0


def member(name: str) -> Member:
    return Member(worker_id=name, endpoint=f"ipc:///tmp/{name}.sock")


class CoordinatorContract:
    """Rules of the `Coordinator` interface; ``coordinator`` is overridden per implementation."""

    #: The TTL the expiry test uses: as short as the implementation allows.
    expiry_ttl: float = 0.4

    @pytest.fixture
    def coordinator(self) -> Any:
        raise NotImplementedError

    async def test_join_registers_member_and_moves_revision(self, coordinator: Any) -> None:
        """A join shows the member in the next view at a higher revision."""
        before = await coordinator.view()
        lease = await coordinator.join(member("w1"), ttl=TTL)
        after = await coordinator.view()
        assert lease.worker_id == "w1"
        assert after.revision > before.revision
        assert after.worker_ids() == ["w1"]
        assert after.shard_count == SHARDS == coordinator.shard_count

    async def test_join_twice_conflicts(self, coordinator: Any) -> None:
        """A second live member with one id is refused."""
        await coordinator.join(member("w1"), ttl=TTL)
        with pytest.raises(MemberConflictError, match="w1"):
            await coordinator.join(member("w1"), ttl=TTL)

    async def test_claim_free_shard_gets_epoch_of_its_revision(self, coordinator: Any) -> None:
        """A claim on a free shard succeeds; its epoch is the revision that created it."""
        lease = await coordinator.join(member("w1"), ttl=TTL)
        before = await coordinator.view()
        claim = await coordinator.claim(lease, 3)
        view = await coordinator.view()
        assert isinstance(claim, Claim)
        assert (claim.shard, claim.worker_id, claim.lease_id) == (3, "w1", lease.lease_id)
        assert claim.endpoint == member("w1").endpoint
        assert before.revision < claim.epoch <= view.revision
        assert view.owner(3) == claim
        assert view.owners()[3] == claim

    async def test_claim_held_shard_is_refused(self, coordinator: Any) -> None:
        """A held shard cannot be claimed by another member, nor again by its owner."""
        one = await coordinator.join(member("w1"), ttl=TTL)
        two = await coordinator.join(member("w2"), ttl=TTL)
        first = await coordinator.claim(one, 0)
        assert first is not None
        assert await coordinator.claim(two, 0) is None
        assert await coordinator.claim(one, 0) is None
        assert (await coordinator.view()).owner(0) == first

    async def test_epochs_increase_over_all_claims(self, coordinator: Any) -> None:
        """Every claim's epoch exceeds every earlier one, also a re-claim after release."""
        one = await coordinator.join(member("w1"), ttl=TTL)
        two = await coordinator.join(member("w2"), ttl=TTL)
        epochs = []
        for shard in range(SHARDS):
            claim = await coordinator.claim(one if shard % 2 else two, shard)
            assert claim is not None
            epochs.append(claim.epoch)
        first = (await coordinator.view()).owner(0)
        assert first is not None
        assert await coordinator.release(first)
        again = await coordinator.claim(one, 0)
        assert again is not None
        epochs.append(again.epoch)
        assert epochs == sorted(epochs)
        assert len(set(epochs)) == len(epochs)
        assert again.epoch > first.epoch

    async def test_release_needs_current_epoch(self, coordinator: Any) -> None:
        """Releasing a stale claim changes nothing; releasing the current one frees the shard."""
        lease = await coordinator.join(member("w1"), ttl=TTL)
        old = await coordinator.claim(lease, 1)
        assert old is not None
        assert await coordinator.release(old)
        new = await coordinator.claim(lease, 1)
        assert new is not None
        revision = (await coordinator.view()).revision
        assert not await coordinator.release(old)
        view = await coordinator.view()
        assert view.owner(1) == new
        assert view.revision == revision
        assert await coordinator.release(new)
        assert (await coordinator.view()).owner(1) is None

    async def test_leave_drops_member_and_claims_at_once(self, coordinator: Any) -> None:
        """Revoking a lease removes its member and all its claims in one revision."""
        one = await coordinator.join(member("w1"), ttl=TTL)
        two = await coordinator.join(member("w2"), ttl=TTL)
        for shard in range(4):
            assert await coordinator.claim(one, shard) is not None
        kept = await coordinator.claim(two, 5)
        before = await coordinator.view()
        await coordinator.leave(one)
        after = await coordinator.view()
        assert after.worker_ids() == ["w2"]
        assert after.claims == (kept,)
        assert after.revision == before.revision + 1
        with pytest.raises(LeaseExpiredError):
            await coordinator.claim(one, 6)
        assert not await coordinator.release(before.owner(0))
        await coordinator.leave(one)  # a no-op once gone

    async def test_lease_expires_without_keep_alive(self, coordinator: Any) -> None:
        """A lease not kept alive expires with its claims; a kept-alive one survives its TTL."""
        short = await coordinator.join(member("w1"), ttl=self.expiry_ttl)
        kept = await coordinator.join(member("w2"), ttl=self.expiry_ttl)
        assert short.ttl == kept.ttl == self.expiry_ttl
        assert await coordinator.claim(short, 0) is not None
        assert await coordinator.claim(kept, 1) is not None
        # Keep one alive for 2.5 TTLs: the other has expired by then (etcd checks leases every
        # 500 ms, hence the margin).
        rounds = 10
        with trio.fail_after(10 * self.expiry_ttl + 5):
            for _ in range(rounds):
                await trio.sleep(self.expiry_ttl * 2.5 / rounds)
                await coordinator.keep_alive(kept)
        view = await coordinator.view()
        assert view.worker_ids() == ["w2"]
        assert [c.shard for c in view.claims] == [1]
        with pytest.raises(LeaseExpiredError):
            await coordinator.keep_alive(short)
        with pytest.raises(LeaseExpiredError):
            await coordinator.claim(short, 2)
        # The id is free again: a restarted worker rejoins under a new lease.
        again = await coordinator.join(member("w1"), ttl=TTL)
        assert again.lease_id != short.lease_id

    async def test_claim_out_of_range_is_an_error(self, coordinator: Any) -> None:
        """A shard outside 0..S-1 is refused with ValueError."""
        lease = await coordinator.join(member("w1"), ttl=TTL)
        with pytest.raises(ValueError, match="out of range"):
            await coordinator.claim(lease, SHARDS)

    async def test_concurrent_claims_have_one_winner(self, coordinator: Any) -> None:
        """Members racing for one shard: exactly one claim is granted."""
        leases = [await coordinator.join(member(f"w{i}"), ttl=TTL) for i in range(6)]
        granted: list[Claim] = []

        async def race(lease: Any) -> None:
            claim = await coordinator.claim(lease, 2)
            if claim is not None:
                granted.append(claim)

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for lease in leases:
                    nursery.start_soon(race, lease)
        assert len(granted) == 1
        assert (await coordinator.view()).owner(2) == granted[0]

    async def test_watch_sees_changes_in_revision_order(self, coordinator: Any) -> None:
        """Watch yields views with rising revisions; no view shows a claim above its revision."""
        seen: list[ClusterView] = []
        lease = await coordinator.join(member("w1"), ttl=TTL)
        start = (await coordinator.view()).revision

        async def watcher(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            task_status.started()
            async with contextlib.aclosing(coordinator.watch(start)) as views:
                async for view in views:
                    seen.append(view)
                    if view.owner(4) is not None and view.owner(5) is None:
                        return

        with trio.fail_after(15):
            async with trio.open_nursery() as nursery:
                await nursery.start(watcher)
                c4 = await coordinator.claim(lease, 4)
                c5 = await coordinator.claim(lease, 5)
                assert c4 is not None and c5 is not None
                assert await coordinator.release(c5)
        revisions = [view.revision for view in seen]
        assert revisions == sorted(set(revisions))
        assert revisions[0] > start
        for view in seen:
            assert all(claim.epoch <= view.revision for claim in view.claims)
        assert seen[-1].owner(4) == c4

    async def test_bindings_follow_binds_and_outlive_leases(self, coordinator: Any) -> None:
        """A claim binds nothing; a bind (where a coordinator records bindings) names only the
        bound shard, with the claimer's storage, and outlives the claimer's lease; coordinators
        without storage tracking bind nothing (every shard stays open to every worker)."""
        lease = await coordinator.join(member("w1"), ttl=TTL)
        claim = await coordinator.claim(lease, 3)
        assert claim is not None
        assert (await coordinator.view()).bindings == ()
        assert await coordinator.bind(claim) is None
        assert await coordinator.bind(claim) is None  # already bound here: no error
        view = await coordinator.view()
        storage = view.members[0].storage_id
        assert {b.shard for b in view.bindings} <= {3}
        assert all(b.storage_id == storage for b in view.bindings)
        await coordinator.leave(lease)
        after = await coordinator.view()
        assert after.bindings == view.bindings
        assert after.owner(3) is None
        again = await coordinator.join(member("w1"), ttl=TTL)
        assert await coordinator.claim(again, 3) is not None  # the same storage may reclaim
