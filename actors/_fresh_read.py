"""One blocking read shared by every concurrent caller, never older than the caller's call.

The candidates service reads the projection cache's revision (a SQLite row another process may
change) before each query, in a worker thread. With many calls in flight, a thread per call made
the threads and the event loop take turns on the GIL: on a 2-core machine one worker then spent
twice the CPU per candidates call, most of it switching (26 context switches per call). Here at
most one read runs at a time, and the callers that arrive meanwhile share the next one: a read
that started before a caller asked may predate a write the caller has seen, so it is not theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import attrs
import trio

__all__ = ["FreshRead"]

T = TypeVar("T")


@attrs.define(eq=False)
class _Read(Generic[T]):
    #: How many reads had started before this one, itself included.
    seq: int
    done: trio.Event = attrs.Factory(trio.Event)
    value: T | None = None
    error: BaseException | None = None


class FreshRead(Generic[T]):
    """``await fresh.get()`` returns ``read()``, run in a worker thread, from a run that started
    after the call; concurrent calls share runs.

    A caller whose run failed gets its exception; one whose run's leader was cancelled before
    it could start the thread starts a run itself.
    """

    def __init__(self, read: Callable[[], T]) -> None:
        self._read = read
        self._started = 0
        self._running: _Read[T] | None = None

    async def get(self) -> T:
        asked_after = self._started
        while True:
            running = self._running
            if running is None:
                return await self._lead()
            await running.done.wait()
            if running.seq <= asked_after or isinstance(running.error, trio.Cancelled):
                continue  # it may predate what we have seen, or it never ran: read again
            if running.error is not None:
                raise running.error
            return running.value  # type: ignore[return-value]  # set when error is None

    async def _lead(self) -> T:
        self._started += 1
        run: _Read[T] = _Read(seq=self._started)
        self._running = run
        try:
            run.value = await trio.to_thread.run_sync(self._read)
            return run.value
        except BaseException as exc:
            run.error = exc
            raise
        finally:
            self._running = None
            run.done.set()
