"""A restarted one-host coordinator hands out epochs above those of its previous life."""

from __future__ import annotations

from pathlib import Path

import trio

from actors.cluster._coordinator import Member
from actors.cluster._coordinator_local import InProcessCoordinator
from actors.cluster._epoch_floor import FLOOR_FILE, revision_floor


def test_the_floor_rises_on_every_start_even_when_the_clock_steps_back(tmp_path: Path) -> None:
    """Each start stores a floor above the last one, also with a clock set back."""
    first = revision_floor(tmp_path, now_us=5_000_000)
    assert first == 5_000_000
    assert (tmp_path / FLOOR_FILE).read_text(encoding="ascii").strip() == str(first)
    second = revision_floor(tmp_path, now_us=1_000)  # the clock went back
    assert second > first
    third = revision_floor(tmp_path, now_us=second + 10**12)  # much later
    assert third == second + 10**12


def test_a_damaged_floor_file_falls_back_to_the_clock(tmp_path: Path) -> None:
    """Garbage in the file is not a crash: the clock alone gives the floor."""
    (tmp_path / FLOOR_FILE).parent.mkdir(parents=True)
    (tmp_path / FLOOR_FILE).write_text("not a number\n", encoding="ascii")
    assert revision_floor(tmp_path, now_us=7_000) == 7_000


async def test_epochs_of_a_restarted_coordinator_exceed_the_previous_ones(tmp_path: Path) -> None:
    """Claims after a restart (a new coordinator from the stored floor) have higher epochs."""
    member = Member(worker_id="w1", endpoint="ipc:///tmp/w1.sock")
    epochs = []
    for _ in range(2):
        coordinator = InProcessCoordinator(4, first_revision=revision_floor(tmp_path))
        lease = await coordinator.join(member, ttl=5)
        for shard in range(4):
            claim = await coordinator.claim(lease, shard)
            assert claim is not None
            epochs.append(claim.epoch)
        await coordinator.leave(lease)
        await trio.lowlevel.checkpoint()
    assert max(epochs[:4]) < min(epochs[4:])
