"""The server timer's bounds on detached calls (wire/_server_timer.py): a heap of hints, each
checked against the call when it comes due, so a bound that moved is honoured either way and
an ended call costs nothing but its entry."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable
from typing import Any

import trio
import trio.testing

from wire import CancelReason, DetachedCall
from wire._detached import ANSWER_GRACE, Outcome
from wire._messages import Call, Error, Result
from wire._server_events import CallRecord
from wire._server_protocol import ServerProtocol
from wire._server_timer import CALL_RESOLUTION, ServerTimer


class Timed:
    """Detached calls on the trio clock, each answered into ``ended`` with the time."""

    def __init__(self) -> None:
        self.ended: list[tuple[int, float, Outcome]] = []
        self.timer = ServerTimer(ServerProtocol(), lambda events: None, lambda now: now)

    def call(self, call_id: int, deadline_in: float | None, *, handed_on: bool) -> DetachedCall:
        now = trio.current_time()
        record = CallRecord(
            peer=b"peer",
            call=Call(id=call_id, endpoint="d/hold"),
            deadline=None if deadline_in is None else now + deadline_in,
        )
        call = DetachedCall(record, end=self._end, resume=_no_resume, now=trio.current_time)
        if handed_on:
            call.on_cancel = lambda reason: None
        return call

    def _end(self, call: DetachedCall, outcome: Outcome) -> None:
        self.timer.forget(call)
        self.ended.append((call.record.call.id, trio.current_time(), outcome))


def _no_resume(call: DetachedCall, handler: Callable[[], Awaitable[Any]]) -> None:
    raise AssertionError("not resumed here")


async def test_a_cancel_passed_on_brings_a_far_deadline_close(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A call handed on with a deadline 100 s away, then cancelled: its owner has the grace
    to answer the cancel, not the deadline's 100 s. The earlier bound is pushed when the
    cancel is passed on and wakes the sleeping timer."""
    timed = Timed()
    call = timed.call(1, 100.0, handed_on=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(timed.timer.run)
        timed.timer.expire_later(call)
        await trio.sleep(5)
        assert timed.ended == []
        cancelled_at = trio.current_time()
        call.record.cancel_reason = CancelReason.CALLER
        call.cancel()
        timed.timer.expire_later(call)  # as the server does for a cancel passed on
        await trio.sleep(ANSWER_GRACE * 2)
        nursery.cancel_scope.cancel()
    [(_, at, outcome)] = timed.ended
    assert isinstance(outcome, Error) and outcome.code == "unavailable"
    assert outcome.details == {"outcome": "unknown"}
    assert cancelled_at + ANSWER_GRACE <= at <= cancelled_at + ANSWER_GRACE + 2 * CALL_RESOLUTION


async def test_calls_expire_in_the_order_of_their_bounds_not_of_their_arrival(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Held calls (the server's to answer at the deadline) pushed in any order while the timer
    sleeps each end at their own deadline, closer than the timer's tick, and a call without a
    deadline is never ended by the timer."""
    timed = Timed()
    deadlines = {1: 0.5, 2: 0.05, 3: 0.2, 4: 0.01}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(timed.timer.run)
        await trio.sleep(0.001)  # the timer sleeps until its next tick
        start = trio.current_time()
        for call_id, deadline_in in deadlines.items():
            call = timed.call(call_id, deadline_in, handed_on=False)
            call.held = True
            call.on_abandon = lambda reason: None
            timed.timer.expire_later(call)
        unbounded = timed.call(5, None, handed_on=True)
        timed.timer.expire_later(unbounded)
        await trio.sleep(2)
        nursery.cancel_scope.cancel()
    assert [call_id for call_id, _, _ in timed.ended] == [4, 2, 3, 1]
    for call_id, at, outcome in timed.ended:
        assert isinstance(outcome, Error) and outcome.code == "deadline-exceeded"
        due = start + deadlines[call_id]
        assert due <= at <= due + 2 * CALL_RESOLUTION
    assert not unbounded.ended


async def test_ended_calls_are_freed_at_once_and_their_entries_do_not_pile_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Ten thousand calls with a 10 s deadline answered one after another (a relay's steady
    state): none is kept alive by the timer, and its heap stays within twice the calls in
    flight plus its slack, not ten thousand entries waiting for their deadlines."""
    timed = Timed()
    in_flight: list[DetachedCall] = []
    most_entries = 0
    gc.collect()
    for call_id in range(10_000):
        call = timed.call(call_id, 10.0, handed_on=True)
        timed.timer.expire_later(call)
        in_flight.append(call)
        if len(in_flight) > 8:
            in_flight.pop(0).succeed(call_id)
        most_entries = max(most_entries, len(timed.timer._heap))
    assert most_entries <= 2 * 9 + 64 + 1
    assert len(timed.timer._bounded) == 8
    for call in in_flight:
        call.succeed(0)
    assert len(timed.timer._bounded) == 0
    assert len(timed.ended) == 10_000
    assert all(isinstance(outcome, Result) for _, _, outcome in timed.ended)
    del call, in_flight
    timed.ended.clear()  # the outcomes hold no calls, but the test's own references go
    alive = [o for o in gc.get_objects() if isinstance(o, DetachedCall)]
    assert alive == []
