"""The coordinator contract, run against `EtcdCoordinator` over a real etcd member."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from actors.cluster import CoordinatorError
from actors.cluster._coordinator_etcd import EtcdCoordinator, open_etcd_coordinator
from actors.cluster._etcd_http import (
    EtcdClient,
    EtcdUnavailableError,
    b64,
    open_etcd_client,
    prefix_end,
    request_put,
)
from actors.cluster._etcd_url import parse_etcd_url
from tests.actors.cluster._etcd import EtcdCluster, etcd_binary, start_etcd
from tests.actors.cluster.coordinator_contract import SHARDS, TTL, CoordinatorContract, member


async def _wipe(client: EtcdClient, prefix: bytes) -> None:
    """Revoke every lease under ``prefix`` so no expiry lands in a later test's revisions."""
    _, kvs = await client.range(prefix, prefix_end(prefix))
    for lease in {kv.lease for kv in kvs if kv.lease}:
        await client.lease_revoke(lease)
    await client.txn(
        [], [{"request_delete_range": {"key": b64(prefix), "range_end": b64(prefix_end(prefix))}}]
    )


@pytest.fixture
async def etcd_coordinator(etcd: EtcdCluster) -> AsyncIterator[EtcdCoordinator]:
    name = f"test-{uuid.uuid4().hex[:12]}"
    async with open_etcd_coordinator(
        etcd.urls, cluster=name, shard_count=SHARDS, host="h1", storage_id="s1"
    ) as coordinator:
        try:
            yield coordinator
        finally:
            with trio.move_on_after(5, shield=True):
                async with open_etcd_client(etcd.urls) as client:
                    await _wipe(client, coordinator.prefix)


@pytest.mark.etcd
class TestEtcdCoordinator(CoordinatorContract):
    # etcd TTLs are whole seconds; 1 s is the minimum with the test member's election timeout.
    expiry_ttl = 1.0

    @pytest.fixture
    def coordinator(self, etcd_coordinator: EtcdCoordinator) -> EtcdCoordinator:
        return etcd_coordinator


@pytest.mark.etcd
async def test_keys_follow_the_documented_layout(
    etcd: EtcdCluster, etcd_coordinator: EtcdCoordinator
) -> None:
    """members/<id> and shards/<s> hold documented JSON on the lease, epoch is create_revision,
    a claim writes no binding, and a bind records the claimer's storage (bindings/<s>, no
    lease)."""
    lease = await etcd_coordinator.join(member("w1"), ttl=TTL)
    claim = await etcd_coordinator.claim(lease, 6)
    assert claim is not None
    prefix = etcd_coordinator.prefix
    async with open_etcd_client(etcd.urls) as client:
        _, kvs = await client.range(prefix, prefix_end(prefix))
        assert sorted(kv.key[len(prefix) :].decode() for kv in kvs) == [
            "config",
            "members/w1",
            "shards/6",
        ]
        await etcd_coordinator.bind(claim)
        _, kvs = await client.range(prefix, prefix_end(prefix))
    keys = {kv.key[len(prefix) :].decode(): kv for kv in kvs}
    assert sorted(keys) == ["bindings/6", "config", "members/w1", "shards/6"]
    assert json.loads(keys["config"].value) == {"shardCount": SHARDS}
    registered = json.loads(keys["members/w1"].value)
    assert registered.keys() == {
        "endpoint",
        "host",
        "storageId",
        "storageMode",
        "startedAt",
        "version",
    }
    assert (registered["endpoint"], registered["host"], registered["storageId"]) == (
        member("w1").endpoint,
        "h1",
        "s1",
    )
    assert keys["members/w1"].lease == lease.lease_id
    assert json.loads(keys["shards/6"].value) == {
        "workerId": "w1",
        "endpoint": member("w1").endpoint,
        "storageId": "s1",
    }
    assert keys["shards/6"].lease == lease.lease_id
    assert keys["shards/6"].create_revision == claim.epoch
    assert json.loads(keys["bindings/6"].value)["storageId"] == "s1"
    assert keys["bindings/6"].lease == 0


@pytest.mark.etcd
async def test_other_shard_count_is_refused(
    etcd: EtcdCluster, etcd_coordinator: EtcdCoordinator
) -> None:
    """A process started with another shard count than the cluster's is refused."""
    name = etcd_coordinator.prefix.decode().split("/")[2]
    with pytest.raises(CoordinatorError, match=rf"has shardCount {SHARDS}, .* with 16$"):
        async with open_etcd_coordinator(etcd.urls, cluster=name, shard_count=16):
            pass  # pragma: no cover


