"""Storage modes: shard bindings in etcd, storage-aware placement, and ``cluster evict-host``."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
import trio

from actors._config import ConfigError, load_config
from actors.cluster import Claim, ClusterView, Member, desired_shards, rendezvous_owner
from actors.cluster._coordinator import Binding, ClaimLostError
from actors.cluster._coordinator_etcd import EtcdCoordinator, open_etcd_coordinator
from actors.cluster._etcd_http import open_etcd_client, prefix_end
from actors.cluster._shards import eligible_workers, placement_owner
from actors.cluster._storage import EvictionRefusedError, Placement, evict_host, stranded
from actors.cluster._supervisor import ClusterOptions
from tests.actors.cluster._etcd import EtcdCluster

SHARDS = 8
TTL = 30.0


def _view(
    members: dict[str, str], bindings: dict[int, str], claims: dict[int, str] | None = None
) -> ClusterView:
    return ClusterView(
        revision=10,
        shard_count=SHARDS,
        members=tuple(
            Member(worker_id=w, endpoint=f"ipc://{w}", storage_id=s)
            for w, s in sorted(members.items())
        ),
        claims=tuple(
            Claim(shard=s, worker_id=w, endpoint=f"ipc://{w}", epoch=5, lease_id=1)
            for s, w in sorted((claims or {}).items())
        ),
        bindings=tuple(Binding(shard=s, storage_id=b) for s, b in sorted(bindings.items())),
    )


class TestPlacement:
    def test_unbound_view_places_like_plain_rendezvous(self) -> None:
        """Without bindings, the view-based placement equals rendezvous over every member."""
        view = _view({"a-w1": "a", "a-w2": "a", "b-w1": "b"}, {})
        ids = view.worker_ids()
        for worker in ids:
            assert desired_shards(worker, view) == desired_shards(worker, ids, SHARDS)
        assert [placement_owner(view, s) for s in range(SHARDS)] == [
            rendezvous_owner(s, ids) for s in range(SHARDS)
        ]

    def test_bound_shard_goes_only_to_workers_on_its_storage(self) -> None:
        """A shard bound to storage ``a`` is desired only by workers that see ``a``."""
        view = _view({"a-w1": "a", "a-w2": "a", "b-w1": "b"}, {s: "a" for s in range(SHARDS)})
        assert desired_shards("b-w1", view) == set()
        together = desired_shards("a-w1", view) | desired_shards("a-w2", view)
        assert together == set(range(SHARDS))
        assert all(placement_owner(view, s) in {"a-w1", "a-w2"} for s in range(SHARDS))

    def test_joining_worker_takes_only_unbound_shards(self) -> None:
        """A worker the view does not list yet may be placed only on unbound shards."""
        view = _view({"a-w1": "a"}, {0: "a", 1: "a"})
        assert eligible_workers(view, 0, also="b-w1") == ["a-w1"]
        assert eligible_workers(view, 5, also="b-w1") == ["a-w1", "b-w1"]
        assert desired_shards("b-w1", view) <= set(range(2, SHARDS))

    def test_shard_without_live_storage_is_stranded(self) -> None:
        """A free shard bound to a storage no member sees is stranded; a held or unbound one
        is not."""
        view = _view({"b-w1": "b"}, {0: "a", 1: "b", 2: "a"}, claims={2: "b-w1"})
        assert stranded(view, 0)
        assert not stranded(view, 1)  # its storage has a live worker
        assert not stranded(view, 2)  # still held (its owner's lease has not expired)
        assert not stranded(view, 3)  # unbound
        assert placement_owner(view, 0) is None

    def test_placement_defaults_and_shared_needs_an_id(self, tmp_path: Path) -> None:
        """Local mode names the storage ``<host>:<data dir>``; shared mode needs an id."""
        local = Placement.build(data_dir=tmp_path, host_id="h1")
        assert local.storage_id == f"h1:{tmp_path.resolve()}"
        assert local.storage_mode == "local"
        shared = Placement.build(data_dir=tmp_path, storage_mode="shared", storage_id="nfs")
        assert (shared.storage_id, shared.storage_mode) == ("nfs", "shared")
        with pytest.raises(ValueError, match=r"^storage mode shared needs a storage id"):
            Placement.build(data_dir=tmp_path, storage_mode="shared")

    def test_worker_ids_are_host_qualified_only_with_a_coordinator(self) -> None:
        """``w1…`` on one host; ``<host-id>-w1…`` when workers join a shared coordinator."""
        assert ClusterOptions(workers=2).worker_ids() == ["w1", "w2"]
        options = ClusterOptions(workers=2, coordinator="etcd://x:1", host_id="east")
        assert options.worker_ids() == ["east-w1", "east-w2"]


class TestConfig:
    def test_cluster_table_is_read(self, tmp_path: Path) -> None:
        """``[cluster]`` keys reach `Config.cluster`."""
        path = tmp_path / "c.toml"
        path.write_text(
            '[cluster]\nhostId = "east"\nstorageMode = "shared"\nstorageId = "nfs"\n'
            'workerEndpoint = "tcp://10.0.0.5:*"\nrelayWritesPerAgent = 3\n'
        )
        cluster = load_config(path).cluster
        assert cluster.relay_writes_per_agent == 3
        assert (cluster.host_id, cluster.storage_mode, cluster.storage_id) == (
            "east",
            "shared",
            "nfs",
        )
        assert cluster.worker_endpoint == "tcp://10.0.0.5:*"

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            ('storageMode = "nfs"', "storageMode must be local or shared"),
            ("hostId = 3", "hostId must be a non-empty string"),
            ('host = "x"', "unknown key 'host' in [cluster]"),
            ("relayWritesPerAgent = 0", "relayWritesPerAgent must be an integer of at least 1"),
            ("relayWritesPerAgent = 1.5", "relayWritesPerAgent must be an integer of at least 1"),
            ("relayWritesPerAgent = true", "relayWritesPerAgent must be an integer of at least 1"),
        ],
    )
    def test_bad_cluster_keys_are_refused(self, tmp_path: Path, body: str, message: str) -> None:
        """A wrong value or an unknown key in ``[cluster]`` is a ConfigError naming it."""
        path = tmp_path / "c.toml"
        path.write_text(f"[cluster]\n{body}\n")
        with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
            load_config(path)


def test_cli_usage_errors(tmp_path: Path) -> None:
    """Shared mode without a storage id, a non-loopback worker endpoint without --insecure,
    and a lease TTL that is not positive are usage errors."""
    base = [sys.executable, "-m", "actors", "serve", "--data", str(tmp_path), "--workers", "1"]
    cases = [
        (
            ["--coordinator", "etcd://127.0.0.1:1", "--storage-mode", "shared"],
            "--storage-mode shared needs --storage-id",
        ),
        (["--worker-endpoint", "tcp://10.9.9.9:*"], "--worker-endpoint: refusing to serve"),
        (["--lease-ttl", "0"], "--lease-ttl must be positive, got 0.0"),
        (["--lease-ttl", "nan"], "--lease-ttl must be positive, got nan"),
    ]
    for extra, message in cases:
        result = subprocess.run(
            [*base, *extra], capture_output=True, text=True, timeout=60, check=False
        )
        assert result.returncode == 2, result.stderr
        assert message in result.stderr


# -- against a real etcd ----------------------------------------------------------------------


def _member(name: str) -> Member:
    return Member(worker_id=name, endpoint=f"ipc:///tmp/{name}.sock")


def _open(
    etcd: EtcdCluster, name: str, host: str, storage: str
) -> AbstractAsyncContextManager[EtcdCoordinator]:
    return open_etcd_coordinator(
        etcd.urls, cluster=name, shard_count=SHARDS, host=host, storage_id=storage
    )


async def _bindings(etcd: EtcdCluster, name: str) -> dict[int, dict[str, object]]:
    prefix = f"/agent-actors/{name}/bindings/".encode()
    async with open_etcd_client(etcd.urls) as client:
        _, kvs = await client.range(prefix, prefix_end(prefix))
    assert all(kv.lease == 0 for kv in kvs)
    return {int(kv.key[len(prefix) :]): json.loads(kv.value) for kv in kvs}


@pytest.mark.etcd
async def test_claim_binds_nothing_and_bind_restricts_later_claims(
    etcd: EtcdCluster, cluster_name: str
) -> None:
    """A claim writes no binding; a bind records a lease-less one; after the owner's lease is
    gone the shard stays bound: a worker on another storage is refused, one on the same storage
    succeeds, and an unbound shard is open to anyone."""
    with trio.fail_after(30):
        async with (
            _open(etcd, cluster_name, "a", "a:/data") as host_a,
            _open(etcd, cluster_name, "b", "b:/data") as host_b,
        ):
            lease_a = await host_a.join(_member("a-w1"), ttl=TTL)
            first = await host_a.claim(lease_a, 3)
            assert first is not None
            assert await _bindings(etcd, cluster_name) == {}
            await host_a.bind(first)
            assert (await _bindings(etcd, cluster_name))[3]["storageId"] == "a:/data"
            view = await host_b.view()
            assert view.binding(3) == "a:/data"
            assert view.members[0].storage_id == "a:/data"

            await host_a.leave(lease_a)
            lease_b = await host_b.join(_member("b-w1"), ttl=TTL)
            assert await host_b.claim(lease_b, 3) is None  # bound elsewhere
            fourth = await host_b.claim(lease_b, 4)
            assert fourth is not None  # unbound: claimed, still unbound
            assert (await host_b.view()).binding(4) is None
            await host_b.bind(fourth)
            view = await host_b.view()
            assert stranded(view, 3)
            assert (view.binding(3), view.binding(4)) == ("a:/data", "b:/data")

            lease_a2 = await host_a.join(_member("a-w1"), ttl=TTL)
            again = await host_a.claim(lease_a2, 3)
            assert again is not None
            assert again.epoch > first.epoch
            assert (await _bindings(etcd, cluster_name))[3]["host"] == "a"


@pytest.mark.etcd
async def test_bind_needs_the_claim_and_an_unbound_or_own_shard(
    etcd: EtcdCluster, cluster_name: str
) -> None:
    """A bind by a claim that lost its shard binds nothing (`ClaimLostError`), also once
    another storage owns or bound the shard; a second bind of one's own shard is fine; a claim
    never races a bind (it compares the binding key)."""
    with trio.fail_after(30):
        async with (
            _open(etcd, cluster_name, "a", "a:/data") as host_a,
            _open(etcd, cluster_name, "b", "b:/data") as host_b,
        ):
            lease_a = await host_a.join(_member("a-w1"), ttl=TTL)
            stale = await host_a.claim(lease_a, 5)
            assert stale is not None
            assert await host_a.release(stale)
            with pytest.raises(ClaimLostError, match=r"shard 5: worker 'a-w1' no longer holds"):
                await host_a.bind(stale)
            lease_b = await host_b.join(_member("b-w1"), ttl=TTL)
            taken = await host_b.claim(lease_b, 5)
            assert taken is not None
            with pytest.raises(ClaimLostError):
                await host_a.bind(stale)
            assert await _bindings(etcd, cluster_name) == {}
            await host_b.bind(taken)
            await host_b.bind(taken)  # already ours: fine
            assert await host_b.release(taken)
            # a's guess "unbound" is stale: its claim re-reads and refuses, never races.
            assert await host_a.claim(lease_a, 5) is None
            assert (await _bindings(etcd, cluster_name))[5]["storageId"] == "b:/data"
            # A claim taken before someone else bound the shard cannot bind it afterwards.
            lease_b2 = await host_b.join(_member("b-w2"), ttl=TTL)
            early = await host_a.claim(lease_a, 6)
            assert early is not None
            assert await host_a.release(early)
            other = await host_b.claim(lease_b2, 6)
            assert other is not None
            await host_b.bind(other)
            assert await host_b.release(other)
            with pytest.raises(ClaimLostError):
                await host_a.bind(early)
            assert (await _bindings(etcd, cluster_name))[6]["storageId"] == "b:/data"


@pytest.mark.etcd
async def test_shared_storage_moves_between_hosts(etcd: EtcdCluster, cluster_name: str) -> None:
    """Two hosts naming one shared storage may each take a shard the other bound."""
    with trio.fail_after(30):
        async with (
            _open(etcd, cluster_name, "a", "nfs") as host_a,
            _open(etcd, cluster_name, "b", "nfs") as host_b,
        ):
            lease_a = await host_a.join(_member("a-w1"), ttl=TTL)
            bound = await host_a.claim(lease_a, 1)
            assert bound is not None
            await host_a.bind(bound)
            await host_a.leave(lease_a)
            lease_b = await host_b.join(_member("b-w1"), ttl=TTL)
            moved = await host_b.claim(lease_b, 1)
            assert moved is not None
            assert moved.worker_id == "b-w1"


@pytest.mark.etcd
async def test_evict_host_frees_its_bindings(etcd: EtcdCluster, cluster_name: str) -> None:
    """evict-host refuses while the host has live members, then (or with --force) deletes its
    bindings, keeps those of a storage another host still mounts, and the shards become
    claimable elsewhere."""
    url = f"{etcd.etcd_url}/{cluster_name}"
    with trio.fail_after(30):
        async with (
            _open(etcd, cluster_name, "a", "a:/data") as host_a,
            _open(etcd, cluster_name, "b", "b:/data") as host_b,
            _open(etcd, cluster_name, "a", "nfs") as shared_a,
            _open(etcd, cluster_name, "c", "nfs") as shared_c,
        ):
            lease_a = await host_a.join(_member("a-w1"), ttl=TTL)
            for shard in (0, 1):
                claim = await host_a.claim(lease_a, shard)
                assert claim is not None
                await host_a.bind(claim)
            lease_shared = await shared_a.join(_member("a-w2"), ttl=TTL)
            claim = await shared_a.claim(lease_shared, 2)
            assert claim is not None
            await shared_a.bind(claim)
            await shared_c.join(_member("c-w1"), ttl=TTL)

            with pytest.raises(EvictionRefusedError, match=r"a-w1, a-w2"):
                await evict_host(url, "a")
            assert sorted(await _bindings(etcd, cluster_name)) == [0, 1, 2]

            forced = await evict_host(url, "a", force=True)
            assert forced.live_members == ("a-w1", "a-w2")
            assert (forced.evicted, forced.kept) == ((0, 1), (2,))
            await host_a.leave(lease_a)
            await shared_a.leave(lease_shared)
            assert sorted(await _bindings(etcd, cluster_name)) == [2]
            assert (await evict_host(url, "a")).evicted == ()

            lease_b = await host_b.join(_member("b-w1"), ttl=TTL)
            await host_b.view()  # refresh its idea of the bindings
            taken = await host_b.claim(lease_b, 0)
            assert taken is not None
            await host_b.bind(taken)
            assert (await _bindings(etcd, cluster_name))[0]["storageId"] == "b:/data"


@pytest.mark.etcd
def test_evict_host_command(etcd: EtcdCluster) -> None:
    """``agent-actors cluster evict-host`` prints what it did; a bad URL is a usage error."""
    name = f"st-{uuid.uuid4().hex[:10]}"
    command = [sys.executable, "-m", "actors", "cluster", "evict-host"]
    done = subprocess.run(
        [*command, "h9", "--coordinator", f"{etcd.etcd_url}/{name}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "evicted host h9: 0 shard binding(s) deleted" in done.stdout
    bad = subprocess.run(
        [*command, "h9", "--coordinator", "tcp://x:1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert "not an etcd URL" in bad.stderr
