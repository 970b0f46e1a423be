"""Where an append's batch is written: small batches on the event loop while the disk is fast;
large ones, and every write while the disk is slow or stalling, in a worker thread."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest
import trio

from actors import ConfigError, load_config
from actors._store_services import SessionServices, build_session_services
from actors.session_log._reader import load_session
from actors.store._events import title_event
from actors.store._write_placement import (
    INLINE_BYTES,
    RETRY_INLINE_AFTER,
    RETRY_INLINE_MAX,
    SAMPLES,
    WritePlacement,
)
from tests.actors.store._writing import prompt, writing_session


class Disk:
    """A write that takes ``took`` seconds on a test clock, and says which thread ran it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.took = 0.0001
        self.threads: list[bool] = []  # True: it ran on the event loop's thread

    def clock(self) -> float:
        return self.now

    def write(self) -> str:
        self.threads.append(threading.current_thread() is threading.main_thread())
        self.now += self.took
        return "written"


async def written(placement: WritePlacement, disk: Disk, *, size: int = 100) -> bool:
    """Write once; whether it ran on the event loop."""
    assert await placement.write(disk.write, size=size) == "written"
    return disk.threads[-1]


async def test_a_small_batch_on_a_fast_disk_is_written_on_the_event_loop() -> None:
    disk = Disk()
    placement = WritePlacement(clock=disk.clock)
    assert [await written(placement, disk) for _ in range(3)] == [True, True, True]
    assert (placement.inline_writes, placement.thread_writes) == (3, 0)


async def test_a_large_batch_or_one_that_may_block_goes_to_a_thread() -> None:
    disk = Disk()
    placement = WritePlacement(clock=disk.clock)
    assert await written(placement, disk, size=INLINE_BYTES + 1) is False
    assert await placement.write(disk.write, size=100, may_block=True) == "written"
    assert disk.threads == [False, False]
    assert await written(placement, disk) is True  # neither made the disk look slow


async def test_a_slow_disk_sends_writes_to_threads_and_is_probed_once_a_retry_period() -> None:
    disk = Disk()
    disk.took = 0.005
    placement = WritePlacement(clock=disk.clock)
    assert await written(placement, disk) is True  # the first write finds the disk slow
    assert [await written(placement, disk) for _ in range(5)] == [False] * 5
    disk.now += RETRY_INLINE_AFTER
    assert await written(placement, disk) is True  # the probe
    assert await written(placement, disk) is False  # still slow


async def test_a_disk_that_got_fast_again_is_written_inline_again() -> None:
    disk = Disk()
    disk.took = 0.005
    placement = WritePlacement(clock=disk.clock)
    await written(placement, disk)
    disk.took = 0.0002
    probes = []
    for _ in range(SAMPLES):
        disk.now += RETRY_INLINE_AFTER
        probes.append(await written(placement, disk))
        if await written(placement, disk):
            break
    assert probes and all(probes)
    assert [await written(placement, disk) for _ in range(3)] == [True] * 3


async def test_preempted_writes_now_and_then_do_not_move_writes_to_threads() -> None:
    """A write that took long because the host preempted it is not the disk's doing: the
    median over the last writes decides."""
    disk = Disk()
    placement = WritePlacement(clock=disk.clock)
    where = []
    for index in range(4 * SAMPLES):
        disk.took = 0.010 if index % 5 == 4 else 0.0003
        where.append(await written(placement, disk))
    assert all(where)


async def test_a_stall_sends_writes_to_threads_for_the_retry_period() -> None:
    disk = Disk()
    placement = WritePlacement(clock=disk.clock)
    await written(placement, disk)
    disk.took = 0.2
    assert await written(placement, disk) is True  # the stall, on the loop once
    disk.took = 0.0002
    assert await written(placement, disk) is False
    disk.now += RETRY_INLINE_AFTER
    assert await written(placement, disk) is True


async def probe_times(placement: WritePlacement, disk: Disk, until: float) -> list[float]:
    """Write every 0.25 s of the test clock until ``until``: when each inline write began."""
    began = []
    while disk.now < until:
        at = disk.now
        if await written(placement, disk):
            began.append(round(at, 2))
        disk.now = at + 0.25
    return began


