"""DetachedCall without sockets (wire/_detached.py): every way a detached call ends, once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from wire import (
    CancelReason,
    DetachedCall,
    InternalError,
    UnavailableError,
    WireError,
)
from wire._detached import Outcome, error_reply
from wire._errors import ErrorCode
from wire._messages import Call, Error, Result
from wire._server_protocol import CallRecord, Interrupted

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


@pytest.mark.parametrize(
    ("deadline", "clock", "reason"),
    [
        (10.0, 5.0, CancelReason.CALLER),
        (None, 1e9, CancelReason.CALLER),
        (10.0, 10.0, CancelReason.DEADLINE),
        (10.0, 12.5, CancelReason.DEADLINE),
    ],
    ids=["before-deadline", "no-deadline", "at-deadline", "after-deadline"],
)
def test_cancel_tells_the_holder_why_then_ends_cancelled(
    deadline: float | None, clock: float, reason: CancelReason
) -> None:
    """cancel calls on_cancel (caller, or deadline once it passed) before ending CANCELLED."""
    h = Harness(deadline=deadline)
    h.clock = clock
    h.call.cancel()
    assert h.log == [("on_cancel", reason), ("end", Interrupted.CANCELLED)]
    assert h.call.ended
    h.try_every_end()
    assert h.log == [("on_cancel", reason), ("end", Interrupted.CANCELLED)]


def test_a_callers_deadline_cancel_is_passed_on_as_deadline() -> None:
    """A cancel whose frame says deadline reaches on_cancel as deadline even before the
    server's own deadline (which counts from the call's arrival, so comes later)."""
    h = Harness(deadline=10.0)
    h.clock = 9.9
    h.record.cancel_reason = CancelReason.DEADLINE
    h.call.cancel()
    assert h.log == [("on_cancel", CancelReason.DEADLINE), ("end", Interrupted.CANCELLED)]


@pytest.mark.parametrize("how", ["cancel", "expire"])
def test_an_on_cancel_that_raises_still_ends_the_call(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A holder whose on_cancel raises does not stop the call's end (nor the server): the
    failure is logged and the call ends as it would have."""
    h = Harness()

    def broken(reason: CancelReason) -> None:
        raise RuntimeError("on_cancel broke")

    h.call.on_cancel = broken
    getattr(h.call, how)()
    expected = Interrupted.CANCELLED if how == "cancel" else Interrupted.DEADLINE
    assert h.log == [("end", expected)]
    assert "on_cancel broke" in caplog.text


def test_cancel_without_on_cancel_still_ends() -> None:
    """A holder that set no on_cancel still gets its call ended CANCELLED by a cancel."""
    h = Harness()
    h.call.on_cancel = None
    h.call.cancel()
    assert h.log == [("end", Interrupted.CANCELLED)]


def test_expire_tells_the_holder_deadline_and_ends_with_the_deadline() -> None:
    """expire calls on_cancel(DEADLINE) then ends DEADLINE, once."""
    h = Harness()
    h.clock = 3.0  # expire does not consult the clock: the server's timer decided
    h.call.expire()
    assert h.log == [("on_cancel", CancelReason.DEADLINE), ("end", Interrupted.DEADLINE)]
    h.try_every_end()
    assert h.log == [("on_cancel", CancelReason.DEADLINE), ("end", Interrupted.DEADLINE)]


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
