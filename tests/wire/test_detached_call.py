"""DetachedCall without sockets (wire/_detached.py): every way a detached call ends, once, and
a cancel is passed on and answered with what the holder learns, never with a guess."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from wire import (
    CancelReason,
    DetachedCall,
    InternalError,
    UnavailableError,
    WireError,
)
from wire._detached import ANSWER_GRACE, Outcome, error_reply
from wire._errors import ErrorCode
from wire._messages import Call, Error, Result
from wire._server_events import CallRecord, Interrupted
from wire._server_protocol import ServerProtocol
from wire._server_timer import CALL_RESOLUTION, TICK, ServerTimer

# -- pure: DetachedCall over a real CallRecord, recording callables and a fake clock ----------


class Harness:
    """A DetachedCall whose end, resume and on_cancel are recorded, in order, in ``log``."""

    def __init__(self, *, deadline: float | None = 10.0, call_id: int = 7) -> None:
        self.clock = 0.0
        self.log: list[tuple[str, Any]] = []
        self.record = CallRecord(
            peer=b"peer", call=Call(id=call_id, endpoint="d/hold"), deadline=deadline
        )
        self.call = DetachedCall(
            self.record, end=self._end, resume=self._resume, now=lambda: self.clock
        )
        self.call.on_cancel = lambda reason: self.log.append(("on_cancel", reason))

    def _end(self, call: DetachedCall, outcome: Outcome) -> None:
        assert call is self.call
        self.log.append(("end", outcome))

    def _resume(self, call: DetachedCall, handler: Callable[[], Awaitable[Any]]) -> None:
        assert call is self.call
        self.log.append(("resume", handler))

    def try_every_end(self) -> None:
        """Everything that could end the call again."""
        self.call.succeed("again")
        self.call.fail(UnavailableError("again"))
        self.call.cancel()
        self.call.expire()
        self.call.resume(_never_awaited)


async def _never_awaited() -> Any:
    raise AssertionError("a handler given to resume after the end must not run")


def test_succeed_ends_once_with_a_result() -> None:
    """succeed ends the call once with a Result of its id and value; later ends are ignored."""
    h = Harness()
    assert not h.call.ended
    assert h.call.record is h.record and h.call.deadline == 10.0
    h.call.succeed({"a": [1, 2]})
    assert h.log == [("end", Result(id=7, value={"a": [1, 2]}))]
    assert h.call.ended
    h.try_every_end()
    assert h.log == [("end", Result(id=7, value={"a": [1, 2]}))]


@pytest.mark.parametrize(
    ("error", "code", "details"),
    [
        (
            UnavailableError("worker w1 down", details={"worker": "w1"}),
            "unavailable",
            {"worker": "w1"},
        ),
        (InternalError("boom"), "internal", {}),
        (
            WireError("bad ref", code=ErrorCode.SESSION_REFERENCE_INVALID_REFERENCE),
            "SESSION_REFERENCE_INVALID_REFERENCE",
            {},
        ),
    ],
    ids=["unavailable-with-details", "internal", "session-reference-code"],
)
def test_fail_answers_with_the_errors_code_message_and_details(
    error: WireError, code: str, details: dict[str, Any]
) -> None:
    """fail answers once with an Error frame carrying the error's code, message and details."""
    h = Harness(call_id=11)
    h.call.fail(error)
    expected = Error(id=11, code=code, message=error.message, details=details)
    assert h.log == [("end", expected)]
    assert error_reply(11, error) == expected
    h.try_every_end()
    assert h.log == [("end", expected)]


def _unknown(entry: tuple[str, Any]) -> bool:
    """Whether a log entry ends the call unavailable with its outcome unknown."""
    kind, outcome = entry
    return (
        kind == "end"
        and isinstance(outcome, Error)
        and (outcome.id, outcome.code, dict(outcome.details))
        == (7, "unavailable", {"outcome": "unknown"})
        and "may have taken effect" in outcome.message
    )


