"""FreshRead (actors/_fresh_read.py): concurrent callers share reads, and no caller gets a read
that started before it asked."""

from __future__ import annotations

import threading

import pytest
import trio

from actors._fresh_read import FreshRead


class Source:
    """A value that the test changes, read by a blocking function that can be held."""

    def __init__(self) -> None:
        self.value = 0
        self.reads = 0
        self.release = threading.Event()
        self.release.set()
        self.entered = threading.Event()

    def read(self) -> int:
        self.reads += 1
        value = self.value  # what a read that started now sees
        self.entered.set()
        self.release.wait(10)
        return value


async def test_callers_that_arrive_during_a_read_share_the_next_one() -> None:
    """Fifty callers arriving while a read runs cost one more read, not fifty, and all of them
    see the value written before they asked."""
    source = Source()
    fresh = FreshRead(source.read)
    source.release.clear()
    results: list[int] = []

    async def get() -> None:
        results.append(await fresh.get())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(get)
        await trio.to_thread.run_sync(source.entered.wait)  # the first read has started
        source.value = 1  # a write the later callers have seen
        for _ in range(50):
            nursery.start_soon(get)
        await trio.testing.wait_all_tasks_blocked()
        source.release.set()
    assert source.reads == 2
    assert sorted(results) == [0] + [1] * 50


async def test_a_lone_caller_reads_every_time() -> None:
    """Calls one after another each run their own read and see the latest value."""
    source = Source()
    fresh = FreshRead(source.read)
    for value in range(3):
        source.value = value
        assert await fresh.get() == value
    assert source.reads == 3


async def test_a_failed_read_fails_its_callers_and_the_next_call_reads_again() -> None:
    """A read that raises fails the callers sharing it; the next call reads afresh."""
    calls = 0

    def read() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError("disk went away")
        return 7

    fresh = FreshRead(read)
    with pytest.raises(OSError, match="disk went away"):
        await fresh.get()
    assert await fresh.get() == 7