@pytest.mark.etcd
async def test_malformed_values_are_ignored(
    etcd: EtcdCluster, etcd_coordinator: EtcdCoordinator
) -> None:
    """A key with a value that is not the documented JSON is left out of the view."""
    lease = await etcd_coordinator.join(member("w1"), ttl=TTL)
    prefix = etcd_coordinator.prefix
    async with open_etcd_client(etcd.urls) as client:
        await client.txn([], [request_put(prefix + b"shards/3", b"not json")])
        await client.txn(
            [], [request_put(prefix + b"shards/99", b'{"workerId": "x", "endpoint": "e"}')]
        )
    view = await etcd_coordinator.view()
    assert view.claims == ()
    assert view.worker_ids() == ["w1"]
    assert await etcd_coordinator.claim(lease, 0) is not None


async def test_unreachable_etcd_is_a_typed_error() -> None:
    """With no etcd listening, operations fail with EtcdUnavailableError naming the request."""
    with trio.fail_after(10):
        with pytest.raises(EtcdUnavailableError, match="no etcd member answered /v3/kv/txn"):
            async with open_etcd_coordinator("etcd://127.0.0.1:1", cluster="c", shard_count=4):
                pass  # pragma: no cover


@pytest.mark.parametrize(
    ("url", "bases"),
    [
        ("etcd://127.0.0.1:2379", ["http://127.0.0.1:2379"]),
        ("etcd://a:1,b:2,c:3/", ["http://a:1", "http://b:2", "http://c:3"]),
        ("http://a:1", ["http://a:1"]),
    ],
)
def test_parse_etcd_url(url: str, bases: list[str]) -> None:
    """etcd:// URLs list one gateway base URL per member."""
    assert parse_etcd_url(url) == bases


@pytest.mark.parametrize("url", ["etcd://", "tcp://a:1", "a:1"])
def test_parse_etcd_url_rejects_others(url: str) -> None:
    """Anything but etcd:// or http:// with a host is refused."""
    with pytest.raises(ValueError, match="not an etcd URL"):
        parse_etcd_url(url)


@pytest.mark.etcd
async def test_watch_never_lags_behind_own_writes(
    etcd: EtcdCluster, etcd_coordinator: EtcdCoordinator
) -> None:
    """After a claim returns, the next view the watch yields already holds it, even when the
    watch stream still had an older change to deliver."""
    lease = await etcd_coordinator.join(member("w1"), ttl=TTL)
    prefix = etcd_coordinator.prefix
    with trio.fail_after(10):
        async with (
            open_etcd_client(etcd.urls) as client,
            contextlib.aclosing(etcd_coordinator.watch(0)) as views,
        ):
            first = await anext(views)
            for n in range(3):
                await client.txn([], [request_put(prefix + b"other", str(n).encode())])
                claim = await etcd_coordinator.claim(lease, n)
                assert claim is not None
                view = await anext(views)
                assert view.revision > first.revision
                assert view.owner(n) == claim


@pytest.mark.etcd
async def test_watch_resumes_after_etcd_restarts(tmp_path: Path) -> None:
    """While etcd is down, requests fail typed and the watch waits; once etcd is back (same
    data), the same watch goes on and shows changes made after the restart."""
    if etcd_binary() is None:
        pytest.skip("etcd binary not found on PATH: apt-get install etcd-server")
    own = await trio.to_thread.run_sync(start_etcd, tmp_path)
    try:
        async with open_etcd_coordinator(own.urls, cluster="c", shard_count=SHARDS) as coord:
            lease = await coord.join(member("w1"), ttl=TTL)
            with trio.fail_after(30):
                async with contextlib.aclosing(coord.watch(0)) as views:
                    assert (await anext(views)).worker_ids() == ["w1"]
                    await trio.to_thread.run_sync(own.kill)
                    with pytest.raises(EtcdUnavailableError, match="no etcd member answered"):
                        await coord.view()
                    await trio.to_thread.run_sync(own.restart)
                    claim = await coord.claim(lease, 5)
                    assert claim is not None
                    async for view in views:
                        if view.owner(5) == claim:
                            break
    finally:
        own.stop()
