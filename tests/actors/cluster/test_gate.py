"""The worker's shard gate: moved answers, in-flight counts, drain, lost claims, fencing."""

from __future__ import annotations

import time

import pytest
import trio

from actors.cluster import Claim, ClusterView, Member, shard_of
from actors.cluster._fencing import LeaseClock
from actors.cluster._gate import ClusterRegistry, ShardGate, shard_map
from actors.cluster._worker import _ack_guard
from wire._errors import MovedError, UnavailableError

S = 4


def claim(shard: int, worker: str = "w1", epoch: int = 1) -> Claim:
    return Claim(shard=shard, worker_id=worker, endpoint=f"ipc://{worker}", epoch=epoch, lease_id=1)


def agent_in(shard: int) -> str:
    return next(f"a{i}" for i in range(1000) if shard_of(f"a{i}", S) == shard)


def view(*claims: Claim, revision: int = 10) -> ClusterView:
    members = tuple(
        Member(worker_id=w, endpoint=f"ipc://{w}") for w in sorted({c.worker_id for c in claims})
    )
    return ClusterView(revision=revision, shard_count=S, members=members, claims=claims)


def test_unowned_shard_answers_moved_with_owner() -> None:
    """A call for another worker's shard is refused with the owner's id and endpoint."""
    gate = ShardGate("w1", S)
    gate.observe(view(claim(1, "w2")))
    with pytest.raises(MovedError) as info:
        gate.enter(agent_in(1))
    assert info.value.details == {
        "agentId": agent_in(1),
        "shard": 1,
        "owner": "w2",
        "endpoint": "ipc://w2",
        "revision": 10,
    }


async def test_drain_waits_for_calls_in_flight() -> None:
    """A draining shard refuses new calls and drains once the last call in flight leaves."""
    gate = ShardGate("w1", S)
    gate.own(claim(2))
    gate.observe(view(claim(2)))
    shard = gate.enter(agent_in(2))
    drained: list[bool] = []
    async with trio.open_nursery() as nursery:

        async def drain() -> None:
            drained.append(await gate.drain(2, grace=5))

        nursery.start_soon(drain)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(MovedError) as info:
            gate.enter(agent_in(2))
        assert info.value.details["owner"] is None  # our own claim, being handed over
        assert drained == []
        gate.leave(shard)
    assert drained == [True]


def test_lost_claim_is_dropped_on_observe() -> None:
    """A view without our claim (lease expired, epoch replaced) stops admission at once."""
    gate = ShardGate("w1", S)
    gate.own(claim(0, epoch=3))
    gate.own(claim(3, epoch=4))
    assert gate.observe(view(claim(0, "w2", epoch=9), claim(3, epoch=4))) == [0]
    assert not gate.owns(agent_in(0))
    assert gate.owns(agent_in(3))


def test_shard_map_lists_owners_and_epochs() -> None:
    """The describe map names each shard's owner and epoch, nil for a free shard."""
    described = shard_map(view(claim(0, "w1", 5), claim(2, "w2", 7)), self_id="w1")
    assert described["owners"] == ["w1", None, "w2", None]
    assert described["epochs"] == [5, None, 7, None]
    assert described["workers"] == {"w1": "ipc://w1", "w2": "ipc://w2"}
    assert described["self"] == "w1"


def test_describe_is_one_object_per_shard_map_and_follows_a_new_view() -> None:
    """Every describe call asks for the map: for the same view (or a new one with the same
    map) the registry answers with the same object, whose encoding the server reuses; a new
    map gives a new object that carries it."""
    current = view(claim(0), claim(1, "w2"), revision=10)
    registry = ClusterRegistry(lambda: current, self_id="w1")
    first = registry.describe()
    assert first["cluster"] == shard_map(current, self_id="w1")
    assert registry.describe() is first
    current = view(claim(0), claim(1, "w2"), revision=10)  # another view, the same map
    assert registry.describe() is first
    current = view(claim(0), claim(1), revision=11)
    moved = registry.describe()
    assert moved is not first
    assert moved["cluster"]["owners"][:2] == ["w1", "w1"]
    assert moved["cluster"]["revision"] == 11