@pytest.mark.parametrize(
    ("deadline", "clock", "asked", "reason"),
    [
        (10.0, 5.0, CancelReason.CALLER, CancelReason.CALLER),
        (None, 1e9, CancelReason.CALLER, CancelReason.CALLER),
        (10.0, 10.0, CancelReason.CALLER, CancelReason.DEADLINE),
        (10.0, 12.5, CancelReason.CALLER, CancelReason.DEADLINE),
        (10.0, 9.9, CancelReason.DEADLINE, CancelReason.DEADLINE),
        (10.0, 5.0, CancelReason.SUPERSEDED, CancelReason.SUPERSEDED),
        (None, 5.0, CancelReason.SHUTDOWN, CancelReason.SHUTDOWN),
    ],
    ids=[
        "before-deadline",
        "no-deadline",
        "at-deadline",
        "after-deadline",
        "callers-deadline",
        "superseded",
        "shutdown",
    ],
)
def test_cancel_is_passed_on_and_the_call_waits_for_the_answer(
    deadline: float | None, clock: float, asked: CancelReason, reason: CancelReason
) -> None:
    """cancel tells on_cancel why (a caller's cancel past the deadline as deadline) and does
    not answer: the call stays in flight, and a second cancel is not passed on again."""
    h = Harness(deadline=deadline)
    h.clock = clock
    h.record.cancel_reason = asked
    h.call.cancel()
    assert h.log == [("on_cancel", reason)]
    assert not h.call.ended and h.call.cancelling
    h.call.cancel()
    assert h.log == [("on_cancel", reason)]


def test_the_answer_after_a_cancel_ends_the_call_with_what_happened() -> None:
    """After a cancel was passed on, the holder's answer is the call's end: a result when the
    call finished first, cancelled with the state the other server saw when it stopped it."""
    finished = Harness()
    finished.record.cancel_reason = CancelReason.CALLER
    finished.call.cancel()
    finished.call.succeed("applied")
    assert finished.log[-1] == ("end", Result(id=7, value="applied"))

    stopped = Harness(call_id=8)
    stopped.record.cancel_reason = CancelReason.SUPERSEDED
    stopped.call.cancel()
    stopped.call.cancelled("queued")
    expected = Error(
        id=8,
        code="cancelled",
        message="call cancelled while queued (superseded)",
        details={"state": "queued", "reason": "superseded"},
    )
    assert stopped.log[-1] == ("end", expected)
    stopped.try_every_end()
    assert stopped.log[-1] == ("end", expected)

    unsaid = Harness(call_id=9)
    unsaid.record.cancel_reason = CancelReason.CALLER
    unsaid.call.cancel()
    unsaid.call.cancelled()  # no state from the other side: the server's own cancelled
    assert unsaid.log[-1] == ("end", Interrupted.CANCELLED)


@pytest.mark.parametrize("hook", ["on_abandon", "on_cancel"])
def test_a_lost_caller_abandons_the_call_at_once(hook: str) -> None:
    """A cancel because the caller is gone is passed to on_abandon (on_cancel without one)
    and ends the call at once: nobody is left to wait for the answer."""
    h = Harness()
    if hook == "on_abandon":
        h.call.on_abandon = lambda reason: h.log.append(("on_abandon", reason))
    h.record.cancel_reason = CancelReason.PEER_LOST
    h.call.cancel()
    assert h.log == [(hook, CancelReason.PEER_LOST), ("end", Interrupted.CANCELLED)]
    h.try_every_end()
    assert len(h.log) == 2


