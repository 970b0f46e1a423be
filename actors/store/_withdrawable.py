"""A blocking write that a cancel can still withdraw until a worker thread starts it.

An append's batch is written in a worker thread (`trio.to_thread`). On a busy two-core host
the thread may start a few milliseconds after it was asked to; a cancel that arrives in that
gap used to wait for the whole write and then get the call's result. `write_withdrawable`
lets that cancel win instead: whichever comes first, the thread starting the write or the
cancel, decides, under a lock, and a withdrawn write never runs. So the caller is answered
`cancelled` at once, and truthfully: nothing was written. Once the thread has started, the
write finishes and its outcome is returned, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

import outcome
import trio

__all__ = ["write_withdrawable"]

T = TypeVar("T")


class _Claim(Generic[T]):
    """Who has the write: the thread that starts it, or the cancel that withdraws it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken = False
        self.result: outcome.Outcome[T] | None = None
        self.finished = trio.Event()

    def take(self) -> bool:
        """Claim the write; false if the other party has it."""
        with self._lock:
            if self._taken:
                return False
            self._taken = True
            return True


async def write_withdrawable(write: Callable[[], T]) -> T:
    """Run ``write`` in a worker thread and return its result (or raise its error).

    Raises:
        trio.Cancelled: the caller was cancelled before the thread started ``write``; it
            never runs (the caller takes back whatever it had queued for it).

    Cancellation: once the thread has started ``write``, a cancel waits (shielded) for it to
    finish and the call returns its outcome; the cancel is delivered at the caller's next
    checkpoint.
    """
    claim: _Claim[T] = _Claim()
    token = trio.lowlevel.current_trio_token()

    def run() -> None:
        if not claim.take():
            return  # withdrawn: the caller was answered already
        claim.result = outcome.capture(write)
        try:
            token.run_sync_soon(claim.finished.set)
        except trio.RunFinishedError:  # pragma: no cover - the loop ended meanwhile
            pass

    try:
        await trio.to_thread.run_sync(run, abandon_on_cancel=True)
    except trio.Cancelled:
        if claim.take():  # before the thread: the write never runs
            raise
        with trio.CancelScope(shield=True):
            await claim.finished.wait()
    assert claim.result is not None
    return claim.result.unwrap()
