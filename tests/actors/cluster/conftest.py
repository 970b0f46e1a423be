"""Fixtures for the cluster tests: a real etcd for the tests marked ``etcd``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from actors.cluster._etcd_http import open_etcd_client, prefix_end
from tests.actors.cluster._etcd import EtcdCluster, etcd_binary, start_etcd


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """One single-member etcd for the session (tests use distinct cluster names in it)."""
    if etcd_binary() is None:
        pytest.skip("etcd binary not found on PATH: apt-get install etcd-server to run etcd tests")
    # The free ports are picked before etcd binds them; another process may take one in
    # between, so try a few times with fresh ports.
    for attempt in range(3):
        directory: Path = tmp_path_factory.mktemp("etcd")
        try:
            cluster = start_etcd(directory)
            break
        except RuntimeError:
            if attempt == 2:
                raise
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
async def cluster_name(etcd: EtcdCluster) -> AsyncIterator[str]:
    """A fresh cluster name in the session's etcd; its leases are revoked afterwards, so no
    expiry lands in a later test's revisions."""
    name = f"c-{uuid.uuid4().hex[:10]}"
    yield name
    with trio.move_on_after(5, shield=True):
        async with open_etcd_client(etcd.urls) as client:
            prefix = f"/agent-actors/{name}/".encode()
            _, kvs = await client.range(prefix, prefix_end(prefix))
            for lease in {kv.lease for kv in kvs if kv.lease}:
                await client.lease_revoke(lease)