def test_gives_up_at_is_the_grace_past_the_deadline_or_the_cancel() -> None:
    """A call handed on is waited for ANSWER_GRACE past its deadline, or past a cancel if that
    comes sooner; one with neither is waited for as long as it takes."""
    h = Harness(deadline=10.0)
    assert h.call.gives_up_at == 10.0 + ANSWER_GRACE
    h.clock = 4.0
    h.record.cancel_reason = CancelReason.CALLER
    h.call.cancel()
    assert h.call.gives_up_at == 4.0 + ANSWER_GRACE
    late = Harness(deadline=10.0)
    late.clock = 10.5  # a cancel after the deadline waits no longer than the deadline did
    late.record.cancel_reason = CancelReason.CALLER
    late.call.cancel()
    assert late.call.gives_up_at == 10.0 + ANSWER_GRACE
    assert Harness(deadline=None).call.gives_up_at is None


@pytest.mark.parametrize("cancelled_first", [False, True], ids=["deadline", "cancel"])
def test_expire_of_a_call_handed_on_answers_unavailable_outcome_unknown(
    cancelled_first: bool,
) -> None:
    """When the wait for the answer is over, the call is abandoned downstream and answered
    unavailable with outcome unknown, never cancelled or deadline-exceeded."""
    h = Harness()
    h.call.on_abandon = lambda reason: h.log.append(("on_abandon", reason))
    if cancelled_first:
        h.record.cancel_reason = CancelReason.CALLER
        h.call.cancel()
    h.call.expire()
    reason = CancelReason.CALLER if cancelled_first else CancelReason.DEADLINE
    assert h.log[-2] == ("on_abandon", reason)
    assert _unknown(h.log[-1])
    ended = len(h.log)
    h.try_every_end()
    assert len(h.log) == ended


def test_an_on_cancel_that_raises_answers_unavailable(caplog: pytest.LogCaptureFixture) -> None:
    """A holder whose on_cancel raises cannot say what happened: the failure is logged and the
    call is answered unavailable (outcome unknown), once."""
    h = Harness()

    def broken(reason: CancelReason) -> None:
        raise RuntimeError("on_cancel broke")

    h.call.on_cancel = broken
    h.record.cancel_reason = CancelReason.CALLER
    h.call.cancel()
    assert len(h.log) == 1 and _unknown(h.log[0])
    assert "on_cancel broke" in caplog.text
    h.try_every_end()
    assert len(h.log) == 1


def test_a_holder_that_hands_nothing_on_is_answered_like_a_task() -> None:
    """Without on_cancel a cancel answers cancelled at once, and the deadline (not a grace past
    it) is when the server answers deadline-exceeded."""
    h = Harness(deadline=10.0)
    h.call.on_cancel = None
    assert h.call.gives_up_at == 10.0
    h.record.cancel_reason = CancelReason.CALLER
    h.call.cancel()
    assert h.log == [("end", Interrupted.CANCELLED)]
    expired = Harness(deadline=10.0)
    expired.call.on_cancel = None
    expired.call.expire()
    assert expired.log == [("end", Interrupted.DEADLINE)]


def test_resume_hands_over_once_and_ends_the_detached_call() -> None:
    """resume hands the handler over once and marks the call ended: later ends are ignored."""
    h = Harness()

    async def handler() -> str:
        return "resumed"

    h.call.resume(handler)
    assert h.log == [("resume", handler)]
    assert h.call.ended
    h.try_every_end()
    assert h.log == [("resume", handler)]


@pytest.mark.parametrize(
    "reason", [CancelReason.CALLER, CancelReason.SUPERSEDED, CancelReason.SHUTDOWN]
)
def test_a_held_call_is_answered_cancelled_queued_by_the_server(reason: CancelReason) -> None:
    """A call its holder keeps without having handed it on (``held``) had no effect anywhere:
    its cancel is answered ``cancelled`` with state ``queued`` at once, on_cancel (for calls
    handed on) is not told, and on_abandon lets the holder forget it."""
    h = Harness(call_id=12)
    h.call.held = True
    h.call.on_abandon = lambda why: h.log.append(("on_abandon", why))
    h.record.cancel_reason = reason
    h.call.cancel()
    expected = Error(
        id=12,
        code="cancelled",
        message=f"call cancelled while queued ({reason.value})",
        details={"state": "queued", "reason": reason.value},
    )
    assert h.log == [("on_abandon", reason), ("end", expected)]
    h.try_every_end()
    assert len(h.log) == 2


