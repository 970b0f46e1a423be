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
"""

from __future__ import annotations

import math
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
        self.expiring: set[DetachedCall] = set()
        self._wake = trio.Event()

    def wake(self) -> None:
        """A deadline may have come closer: compute the next one now."""
        self._wake.set()

    def expire_later(self, call: DetachedCall) -> None:
        """Bound ``call``'s wait for its answer (``call.gives_up_at``)."""
        self.expiring.add(call)
        self._wake.set()

    async def run(self) -> None:
        while True:
            now = trio.current_time()
            wake_at = max(self._protocol.next_due(), now + TICK)
            if self.expiring:
                bound = min(_bound(c) for c in self.expiring)
                wake_at = min(wake_at, max(bound, now + CALL_RESOLUTION))
            with trio.move_on_at(wake_at):
                await self._wake.wait()
            self._wake = trio.Event()
            now = trio.current_time()
            self._apply(self._protocol.tick(now, verified_at=self._verified_at(now)))
            self._expire(now)

    def _expire(self, now: float) -> None:
        """End the detached calls whose answer is overdue (past the deadline, or past a cancel
        passed on, by the grace): the server they went to answers for itself, this covers
        one that never does."""
        for call in list(self.expiring):  # a copy: an ended call leaves the set
            # Asked at its turn: ending one call may have handed the next on (a relay's queue
            # for one agent), and a call handed on just now waits for its owner's answer.
            if _bound(call) <= now:
                call.expire()


def _bound(call: DetachedCall) -> float:
    """``call.gives_up_at``, or infinity when nothing bounds its wait."""
    at = call.gives_up_at
    return math.inf if at is None else at
