"""Local mode binds a shard at its first session write, not at its first claim (real etcd)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from actors._store_services import CACHE_NAME, build_session_services
from actors.cluster import Member, shard_of
from actors.cluster._binding import ShardBinder, held_shards_of
from actors.cluster._coordinator import Binding, ClusterView
from actors.cluster._coordinator_etcd import EtcdCoordinator, open_etcd_coordinator
from actors.cluster._etcd_http import open_etcd_client, prefix_end
from actors.cluster._gate import ShardGate
from actors.cluster._shards import placement_owner
from actors.cluster._storage import Placement
from actors.session_log._header import SessionHeader
from tests.actors.cluster._cluster import SHARDS, running_cluster, user_message
from tests.actors.cluster._etcd import EtcdCluster
from wire import MovedError, UnavailableError, open_client

TTL = 30.0


async def _bindings(etcd: EtcdCluster, name: str) -> dict[int, str]:
    """Shard -> storage id of every binding (asserting none has a lease)."""
    prefix = f"/agent-actors/{name}/bindings/".encode()
    async with open_etcd_client(etcd.urls) as client:
        _, kvs = await client.range(prefix, prefix_end(prefix))
    assert all(kv.lease == 0 for kv in kvs)
    return {int(kv.key[len(prefix) :]): json.loads(kv.value)["storageId"] for kv in kvs}


def _id_in(shard: int, count: int = SHARDS) -> str:
    """A fresh session id in ``shard``."""
    while True:
        candidate = str(uuid.uuid4())
        if shard_of(candidate, count) == shard:
            return candidate


class _Counting:
    """A coordinator wrapper counting `bind` calls (the hot path must make none)."""

    def __init__(self, inner: EtcdCoordinator) -> None:
        self.inner = inner
        self.binds = 0

    async def bind(self, claim: Any) -> None:
        self.binds += 1
        await self.inner.bind(claim)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.etcd
async def test_first_write_binds_and_a_lost_claim_refuses_the_write(
    etcd: EtcdCluster, cluster_name: str, tmp_path: Path
) -> None:
    """A claim binds nothing; the first session write in the shard binds it (no lease) and
    later writes in it never ask etcd; a worker whose claim was lost in between binds
    nothing and its write fails ``moved`` before anything is on disk; a storage that already
    holds sessions of a shard binds it at claim."""
    storage = f"h:{tmp_path}"
    with trio.fail_after(30):
        async with open_etcd_coordinator(
            etcd.urls, cluster=cluster_name, shard_count=SHARDS, host="h", storage_id=storage
        ) as etcd_coordinator:
            coordinator = _Counting(etcd_coordinator)
            gate = ShardGate("h-w1", SHARDS)
            binder = ShardBinder(coordinator, gate, storage)  # type: ignore[arg-type]
            services = build_session_services(
                tmp_path / "data", index_on_start=False, before_write=binder.before_write
            )
            store = services.directory
            lease = await etcd_coordinator.join(Member(worker_id="h-w1", endpoint="e"), ttl=TTL)
            kept = await etcd_coordinator.claim(lease, 1)
            lost = await etcd_coordinator.claim(lease, 2)
            assert kept is not None and lost is not None
            gate.own(kept)
            gate.own(lost)
            assert await _bindings(etcd, cluster_name) == {}

            first = _id_in(1)
            await store.create(SessionHeader(id=first, created_at=1, cwd="/"))
            assert await _bindings(etcd, cluster_name) == {1: storage}
            state = await store.load(first)
            assert state is not None
            await state.append([_event("a")])
            await store.create(SessionHeader(id=_id_in(1), created_at=2, cwd="/"))
            assert coordinator.binds == 1  # later writes in a bound shard: a set lookup

            # The claim on shard 2 is lost (released behind the gate's back).
            assert await etcd_coordinator.release(lost)
            victim = _id_in(2)
            with pytest.raises(MovedError, match=f"shard {shard_of(victim, SHARDS)}"):
                await store.create(SessionHeader(id=victim, created_at=3, cwd="/"))
            assert store.cache.get(victim) is None
            assert not list((tmp_path / "data").rglob(f"*{victim}*"))
            assert await _bindings(etcd, cluster_name) == {1: storage}

            # Another worker of the same storage claims shard 1 afresh: its storage holds
            # sessions of shard 1, so the claim path binds (here: finds it bound already), and
            # shard 3, whose sessions this storage does not hold, stays unbound.
            other = ShardBinder(etcd_coordinator, ShardGate("h-w2", SHARDS), storage)
            other.held_shards = lambda: {1}
            third = await etcd_coordinator.claim(lease, 3)
            assert third is not None
            await other.after_claim(third)
            assert 3 not in await _bindings(etcd, cluster_name)
            other.held_shards = lambda: {3}
            await other.after_claim(third)
            assert await _bindings(etcd, cluster_name) == {1: storage, 3: storage}
            await services.aclose()


async def test_write_fails_unavailable_when_etcd_does_not_answer(tmp_path: Path) -> None:
    """A first write whose bind cannot reach etcd fails ``unavailable`` and writes nothing."""

    class Down:
        async def bind(self, claim: Any) -> None:
            from actors.cluster._etcd_http import EtcdUnavailableError

            raise EtcdUnavailableError("etcd at http://x:1 is unreachable")

    gate = ShardGate("w1", SHARDS)
    gate.own(_claim(4))
    binder = ShardBinder(Down(), gate, "s")  # type: ignore[arg-type]
    services = build_session_services(
        tmp_path / "data", index_on_start=False, before_write=binder.before_write
    )
    victim = _id_in(4)
    with pytest.raises(UnavailableError, match="cannot bind the shard"):
        await services.directory.create(SessionHeader(id=victim, created_at=1, cwd="/"))
    assert services.directory.cache.get(victim) is None
    await services.aclose()


def _claim(shard: int) -> Any:
    from actors.cluster import Claim

    return Claim(shard=shard, worker_id="w1", endpoint="e", epoch=7, lease_id=1)


def _event(text: str) -> Any:
    from actors.store._events import EventInput

    message = user_message(text)
    return EventInput(type=message["type"], data=message["data"], surface_op="append")


async def _settled(coordinator: EtcdCoordinator, hosts: int) -> ClusterView:
    """Wait until every shard is held by its placement owner, with ``2 * hosts`` members."""
    while True:
        view = await coordinator.view()
        owners = [view.owner(s) for s in range(SHARDS)]
        if len(view.members) == 2 * hosts and all(
            o is not None and o.worker_id == placement_owner(view, s) for s, o in enumerate(owners)
        ):
            return view
        await trio.sleep(0.2)


@pytest.mark.etcd
async def test_host_started_later_takes_its_share_of_unbound_shards(
    etcd: EtcdCluster, cluster_name: str, tmp_path: Path
) -> None:
    """Two hosts (two data dirs, distinct host ids) started one after the other on a fresh
    cluster both end up owning shards: the later one takes its rendezvous share of the shards
    that got no session, the shards that got sessions stay bound to (and owned on) the
    storage that wrote them, and each host's writes bind their shards to its own storage."""
    url = f"{etcd.etcd_url}/{cluster_name}"
    data = {host: tmp_path / f"data-{host}" for host in "ab"}
    storage = {h: Placement.build(data_dir=d, host_id=h).storage_id for h, d in data.items()}
    extra = {h: ["--coordinator", url, "--host-id", h] for h in "ab"}
    with trio.fail_after(60):
        async with open_etcd_coordinator(
            etcd.urls, cluster=cluster_name, shard_count=SHARDS, storage_id="observer"
        ) as observer:
            async with running_cluster(tmp_path, extra=extra["a"], name="a", data=data["a"]) as a:
                view = await _settled(observer, 1)
                assert view.bindings == ()  # every shard claimed, none bound
                async with open_client(a.address) as via_a:
                    written_a = []
                    for n in range(3):
                        created = await via_a.call("agents/create", {"title": f"a{n}", "cwd": "/"})
                        written_a.append(created["agentId"])
                bound_a = {shard_of(agent, SHARDS) for agent in written_a}
                assert await _bindings(etcd, cluster_name) == {s: storage["a"] for s in bound_a}

                async with running_cluster(
                    tmp_path, extra=extra["b"], name="b", data=data["b"]
                ) as b:
                    view = await _settled(observer, 2)
                    owners = {s: view.owner(s) for s in range(SHARDS)}
                    of_b = [s for s, c in owners.items() if c and c.worker_id.startswith("b-")]
                    assert of_b, "the later host got no shard"
                    assert not bound_a & set(of_b)
                    assert all(owners[s].worker_id.startswith("a-") for s in bound_a)  # type: ignore[union-attr]

                    async with open_client(b.address) as via_b:
                        mine = _id_in(of_b[0])
                        await via_b.call("agents/create", {"agentId": mine, "cwd": "/"})
                        await via_b.call(
                            "sessions/append", {"agentId": mine, "events": [user_message("b")]}
                        )
                        for agent in written_a:  # routed to host a's workers
                            info = await via_b.call("sessions/info", {"agentId": agent})
                            assert info["sessionId"] == agent
                    bindings = await _bindings(etcd, cluster_name)
                    assert bindings[of_b[0]] == storage["b"]
                    assert all(bindings[s] == storage["a"] for s in bound_a)
                    assert list(data["b"].rglob(f"*{mine}*"))
                    assert not list(data["a"].rglob(f"*{mine}*"))


