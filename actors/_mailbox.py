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


class Mailbox:
    """FIFO reader/writer admission for one actor."""

    def __init__(self) -> None:
        self._readers = 0
        self._writer = False
        self._queue: collections.deque[_Waiter] = collections.deque()

    @asynccontextmanager
    async def admit(self, *, mutates: bool) -> AsyncIterator[None]:
        """Wait for this call's turn, then hold the actor for the ``async with`` body.

        If cancelled while queued, raises ``trio.Cancelled`` and leaves the queue as if the call
        had never arrived.
        """
        waiter = _Waiter(mutates)
        immediate = not self._queue and self._can_enter(mutates)
        if immediate:
            self._enter(waiter)
        else:
            self._queue.append(waiter)
            try:
                await waiter.admitted.wait()
            except BaseException:
                if waiter.admitted.is_set():
                    # Admitted in the same batch as the cancel: give the turn back.
                    self._leave(waiter)
                else:
                    self._queue.remove(waiter)
                    self._grant()
                raise
        try:
            if immediate:
                await trio.lowlevel.checkpoint()
            yield
        finally:
            self._leave(waiter)

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

    def _enter(self, waiter: _Waiter) -> None:
        if waiter.mutates:
            self._writer = True
        else:
            self._readers += 1
        waiter.admitted.set()

    def _leave(self, waiter: _Waiter) -> None:
        if waiter.mutates:
            self._writer = False
        else:
            self._readers -= 1
        self._grant()

    def _grant(self) -> None:
        while self._queue and self._can_enter(self._queue[0].mutates):
            waiter = self._queue.popleft()
            self._enter(waiter)
            if waiter.mutates:
                return
