"""Where an append's batch is written: on the event loop, or in a worker thread.

A worker thread keeps a slow disk from holding up the event loop, but it costs two thread
wake-ups per append (hand the batch over, hand the outcome back), and on a busy host each
waits for a core. On a fast disk that costs more than the write: a one-event append with fsync
took 0.50 ms at p50 through a thread and 0.30 ms written inline, and a cancel waiting for an
append's outcome waited for those wake-ups as well (docs/benchmarks.md, "Appends written
inline").

So `WritePlacement` writes a batch inline while the disk is fast and the batch is small, and
in a worker thread (`write_withdrawable`) otherwise:

- a batch whose lines exceed `INLINE_BYTES` (by default) goes to a thread (compressing it
  takes time); with the store's ``inline_writes`` off, or a writable root on a network file
  system (`actors.store._remote_disks`), every batch does;
- every inline write is timed. When the median of the last `SAMPLES` exceeds `SLOW_WRITE` (a
  slow disk), or one write exceeds `STALL` (a disk that stalls), this store's writes go to
  threads for `RETRY_INLINE_AFTER`; then the next small batch is written inline again, as a
  probe. The median, not the mean, because on a busy host a write is sometimes preempted: that
  is time the loop would have lost anyway, and not the disk's. Writes in threads are not
  timed: waiting for the GIL there would read as a slow disk;
- a probe that is slow itself doubles the wait before the next one, up to `RETRY_INLINE_MAX`;
  a fast probe sets it back to `RETRY_INLINE_AFTER`. A disk that stalls again and again (fsync
  behind another process's heavy writes, say) would otherwise take one stall out of the loop,
  and so out of every call this process serves, every second; now the stalls it costs the loop
  thin out to one every `RETRY_INLINE_MAX`. A disk that got fast again is found so by the next
  probe, and probed every `RETRY_INLINE_AFTER` from then on until the median agrees.

Cancellation is the same either way: a cancel delivered before the write starts withdraws it
(nothing is written); once it has started, it finishes and the call returns its outcome.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import TypeVar

import trio

from actors.store._withdrawable import write_withdrawable

__all__ = [
    "INLINE_BYTES",
    "RETRY_INLINE_AFTER",
    "RETRY_INLINE_MAX",
    "SAMPLES",
    "SLOW_WRITE",
    "STALL",
    "WritePlacement",
]

T = TypeVar("T")

#: The largest batch (bytes of its lines, before compression) written on the event loop.
INLINE_BYTES = 64 * 1024
#: Seconds: a median inline write slower than this means a slow disk.
SLOW_WRITE = 0.001
#: Seconds: one inline write slower than this means a disk that stalls.
STALL = 0.05
#: How many of the last inline writes the median is taken over.
SAMPLES = 16
#: Seconds writes stay in threads after the disk was found slow, before a probe.
RETRY_INLINE_AFTER = 1.0
#: The longest wait between probes, reached by doubling while the probes find the disk slow.
RETRY_INLINE_MAX = 64.0


class WritePlacement:
    """Where a store's batches are written (one per store, shared by its sessions).

    Args:
        inline_bytes: the largest batch written on the event loop (negative: none is).
        clock: seconds, monotonic (for tests).
    """

    def __init__(
        self, *, inline_bytes: int = INLINE_BYTES, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._inline_bytes = inline_bytes
        self._clock = clock
        self._took: deque[float] = deque(maxlen=SAMPLES)
        self._threads_until = -float("inf")
        #: How long writes stay in threads the next time the disk is found slow.
        self._retry_after = RETRY_INLINE_AFTER
        #: Whether the next inline write is a probe (writes went to threads before it).
        self._probing = False
        #: Batches written inline and in worker threads (for tests and benchmarks).
        self.inline_writes = 0
        self.thread_writes = 0

    def inline(self, size: int) -> bool:
        """Whether a batch of ``size`` bytes would be written on the event loop now."""
        return size <= self._inline_bytes and self._clock() >= self._threads_until

    async def write(self, write: Callable[[], T], *, size: int, may_block: bool = False) -> T:
        """Run the blocking ``write`` of a ``size``-byte batch and return its result.

        Args:
            write: writes the batch (raises what the write raises).
            size: the batch's bytes (`inline` decides by them).
            may_block: ``write`` may wait on a lock another thread holds: always a thread.

        Raises:
            trio.Cancelled: the caller was cancelled before ``write`` started; it never runs.

        Cancellation: see the module. Written inline, the call is a checkpoint before the
        write (a cancel already on its way withdraws it) and none after it.
        """
        if may_block or not self.inline(size):
            self.thread_writes += 1
            return await write_withdrawable(write)
        await trio.lowlevel.checkpoint()
        self.inline_writes += 1
        started = self._clock()
        try:
            return write()
        finally:
            self._timed(self._clock() - started)

    def _timed(self, took: float) -> None:
        self._took.append(took)
        probe, self._probing = self._probing, False
        if probe:
            # The probe's own time, not the median (which still holds the slow writes before
            # it), says whether the disk is still slow.
            slow_probe = took > SLOW_WRITE
            self._retry_after = (
                min(2 * self._retry_after, RETRY_INLINE_MAX) if slow_probe else RETRY_INLINE_AFTER
            )
        if took > STALL or statistics.median(self._took) > SLOW_WRITE:
            self._threads_until = self._clock() + self._retry_after
            self._probing = True