async def _sessions_in(data: Path, count: int) -> list[str]:
    """Create ``count`` sessions in the data directory ``data`` (as an earlier run would)."""
    services = build_session_services(data, index_on_start=False)
    ids = [str(uuid.uuid4()) for _ in range(count)]
    for n, session_id in enumerate(ids):
        await services.directory.create(SessionHeader(id=session_id, created_at=n + 1, cwd="/"))
    await services.aclose()
    return ids


async def test_held_shards_come_from_disk_and_from_the_cache(tmp_path: Path) -> None:
    """The shards a storage holds sessions of are found on disk before any index, and in the
    projection cache for sessions created afterwards."""
    data = tmp_path / "data"
    before = await _sessions_in(data, 3)
    (data / CACHE_NAME).unlink()
    services = build_session_services(data, index_on_start=False)
    held = held_shards_of(services.directory, SHARDS)
    assert services.directory.cache.count() == 0
    assert held() == {shard_of(s, SHARDS) for s in before}
    later = _id_in(next(s for s in range(SHARDS) if s not in held()))
    await services.directory.create(SessionHeader(id=later, created_at=9, cwd="/"))
    assert held() == {shard_of(s, SHARDS) for s in [*before, later]}
    await services.aclose()


@pytest.mark.etcd
async def test_storage_that_holds_sessions_binds_at_claim(
    etcd: EtcdCluster, cluster_name: str, tmp_path: Path
) -> None:
    """A host whose data directory already holds sessions (written before, not yet indexed)
    binds their shards when it claims them, and only those."""
    url = f"{etcd.etcd_url}/{cluster_name}"
    data = tmp_path / "data"
    sessions = await _sessions_in(data, 2)
    (data / CACHE_NAME).unlink()
    storage = Placement.build(data_dir=data, host_id="a").storage_id
    with trio.fail_after(30):
        async with (
            open_etcd_coordinator(
                etcd.urls, cluster=cluster_name, shard_count=SHARDS, storage_id="observer"
            ) as observer,
            running_cluster(tmp_path, extra=["--coordinator", url, "--host-id", "a"], data=data),
        ):
            await _settled(observer, 1)
            expected = {shard_of(s, SHARDS): storage for s in sessions}
            while await _bindings(etcd, cluster_name) != expected:
                await trio.sleep(0.1)  # bound right after each claim


