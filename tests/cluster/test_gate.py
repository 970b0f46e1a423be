"""The worker's shard gate: moved answers, in-flight counts, drain, lost claims."""

from __future__ import annotations

import pytest
import trio

from actors.cluster import Claim, ClusterView, Member, shard_of
from actors.cluster._gate import ShardGate, shard_map
from wire._errors import MovedError

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
