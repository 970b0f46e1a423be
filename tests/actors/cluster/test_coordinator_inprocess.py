"""The coordinator contract, run against the in-process implementation."""

from __future__ import annotations

import pytest

from actors.cluster import InProcessCoordinator, Member
from tests.actors.cluster.coordinator_contract import SHARDS, CoordinatorContract


class TestInProcessCoordinator(CoordinatorContract):
    @pytest.fixture
    def coordinator(self) -> InProcessCoordinator:
        return InProcessCoordinator(SHARDS)


def test_shard_count_must_be_positive() -> None:
    """A coordinator without shards is refused."""
    with pytest.raises(ValueError, match="shard_count must be positive"):
        InProcessCoordinator(0)


async def test_revoke_reports_whether_lease_was_live() -> None:
    """The supervisor's revoke drops a live lease once and reports a second revoke as stale."""
    coordinator = InProcessCoordinator(SHARDS)
    lease = await coordinator.join(Member(worker_id="w", endpoint="e"), ttl=10)
    assert coordinator.lease_of("w") == lease
    assert coordinator.revoke(lease.lease_id)
    assert not coordinator.revoke(lease.lease_id)
    assert coordinator.lease_of("w") is None