async def test_a_binding_gone_from_the_view_is_bound_again_at_the_next_first_write(
    tmp_path: Path,
) -> None:
    """Known-bound shards skip the coordinator until a view no longer shows their binding
    (evicted); then the next first write binds again."""

    class Recording:
        def __init__(self) -> None:
            self.bound: list[int] = []

        async def bind(self, claim: Any) -> None:
            self.bound.append(claim.shard)

    coordinator = Recording()
    gate = ShardGate("w1", SHARDS)
    gate.own(_claim(4))
    binder = ShardBinder(coordinator, gate, "s")  # type: ignore[arg-type]
    await binder.before_write(_id_in(4))
    await binder.before_write(_id_in(4))
    assert coordinator.bound == [4]
    members = (Member(worker_id="w1", endpoint="e", storage_id="s"),)
    claims = (_claim(4),)
    binder.observe(
        ClusterView(
            revision=9,
            shard_count=SHARDS,
            members=members,
            claims=claims,
            bindings=(Binding(shard=4, storage_id="s"),),
        )
    )
    await binder.before_write(_id_in(4))
    assert coordinator.bound == [4]
    binder.observe(ClusterView(revision=10, shard_count=SHARDS, members=members, claims=claims))
    await binder.before_write(_id_in(4))
    assert coordinator.bound == [4, 4]
