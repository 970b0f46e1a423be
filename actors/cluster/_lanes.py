"""Calls about one agent that the relay holds until their owner would start them.

A worker runs one state-changing call per agent at a time, in arrival order
(``actors/_mailbox.py``): every call that arrives behind a running write waits in the agent's
mailbox. If the relay handed those on at once, a cancel of one of them would cross to the worker
and back before its caller heard ``cancelled`` (about 4 times the latency of one process, in the
cancel storm of issue 19), and a storm of cancelled writes would cost the worker a decode, a
mailbox entry and an answer each.

So the relay keeps them: per agent, at most :data:`WRITES_HANDED_ON` state-changing calls are
handed on at once, and the calls behind them, readers too (arrival order is kept), wait here
in a lane. A call waiting here is :attr:`~wire.DetachedCall.held`: its cancel is answered
``cancelled`` (state ``queued``) and its deadline ``deadline-exceeded`` by the relay at once,
which is the truth, as its owner never saw it. A reader with no lane ahead of it is handed on
at once and never tracked: readers run side by side on the worker.

The relay's cost: a write to an agent whose previous write is still running leaves for the
owner one supervisor-worker round trip after that write ended, instead of waiting in the
mailbox; writes pipelined to one agent go a quarter to a third slower (``docs/scale-out.md``,
"Lanes"). ``[cluster] relayWritesPerAgent`` hands on more at once.

When a write cannot be handed on (its owner is gone) it takes the task path, and its lane waits
for that retry to end: the writes behind it still reach the next owner in arrival order.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import attrs

from wire import CancelReason, DetachedCall, counter, gauge

__all__ = ["WRITES_HANDED_ON", "HandOn", "Lanes"]

#: State-changing calls per agent handed on to the owner at once; the rest wait in the lane.
#: One: the owner runs them one at a time anyway, so any more would wait in its mailbox, where
#: only a round trip can cancel them.
WRITES_HANDED_ON = 1

#: Hands a call on to its owner: called with the function to call once the call has ended (its
#: answer, its abandonment, or the end of its retry on the task path), or ``None`` for a reader.
HandOn = Callable[[Callable[[], None] | None], None]

#: Ended calls a lane keeps before it compacts (they are skipped when they reach its head).
_GONE_KEPT = 16


@attrs.define(eq=False)
class _Waiting:
    call: DetachedCall
    mutates: bool
    hand_on: HandOn
    #: Whether the call ended while it waited (its cancel or deadline was answered here).
    gone: bool = False


@attrs.define(eq=False)
class _Lane:
    #: State-changing calls handed on and not ended yet.
    writes: int = 0
    waiting: collections.deque[_Waiting] = attrs.Factory(collections.deque)
    #: Calls in ``waiting`` that are gone.
    gone: int = 0
    #: Whether :meth:`Lanes._release` is handing calls on from this lane: a write that ends
    #: while it does (one handed on that could not be sent, say) leaves the next to that loop
    #: instead of starting another (a lane of hundreds would otherwise recurse that deep).
    releasing: bool = False


class Lanes:
    """The relay's lanes, by routing key (an agent or a session id)."""

    def __init__(self, writes_handed_on: int = WRITES_HANDED_ON) -> None:
        if writes_handed_on < 1:
            raise ValueError("at least one write per agent must be handed on")
        self._limit = writes_handed_on
        #: Routing key → its lane, for the keys that have one (a write in flight or calls
        #: waiting): the relay's fast path tests it directly. Not to be changed from outside.
        self.active: dict[str, _Lane] = {}
        #: Calls answered while they waited here, by the reason of their end.
        self._answered: collections.Counter[str] = collections.Counter()

    def held(self) -> int:
        """Calls waiting in the lanes."""
        return sum(len(lane.waiting) - lane.gone for lane in self.active.values())

    def metric_families(self) -> dict[str, Any]:
        """The lanes' families for ``system/metrics``."""
        return {
            "relay_waiting_calls": gauge(
                "Calls the relay holds until the write ahead of them on their agent has ended.",
                (),
                [((), self.held())],
            ),
            "relay_answered_waiting_total": counter(
                "Calls the relay ended while it held them (their owner never saw them), by "
                "reason: caller, superseded, deadline, shutdown (answered cancelled or "
                "deadline-exceeded), peer-lost (the caller was gone).",
                ("reason",),
                [([reason], n) for reason, n in sorted(self._answered.items())],
            ),
        }

    def admit(self, key: str, mutates: bool, call: DetachedCall, hand_on: HandOn) -> None:
        """Hand ``call`` on now (``hand_on``) or keep it until the calls ahead of it allow."""
        lane = self.active.get(key)
        if lane is None:
            if not mutates:
                hand_on(None)
                return
            lane = self.active[key] = _Lane()
        if not lane.waiting and self._may_go(lane, mutates):
            self._hand_on(key, lane, mutates, hand_on)
            return
        waiting = _Waiting(call, mutates, hand_on)
        call.held = True
        call.on_abandon = lambda reason: self._forget(key, lane, waiting, reason)
        lane.waiting.append(waiting)

    def _may_go(self, lane: _Lane, mutates: bool) -> bool:
        """Whether a call with nothing waiting ahead of it may be handed on now: a reader
        always, a write while fewer than the limit are in flight."""
        return not mutates or lane.writes < self._limit

    def _hand_on(self, key: str, lane: _Lane, mutates: bool, hand_on: HandOn) -> None:
        if not mutates:
            hand_on(None)
            return
        lane.writes += 1
        ended = False

        def write_ended() -> None:
            nonlocal ended
            if not ended:
                ended = True
                lane.writes -= 1
                self._release(key, lane)

        hand_on(write_ended)

    def _release(self, key: str, lane: _Lane) -> None:
        """Hand on the calls at the head of ``lane`` that may go now."""
        if lane.releasing:
            return  # the loop below, further up this stack, looks at the lane again
        lane.releasing = True
        try:
            waiting = lane.waiting
            while waiting:
                head = waiting[0]
                if head.gone:
                    waiting.popleft()
                    lane.gone -= 1
                    continue
                if head.call.overdue:
                    # Its deadline passed while it waited, and the server's timer has not
                    # run since: answered here, as its owner would only refuse it.
                    head.call.expire()
                    continue
                if not self._may_go(lane, head.mutates):
                    break
                waiting.popleft()
                head.call.held = False
                head.call.on_abandon = None
                self._hand_on(key, lane, head.mutates, head.hand_on)
        finally:
            lane.releasing = False
        if not lane.waiting and lane.writes == 0 and self.active.get(key) is lane:
            del self.active[key]

    def _forget(self, key: str, lane: _Lane, waiting: _Waiting, reason: CancelReason) -> None:
        """``waiting`` ended in the lane (its cancel or deadline is answered here): the calls
        behind it may go sooner, and a lane of mostly ended calls is compacted."""
        self._answered[reason.value] += 1
        waiting.gone = True
        lane.gone += 1
        if lane.gone > _GONE_KEPT and lane.gone * 2 > len(lane.waiting):
            kept = [other for other in lane.waiting if not other.gone]
            lane.waiting.clear()
            lane.waiting.extend(kept)
            lane.gone = 0
        self._release(key, lane)
