"""The server's timer: heartbeats, silent peers and overdue detached calls, each handled when it
is due rather than on a fixed tick.

An idle server wakes once per heartbeat and peer (to ping) instead of ten times a second: the
protocol says when its next ping or silence bound is due (``ServerProtocol.next_due``), and
the timer sleeps until then, never waking for those more often than every :data:`TICK`.
Detached calls are bounded to :data:`CALL_RESOLUTION` instead: a call a relay still holds is
answered ``deadline-exceeded`` at its deadline, which may be a few ms away, not up to a tick
later. Something that brings a bound closer wakes the timer early: a new peer (the first one
ends an unbounded sleep) and a detached call that now waits for an answer within a bound
(``DetachedCall.gives_up_at``).

The detached calls' bounds are kept in a heap, so a timer pass and a call that comes or goes
cost O(log n), not a walk over every call in flight: a relay with hundreds of calls in flight,
each with a deadline, walked them all twice per pass of its receive loop. A call's bound may
move after it was pushed (a call handed on waits a grace past its deadline; a cancel passed on
brings its bound closer, and is pushed again then), so an entry is only a hint: the timer asks
the call for its bound again when the entry comes due. An entry refers to its call weakly, so an
ended call is freed at once (a relay ends millions; see ``Server._end_detached``); its entries
stay until they come due or the heap is compacted (when it holds more than twice the calls it
bounds).
"""

from __future__ import annotations

import heapq
import itertools
import math
import weakref
from collections.abc import Callable

import trio

from wire._detached import DetachedCall
from wire._server_events import ServerEvent
from wire._server_protocol import ServerProtocol

__all__ = ["CALL_RESOLUTION", "TICK", "ServerTimer"]

#: The shortest sleep before the protocol's next timer (a ping, a silence bound): their
#: resolution, so a silent peer is lost within ``peer_timeout + TICK``.
TICK = 0.1
#: The shortest sleep before a detached call's bound (``gives_up_at``): bounds this close
#: together are ended in one pass, so a burst of calls with deadlines wakes the timer at most
#: once a millisecond.
CALL_RESOLUTION = 0.001


class ServerTimer:
    """Runs the protocol's timers and ends detached calls whose answer is overdue.

    Args:
        protocol: The server's protocol machine.
        apply: Carries out the events of a tick (the server's ``_apply``).
        verified_at: The time up to which the socket is known to have been read (the pump's
            ``verified_empty_at``): silence after it may be the server's own backlog.
    """

    def __init__(
        self,
        protocol: ServerProtocol,
        apply: Callable[[list[ServerEvent]], None],
        verified_at: Callable[[float], float],
    ) -> None:
        self._protocol = protocol
        self._apply = apply
        self._verified_at = verified_at
        #: Detached calls with a deadline or a cancel passed on: the timer bounds their wait.
        self._bounded: set[DetachedCall] = set()
        #: ``(bound, order, weak reference to the call)`` for the calls of ``_bounded``, and
        #: for calls ended since (their references are dead or no longer in ``_bounded``).
        self._heap: list[tuple[float, int, weakref.ref[DetachedCall]]] = []
        self._order = itertools.count()
        #: When the timer wakes unless woken (``-inf`` while it is not sleeping: it looks at
        #: the heap before it sleeps again).
        self._sleeping_until = -math.inf
        self._wake = trio.Event()

    def wake(self) -> None:
        """A deadline may have come closer: compute the next one now."""
        self._wake.set()

    def expire_later(self, call: DetachedCall) -> None:
        """Bound ``call``'s wait for its answer (``call.gives_up_at``); again when that moved
        closer (a cancel was passed on)."""
        self._bounded.add(call)
        bound = _bound(call)
        if bound == math.inf:
            return
        heap = self._heap
        heapq.heappush(heap, (bound, next(self._order), weakref.ref(call)))
        if len(heap) > 2 * len(self._bounded) + _SLACK:
            self._compact()
        if bound < self._sleeping_until:
            self._wake.set()

    def forget(self, call: DetachedCall) -> None:
        """``call`` ended (or moved onto the task path): nothing bounds it any more."""
        self._bounded.discard(call)

    async def run(self) -> None:
        while True:
            now = trio.current_time()
            wake_at = max(self._protocol.next_due(), now + TICK)
            bound = self._earliest()
            if bound < wake_at:
                wake_at = max(bound, now + CALL_RESOLUTION)
            self._sleeping_until = wake_at
            try:
                with trio.move_on_at(wake_at):
                    await self._wake.wait()
            finally:
                self._sleeping_until = -math.inf
            self._wake = trio.Event()
            now = trio.current_time()
            self._apply(self._protocol.tick(now, verified_at=self._verified_at(now)))
            self._expire(now)

    def _earliest(self) -> float:
        """The earliest bound of a call still bounded (dropping the entries of ended calls)."""
        heap, bounded = self._heap, self._bounded
        while heap:
            bound, _, ref = heap[0]
            if ref() in bounded:
                return bound
            heapq.heappop(heap)
        return math.inf

    def _expire(self, now: float) -> None:
        """End the detached calls whose answer is overdue (past the deadline, or past a cancel
        passed on, by the grace): the server they went to answers for itself, this covers
        one that never does."""
        heap, bounded = self._heap, self._bounded
        while heap and heap[0][0] <= now:
            _, _, ref = heapq.heappop(heap)
            call = ref()
            if call is None or call not in bounded:
                continue  # ended since
            # Asked at its turn: ending one call may have handed the next on (a relay's queue
            # for one agent), and a call handed on just now waits for its owner's answer.
            bound = _bound(call)
            if bound <= now:
                call.expire()
            elif bound != math.inf:
                heapq.heappush(heap, (bound, next(self._order), ref))

    def _compact(self) -> None:
        bounded = self._bounded
        self._heap = [entry for entry in self._heap if entry[2]() in bounded]
        heapq.heapify(self._heap)


#: Entries of ended calls the heap may hold beyond twice its live ones before it is compacted.
_SLACK = 64


def _bound(call: DetachedCall) -> float:
    """``call.gives_up_at``, or infinity when nothing bounds its wait."""
    at = call.gives_up_at
    return math.inf if at is None else at
