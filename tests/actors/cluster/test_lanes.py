"""The relay's lanes without sockets (actors/cluster/_lanes.py): per agent, one write handed on
at a time, everything behind a waiting write kept in arrival order, and a kept call's cancel
answered by the relay at once (the owner never saw it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from actors.cluster._lanes import Lanes
from wire import CancelReason, DetachedCall
from wire._detached import Outcome
from wire._messages import Call, Error
from wire._server_events import CallRecord


class Calls:
    """Detached calls over real records; what each was handed on with, and how each ended."""

    def __init__(self) -> None:
        #: The calls' clock (the server's trio clock in a relay).
        self.clock = 0.0
        self.handed_on: list[str] = []
        self.ends: dict[str, Callable[[], None] | None] = {}
        self.outcomes: dict[str, Outcome] = {}
        self._by_name: dict[str, DetachedCall] = {}

    def call(self, name: str, *, deadline: float | None = None) -> DetachedCall:
        record = CallRecord(
            peer=b"p", call=Call(id=len(self._by_name) + 1, endpoint=name), deadline=deadline
        )

        def end(call: DetachedCall, outcome: Outcome) -> None:
            self.outcomes[name] = outcome

        def resume(call: DetachedCall, handler: Callable[[], Awaitable[Any]]) -> None:
            raise AssertionError("lanes never resume a call")

        call = DetachedCall(record, end=end, resume=resume, now=lambda: self.clock)
        self._by_name[name] = call
        return call

    def hand_on(self, name: str) -> Callable[[Callable[[], None] | None], None]:
        def hand_on(on_end: Callable[[], None] | None) -> None:
            self.handed_on.append(name)
            self.ends[name] = on_end

        return hand_on

    def admit(self, lanes: Lanes, key: str, name: str, *, mutates: bool) -> DetachedCall:
        call = self.call(name)
        lanes.admit(key, mutates, call, self.hand_on(name))
        return call

    def end(self, name: str) -> None:
        on_end = self.ends[name]
        assert on_end is not None, f"{name} is a reader: nothing tracks its end"
        on_end()


def test_a_reader_with_no_write_ahead_goes_at_once_and_leaves_no_lane() -> None:
    lanes, calls = Lanes(), Calls()
    read = calls.admit(lanes, "a", "r1", mutates=False)
    assert calls.handed_on == ["r1"] and calls.ends["r1"] is None
    assert not read.held and "a" not in lanes.active


def test_one_write_per_agent_is_handed_on_and_the_rest_wait_in_arrival_order() -> None:
    lanes, calls = Lanes(), Calls()
    w1 = calls.admit(lanes, "a", "w1", mutates=True)
    w2 = calls.admit(lanes, "a", "w2", mutates=True)
    r3 = calls.admit(lanes, "a", "r3", mutates=False)
    w4 = calls.admit(lanes, "a", "w4", mutates=True)
    other = calls.admit(lanes, "b", "w5", mutates=True)  # another agent's lane is its own
    assert calls.handed_on == ["w1", "w5"]
    assert (w1.held, w2.held, r3.held, w4.held, other.held) == (False, True, True, True, False)
    assert lanes.held() == 3

    calls.end("w1")
    # The next write goes, and the reader behind it with it (readers run side by side on the
    # owner); the write after waits for that write.
    assert calls.handed_on == ["w1", "w5", "w2", "r3"]
    assert not w2.held and not r3.held and w4.held
    calls.end("w1")  # a second end of the same write counts once
    assert calls.handed_on == ["w1", "w5", "w2", "r3"]

    calls.end("w2")
    assert calls.handed_on[-1] == "w4" and not w4.held
    calls.end("w4")
    calls.end("w5")
    assert "a" not in lanes.active and "b" not in lanes.active and lanes.held() == 0


def test_a_reader_behind_a_write_in_flight_goes_at_once_when_nothing_waits() -> None:
    lanes, calls = Lanes(), Calls()
    calls.admit(lanes, "a", "w1", mutates=True)
    read = calls.admit(lanes, "a", "r2", mutates=False)
    assert calls.handed_on == ["w1", "r2"] and not read.held


@pytest.mark.parametrize("reason", [CancelReason.CALLER, CancelReason.SUPERSEDED])
def test_a_waiting_call_cancelled_is_answered_here_and_never_handed_on(
    reason: CancelReason,
) -> None:
    lanes, calls = Lanes(), Calls()
    calls.admit(lanes, "a", "w1", mutates=True)
    w2 = calls.admit(lanes, "a", "w2", mutates=True)
    r3 = calls.admit(lanes, "a", "r3", mutates=False)
    w2.record.cancel_reason = reason
    w2.cancel()
    assert calls.outcomes["w2"] == Error(
        id=2,
        code="cancelled",
        message=f"call cancelled while queued ({reason.value})",
        details={"state": "queued", "reason": reason.value},
    )
    # The reader waited behind w2 only: with w2 gone it goes now, not after w1.
    assert calls.handed_on == ["w1", "r3"] and not r3.held
    calls.end("w1")
    assert calls.handed_on == ["w1", "r3"]
    assert "a" not in lanes.active


def test_a_waiting_call_past_its_deadline_is_answered_deadline_exceeded_here() -> None:
    lanes, calls = Lanes(), Calls()
    calls.admit(lanes, "a", "w1", mutates=True)
    w2 = calls.call("w2", deadline=5.0)
    lanes.admit("a", True, w2, calls.hand_on("w2"))
    assert w2.gives_up_at == 5.0
    w2.expire()
    assert isinstance(calls.outcomes["w2"], Error)
    assert calls.outcomes["w2"].code == "deadline-exceeded"
    calls.end("w1")
    assert calls.handed_on == ["w1"] and "a" not in lanes.active


def test_a_waiting_call_whose_deadline_passed_is_answered_here_when_its_turn_comes() -> None:
    """The server's timer has not run since the deadline passed: the lane answers
    ``deadline-exceeded`` (queued) instead of handing on a call its owner would refuse, and the
    live write behind it goes on."""
    lanes, calls = Lanes(), Calls()
    calls.admit(lanes, "a", "w1", mutates=True)
    w2 = calls.call("w2", deadline=5.0)
    lanes.admit("a", True, w2, calls.hand_on("w2"))
    calls.admit(lanes, "a", "w3", mutates=True)
    calls.clock = 6.0
    calls.end("w1")
    outcome = calls.outcomes["w2"]
    assert isinstance(outcome, Error) and outcome.code == "deadline-exceeded"
    assert outcome.details == {"state": "queued", "reason": "deadline"}
    assert calls.handed_on == ["w1", "w3"]
    calls.end("w3")
    assert "a" not in lanes.active


def test_a_lane_of_cancelled_calls_is_compacted_and_the_next_live_write_goes_in_order() -> None:
    """Calls cancelled behind a live waiting write cannot leave from the lane's head: the lane
    drops them once they are most of it, so a client that keeps sending and cancelling writes
    behind a slow one does not grow it without bound."""
    lanes, calls = Lanes(), Calls()
    calls.admit(lanes, "a", "w0", mutates=True)
    waiting = [calls.admit(lanes, "a", f"w{i}", mutates=True) for i in range(1, 201)]
    for call in waiting[1:]:
        call.record.cancel_reason = CancelReason.CALLER
        call.cancel()
    assert lanes.held() == 1
    assert len(lanes.active["a"].waiting) <= 18
    calls.end("w0")
    assert calls.handed_on == ["w0", "w1"]
    calls.end("w1")
    assert "a" not in lanes.active


def test_a_write_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one write"):
        Lanes(writes_handed_on=0)


def test_writes_that_end_as_they_are_handed_on_release_the_lane_without_recursing() -> None:
    """A write handed on that ends at once (it could not be sent and went to the task path)
    lets the next one go from the same loop: a lane of thousands drains without recursing
    once per call (which broke on a worker's death with a few hundred waiting)."""
    lanes, calls = Lanes(), Calls()
    calls.admit(lanes, "a", "w0", mutates=True)
    count = 5_000
    for i in range(1, count + 1):
        call = calls.call(f"w{i}")

        def ends_at_once(on_end: Callable[[], None] | None, name: str = f"w{i}") -> None:
            calls.handed_on.append(name)
            assert on_end is not None
            on_end()

        lanes.admit("a", True, call, ends_at_once)
    assert lanes.held() == count
    calls.end("w0")
    assert calls.handed_on == [f"w{i}" for i in range(count + 1)]
    assert "a" not in lanes.active and lanes.held() == 0
