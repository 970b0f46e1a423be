"""``serve --workers 3 --coordinator etcd://…`` with real processes and a real etcd."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import trio

from actors.cluster import rendezvous_owner, shard_of
from actors.cluster._etcd_http import open_etcd_client, prefix_end
from tests.actors.cluster._cluster import SHARDS, running_cluster, user_message
from tests.actors.cluster._etcd import EtcdCluster
from wire import open_client

#: With a coordinator, worker ids are ``<host-id>-w1…`` (cluster-unique across hosts).
HOST = "h1"
WORKERS = [f"{HOST}-w1", f"{HOST}-w2", f"{HOST}-w3"]


@pytest.mark.etcd
async def test_three_workers_on_etcd_own_every_shard_once(
    tmp_path: Path, etcd: EtcdCluster
) -> None:
    """Three workers joined through etcd own every shard exactly once (the rendezvous owner, on
    its own lease), the published map's revision is at least every claim's epoch, etcd's watch
    history never shows a shard created while held, calls reach the owners, and a drained
    cluster leaves no member or claim in etcd."""
    cluster_name = f"t{uuid.uuid4().hex[:10]}"
    prefix = f"/agent-actors/{cluster_name}/".encode()
    url = f"{etcd.etcd_url}/{cluster_name}"
    async with (
        running_cluster(
            tmp_path, workers=3, extra=["--coordinator", url, "--host-id", HOST]
        ) as cluster,
        open_etcd_client(etcd.urls) as etcd_client,
    ):
        with trio.fail_after(60):
            async with open_client(cluster.address) as client:
                shard_map = (await client.call("system/describe"))["cluster"]
                assert sorted(shard_map["workers"]) == WORKERS
                assert shard_map["owners"] == [rendezvous_owner(s, WORKERS) for s in range(SHARDS)]
                assert all(0 < e <= shard_map["revision"] for e in shard_map["epochs"])
                for n in range(6):
                    agent = (await client.call("agents/create", {"title": f"a{n}", "cwd": "/"}))[
                        "agentId"
                    ]
                    appended = await client.call(
                        "sessions/append", {"agentId": agent, "events": [user_message("hi")]}
                    )
                    assert len(appended["seqs"]) == 1
                    assert shard_map["owners"][shard_of(agent, SHARDS)] in WORKERS

            revision, kvs = await etcd_client.range(prefix, prefix_end(prefix))
            keys = {kv.key[len(prefix) :].decode(): kv for kv in kvs}
            members = {k.removeprefix("members/"): kv for k, kv in keys.items() if "members/" in k}
            assert sorted(members) == WORKERS
            shards = {
                int(k.removeprefix("shards/")): kv for k, kv in keys.items() if "shards/" in k
            }
            assert sorted(shards) == list(range(SHARDS))
            for shard, kv in shards.items():
                owner = json.loads(kv.value)["workerId"]
                assert owner == shard_map["owners"][shard]
                assert kv.lease == members[owner].lease
                assert kv.create_revision == shard_map["epochs"][shard]
                assert kv.create_revision <= shard_map["revision"] <= revision

            held: dict[bytes, int] = {}
            batches = etcd_client.watch(prefix, prefix_end(prefix), start_revision=1)
            async for batch in batches:
                for deleted, kv in batch.events:
                    if b"/shards/" not in kv.key:
                        continue
                    if deleted:
                        held.pop(kv.key, None)
                    else:
                        assert held.get(kv.key, kv.create_revision) == kv.create_revision, (
                            f"{kv.key!r} re-created while held"
                        )
                        held[kv.key] = kv.create_revision
                if batch.revision >= revision:
                    break
            await batches.aclose()
            assert len(held) == SHARDS

        assert await cluster.stop() == 0
        with trio.fail_after(10):
            _, left = await etcd_client.range(prefix + b"members/", prefix_end(prefix))
        assert [kv.key for kv in left] == []


def test_coordinator_needs_workers_and_etcd_url(tmp_path: Path) -> None:
    """--coordinator without --workers, or with a non-etcd URL, is a usage error."""
    base = [sys.executable, "-m", "actors", "serve", "--data", str(tmp_path)]
    for extra, message in [
        (["--coordinator", "etcd://127.0.0.1:1"], "--coordinator needs --workers"),
        (["--workers", "2", "--coordinator", "tcp://x:1"], "must be an etcd://host:port URL"),
    ]:
        result = subprocess.run(
            [*base, *extra], capture_output=True, text=True, timeout=60, check=False
        )
        assert result.returncode == 2, result.stderr
        assert message in result.stderr