async def test_a_disk_that_keeps_stalling_is_probed_ever_more_rarely() -> None:
    """Each probe that stalls doubles the wait for the next one, up to the longest wait: the
    loop loses a stall now and then, not one every retry period."""
    disk = Disk()
    disk.took = 0.2
    placement = WritePlacement(clock=disk.clock)
    began = await probe_times(placement, disk, 4 * RETRY_INLINE_MAX)
    gaps = [round(later - earlier) for earlier, later in itertools.pairwise(began)]
    doubling = [2**n for n in range(len(gaps)) if 2**n < RETRY_INLINE_MAX]
    assert gaps[: len(doubling)] == [round(g * RETRY_INLINE_AFTER) for g in doubling]
    assert gaps[len(doubling) :] and set(gaps[len(doubling) :]) == {round(RETRY_INLINE_MAX)}


async def test_a_fast_probe_brings_the_probes_back_to_every_retry_period() -> None:
    disk = Disk()
    disk.took = 0.2
    placement = WritePlacement(clock=disk.clock)
    await probe_times(placement, disk, 20 * RETRY_INLINE_AFTER)  # probes 1, 2, 4, 8 s apart
    disk.took = 0.0002
    began = await probe_times(placement, disk, disk.now + 40 * RETRY_INLINE_AFTER)
    assert began and all(
        later - earlier <= RETRY_INLINE_AFTER + 0.25
        for earlier, later in itertools.pairwise(began[:4])
    )
    assert [await written(placement, disk) for _ in range(3)] == [True] * 3  # inline again


async def test_an_inline_write_cancelled_before_it_starts_never_runs() -> None:
    disk = Disk()
    placement = WritePlacement(clock=disk.clock)
    with trio.CancelScope() as scope:
        scope.cancel()
        await placement.write(disk.write, size=100)
    assert scope.cancelled_caught and disk.threads == []


async def test_an_inline_write_that_fails_raises_its_error_and_is_timed() -> None:
    disk = Disk()
    placement = WritePlacement(clock=disk.clock)

    def full() -> str:
        disk.now += 0.3
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        await placement.write(full, size=100)
    assert await written(placement, disk) is False  # 0.3 s on the loop: a stall


async def test_appends_to_a_store_are_written_inline_and_read_back(
    services: SessionServices,
) -> None:
    state = await writing_session(services)
    placement = services.directory.placement
    before = placement.inline_writes
    outcome = await state.append(prompt("second"))
    assert placement.inline_writes == before + 1
    assert outcome.seqs == (1,) and load_session(state.path).captured_through_seq == 1


async def test_an_append_that_changes_the_listing_is_written_in_a_thread(
    services: SessionServices,
) -> None:
    """Its cache row needs a transaction of its own, whose lock another thread may hold: the
    event loop must not wait for it."""
    state = await writing_session(services)
    placement = services.directory.placement
    inline, threads = placement.inline_writes, placement.thread_writes
    await state.append([title_event("Renamed")])
    assert (placement.inline_writes, placement.thread_writes) == (inline, threads + 1)
    assert state.title == "Renamed"


async def test_a_store_without_inline_writes_writes_every_append_in_a_thread(
    tmp_path: Path,
) -> None:
    services = build_session_services(tmp_path / "data", index_on_start=False, inline_writes=False)
    try:
        state = await writing_session(services)
        await state.append(prompt("second"))
        placement = services.directory.placement
        assert (placement.inline_writes, placement.thread_writes) == (0, 2)
    finally:
        await services.aclose()


def test_inline_writes_is_a_sessions_key_that_takes_a_boolean(tmp_path: Path) -> None:
    path = tmp_path / "server.toml"
    path.write_text("[sessions]\n", "utf-8")
    assert load_config(path).inline_writes is True
    path.write_text("[sessions]\ninlineWrites = false\n", "utf-8")
    assert load_config(path).inline_writes is False
    path.write_text("[sessions]\ninlineWrites = 1\n", "utf-8")
    with pytest.raises(ConfigError, match="inlineWrites must be true or false, got 1"):
        load_config(path)
