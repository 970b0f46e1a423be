"""Admission of calls to one actor: readers together, writers alone, all in arrival order.

A read-only call may run alongside other read-only calls; a state-changing call runs alone.
Admission is first-come first-served: a reader that arrives after a waiting writer waits for
that writer, so writers are never starved and every writer sees the effects of all calls that
arrived before it.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio

__all__ = ["Mailbox", "MailboxStatistics"]


@attrs.frozen(kw_only=True)
class MailboxStatistics:
    #: Calls waiting for admission.
    queued: int
    #: Read-only calls running.
    readers: int
    #: Whether a state-changing call is running.
    writer: bool


@attrs.define(eq=False)
class _Waiter:
    mutates: bool
    admitted: trio.Event = attrs.Factory(trio.Event)


def _granted(mutates: bool) -> _Waiter:
    waiter = _Waiter(mutates)
    waiter.admitted.set()
    return waiter


#: The reservation handed out when a turn is granted on arrival, the usual case: nothing waits
#: on it, so one shared, already-set waiter per kind saves an object and an Event per call.
_GRANTED = {False: _granted(False), True: _granted(True)}


class Mailbox:
    """FIFO reader/writer admission for one actor.

    A call is admitted with :meth:`enter` and releases its turn with :meth:`leave`;
    :meth:`admit` wraps the pair as an ``async with`` block.
    """

    def __init__(self) -> None:
        self._readers = 0
        self._writer = False
        self._queue: collections.deque[_Waiter] = collections.deque()

    def reserve(self, *, mutates: bool) -> _Waiter:
        """Take a place in the queue now (the call arrived); wait for it with :meth:`wait`.

        Reserving when a call arrives, rather than when its task first runs, is what makes
        state-changing calls run in arrival order: trio starts a batch of new tasks in no
        particular order.
        """
        if not self._queue and self._can_enter(mutates):
            self._take(mutates)
            return _GRANTED[mutates]
        waiter = _Waiter(mutates)
        self._queue.append(waiter)
        return waiter

    def try_enter(self, *, mutates: bool) -> bool:
        """Take a turn if one is free right now (nobody queued, nothing excluding it); the
        caller must then :meth:`leave`. ``False`` changes nothing."""
        if not self._queue and self._can_enter(mutates):
            self._take(mutates)
            return True
        return False

    async def wait(self, waiter: _Waiter) -> None:
        """Wait until a reserved turn comes; the caller must :meth:`leave` once done.

        If cancelled, raises ``trio.Cancelled`` and gives the reservation up.
        """
        try:
            if waiter.admitted.is_set():
                await trio.lowlevel.checkpoint_if_cancelled()
            else:
                await waiter.admitted.wait()
        except BaseException:
            self.give_up(waiter)
            raise

    def give_up(self, waiter: _Waiter) -> None:
        """Drop a reservation that will not be used, granted or not."""
        if waiter.admitted.is_set():
            self.leave(mutates=waiter.mutates)
        else:
            self._queue.remove(waiter)
            self._grant()

    def _take(self, mutates: bool) -> None:
        if mutates:
            self._writer = True
        else:
            self._readers += 1

    async def enter(self, *, mutates: bool) -> None:
        """Wait for this call's turn; the caller must :meth:`leave` once done.

        An admission that needs no waiting (the usual case) is a cancel point but no
        scheduling point: a call cancelled before its turn raises ``trio.Cancelled`` here and
        holds nothing, and one that is not cancelled goes on without a trip through the
        scheduler. If cancelled while queued, raises ``trio.Cancelled`` and leaves the queue
        as if the call had never arrived.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._queue and self._can_enter(mutates):
            if mutates:
                self._writer = True
            else:
                self._readers += 1
            return
        waiter = _Waiter(mutates)
        self._queue.append(waiter)
        try:
            await waiter.admitted.wait()
        except BaseException:
            if waiter.admitted.is_set():
                # Admitted in the same batch as the cancel: give the turn back.
                self.leave(mutates=mutates)
            else:
                self._queue.remove(waiter)
                self._grant()
            raise

    def leave(self, *, mutates: bool) -> None:
        """Give back the turn :meth:`enter` granted."""
        if mutates:
            self._writer = False
        else:
            self._readers -= 1
        if self._queue:
            self._grant()

    @asynccontextmanager
    async def admit(self, *, mutates: bool) -> AsyncIterator[None]:
        """Wait for this call's turn, then hold the actor for the ``async with`` body.

        If cancelled while queued, raises ``trio.Cancelled`` and leaves the queue as if the call
        had never arrived.
        """
        await self.enter(mutates=mutates)
        try:
            yield
        finally:
            self.leave(mutates=mutates)

    def statistics(self) -> MailboxStatistics:
        return MailboxStatistics(
            queued=len(self._queue), readers=self._readers, writer=self._writer
        )

    @property
    def idle(self) -> bool:
        return not self._queue and not self._readers and not self._writer

    def _can_enter(self, mutates: bool) -> bool:
        if mutates:
            return not self._writer and self._readers == 0
        return not self._writer

    def _grant(self) -> None:
        while self._queue and self._can_enter(self._queue[0].mutates):
            waiter = self._queue.popleft()
            self._take(waiter.mutates)
            waiter.admitted.set()
            if waiter.mutates:
                return
