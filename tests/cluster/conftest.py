"""Fixtures for the cluster tests: a real etcd for the tests marked ``etcd``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster._etcd import EtcdCluster, etcd_binary, start_etcd


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