def test_a_held_call_ends_deadline_exceeded_at_its_deadline_not_a_grace_later() -> None:
    """While held, the deadline is the server's to answer (nothing was handed on that could
    answer it): ``gives_up_at`` is the deadline, and ``expire`` answers ``deadline-exceeded``
    (state ``queued``); once handed on, the grace applies again."""
    h = Harness(deadline=10.0, call_id=13)
    h.call.held = True
    assert h.call.gives_up_at == 10.0
    h.call.held = False
    assert h.call.gives_up_at == 10.0 + ANSWER_GRACE
    h.call.held = True
    h.call.on_abandon = lambda why: h.log.append(("on_abandon", why))
    h.clock = 10.0
    h.call.expire()
    expected = Error(
        id=13,
        code="deadline-exceeded",
        message="deadline exceeded while queued",
        details={"state": "queued", "reason": "deadline"},
    )
    assert h.log == [("on_abandon", CancelReason.DEADLINE), ("end", expected)]


def test_a_call_handed_on_as_the_one_before_it_expires_waits_for_its_owner() -> None:
    """Two calls held in a relay's queue with the same deadline: the one expired first ends
    ``deadline-exceeded`` (queued), and its end hands the other on. That one then waits for
    its owner's answer, a grace past its deadline; it is not answered ``unavailable`` ("no
    answer came within 1 s") at once. (A cancel storm through ``--workers 2`` got that answer
    for sleeps a few ms after they were sent.)"""
    calls = [Harness(deadline=10.0, call_id=1), Harness(deadline=10.0, call_id=2)]
    for this, other in (calls, calls[::-1]):
        this.call.held = True

        def hand_on(reason: CancelReason, other: Harness = other) -> None:
            other.call.held = False

        this.call.on_abandon = hand_on
    timer = ServerTimer(ServerProtocol(), lambda events: None, lambda now: now)
    for h in calls:
        timer.expire_later(h.call)
    timer._expire(10.0)
    ended = [h for h in calls if h.log]
    assert len(ended) == 1
    [(_, outcome)] = ended[0].log
    assert isinstance(outcome, Error) and outcome.code == "deadline-exceeded"
    [waiting] = [h for h in calls if not h.log]
    assert waiting.call.gives_up_at == 10.0 + ANSWER_GRACE


async def test_the_timer_answers_a_held_calls_deadline_when_it_passes_not_a_tick_later(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A call a relay holds (nothing was handed on) is the server's to answer at its deadline:
    the timer wakes for it then, to within ``CALL_RESOLUTION``, not at its next ``TICK``
    (which answered a 10 ms deadline 100 ms late), while the protocol's own timers keep the
    tick."""
    ended: list[tuple[float, Outcome]] = []
    record = CallRecord(
        peer=b"peer", call=Call(id=21, endpoint="d/hold"), deadline=trio.current_time() + 0.01
    )
    call = DetachedCall(
        record,
        end=lambda call, outcome: ended.append((trio.current_time(), outcome)),
        resume=lambda call, handler: None,
        now=trio.current_time,
    )
    call.held = True
    call.on_abandon = lambda reason: None
    timer = ServerTimer(ServerProtocol(), lambda events: None, lambda now: now)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(timer.run)
        timer.expire_later(call)
        await trio.sleep(TICK * 3)
        nursery.cancel_scope.cancel()
    [(at, outcome)] = ended
    assert isinstance(outcome, Error) and outcome.code == "deadline-exceeded"
    assert record.deadline is not None
    assert record.deadline <= at <= record.deadline + 2 * CALL_RESOLUTION