def test_lagging_view_does_not_lose_a_fresh_claim() -> None:
    """A view whose revision is below a claim's epoch predates the claim: it is not a loss."""
    gate = ShardGate("w1", S)
    gate.own(claim(1, epoch=12))
    assert gate.observe(view(revision=10)) == []
    assert gate.owns(agent_in(1))
    assert gate.observe(view(revision=13)) == [1]
    assert not gate.owns(agent_in(1))


def test_older_view_than_the_last_is_ignored() -> None:
    """A view older than one already adopted changes neither the view nor ownership."""
    gate = ShardGate("w1", S)
    gate.own(claim(2, epoch=5))
    gate.observe(view(claim(2, epoch=5), revision=20))
    assert gate.observe(view(revision=15)) == []
    assert gate.view is not None and gate.view.revision == 20
    assert gate.owns(agent_in(2))


def test_epoch_for_names_the_claim_epoch() -> None:
    """epoch_for gives the owned claim's epoch, also while draining, and None elsewhere."""
    gate = ShardGate("w1", S)
    gate.own(claim(3, epoch=42))
    assert gate.epoch_for(agent_in(3)) == 42
    assert gate.epoch_for(agent_in(0)) is None
    gate._draining.add(3)
    assert gate.epoch_for(agent_in(3)) == 42
    gate.forget(3)
    assert gate.epoch_for(agent_in(3)) is None


def test_fenced_gate_refuses_writes_and_serves_reads() -> None:
    """Once fenced, a write answers unavailable and a read is still admitted."""
    gate = ShardGate("w1", S)
    gate.own(claim(0))
    gate.fence()
    with pytest.raises(UnavailableError) as info:
        gate.enter(agent_in(0), mutates=True)
    assert info.value.details == {"agentId": agent_in(0), "shard": 0, "reason": "lease"}
    shard = gate.enter(agent_in(0))
    gate.leave(shard)
    gate.unfence()
    gate.leave(gate.enter(agent_in(0), mutates=True))


def test_may_ack_follows_the_lease_clock_and_fences() -> None:
    """An ack is allowed only for an owned shard before the lease's fence time; past it the
    gate fences itself, so later writes are refused up front."""
    gate = ShardGate("w1", S)
    gate.own(claim(1))
    assert not gate.may_ack(agent_in(1), 0.0)  # no lease recorded yet
    gate.unfence()
    gate.set_lease(LeaseClock.granted(sent_at=100.0, ttl=3.0, margin=0.5))
    assert gate.may_ack(agent_in(1), 102.4)
    assert not gate.may_ack(agent_in(0), 102.4)  # not owned here
    assert not gate.fenced
    assert not gate.may_ack(agent_in(1), 102.5)
    assert gate.fenced
    with pytest.raises(UnavailableError):
        gate.enter(agent_in(1), mutates=True)


def test_ack_guard_refuses_past_the_fence_and_for_lost_shards() -> None:
    """The worker's storage hook lets an ack through only for an owned shard on a safe lease,
    and raises unavailable otherwise (past the deadline minus the margin it also fences)."""
    gate = ShardGate("w1", S)
    gate.own(claim(2))
    now = time.monotonic()
    gate.set_lease(LeaseClock.granted(sent_at=now, ttl=30.0))
    guard = _ack_guard(gate)
    guard(agent_in(2))
    with pytest.raises(UnavailableError):
        guard(agent_in(1))  # not owned here
    gate.set_lease(LeaseClock.granted(sent_at=now - 30.0, ttl=30.0))
    with pytest.raises(UnavailableError) as info:
        guard(agent_in(2))
    assert info.value.details == {"agentId": agent_in(2), "shard": 2, "reason": "lease"}
    assert gate.fenced
