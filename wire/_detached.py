"""Calls that end from a callback instead of a task: a relay's fast path.

A server that forwards a call to another server (the cluster supervisor) would otherwise spend a
task and a cancel scope per call only to wait for the other side's answer, and those are most of
its per-call cost. Instead its endpoint's ``run_inline`` returns :class:`Detach`: the server
marks the call running, hands a :class:`DetachedCall` to ``Detach.begin``, and the call ends when
whoever holds it reports the answer (from the client's receive path, say).

What the caller is told must be what happened, and only the server the call was handed on to
knows that. So:

- a cancel (caller, deadline, superseded, shutdown) runs the holder's ``on_cancel`` with the
  reason, to pass it on, and the call stays in flight until the holder ends it with the other
  server's answer: its result if the call finished first, :meth:`DetachedCall.cancelled` if
  that server shows it never took effect, any other error as it came. An ``on_cancel`` that
  raises is logged and the call is answered ``unavailable`` (outcome unknown): the server
  keeps serving;
- a cancel because the caller is gone (``peer-lost``) leaves nobody to answer: the holder's
  ``on_abandon`` (else ``on_cancel``) passes it on and the call ends at once, without a frame;
- the call's deadline is the holder's to pass on: the other server enforces it and answers
  ``deadline-exceeded`` itself. The server waits :data:`ANSWER_GRACE` seconds past the
  deadline, or past a cancel passed on, for that answer; then it stops waiting
  (``on_abandon``) and answers ``unavailable`` with ``details.outcome`` ``unknown``, never a
  ``cancelled`` or ``deadline-exceeded`` it cannot vouch for;
- a holder that hands nothing on (no ``on_cancel``) is answered ``cancelled`` at once, and
  ``deadline-exceeded`` at its deadline, as a handler task would be;
- a holder may keep the call before it hands it on (:attr:`DetachedCall.held`, a relay's
  queue): while held, a cancel is answered ``cancelled`` (state ``queued``) and the deadline
  ``deadline-exceeded`` at once, by the server, which is the truth, as nothing was handed on;
  ``on_abandon`` tells the holder to forget the call;
- :meth:`DetachedCall.resume` moves the call onto the task path (a retry that must wait, for
  instance), with a cancel scope that carries the call's deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from wire._errors import CancelReason, UnavailableError, WireError
from wire._messages import Error, Result
from wire._server_events import CallRecord, EncodedResult, Interrupted
from wire._server_protocol import cancelled_error, deadline_error

__all__ = ["ANSWER_GRACE", "Detach", "DetachedCall", "error_reply"]

log = logging.getLogger("wire.server")

Outcome = Result | Error | EncodedResult | Interrupted

#: Seconds past a detached call's deadline, or past a cancel passed on, that its holder has to
#: end it with the other server's answer before the server answers ``unavailable``.
ANSWER_GRACE = 1.0


def error_reply(call_id: int, error: WireError) -> Error:
    """The error frame that answers ``call_id`` with ``error``."""
    return Error(id=call_id, code=error.code.value, message=error.message, details=error.details)


@attrs.frozen
class Detach:
    """What :attr:`~wire.Endpoint.run_inline` returns for a call it hands on: the server calls
    ``begin`` at once with the call's :class:`DetachedCall` (an exception it raises answers the
    call like a handler's)."""

    begin: Callable[[DetachedCall], None]


class DetachedCall:
    """One detached call: end it with :meth:`succeed`, :meth:`fail`, :meth:`cancelled` or
    :meth:`resume`.

    Only the first end counts; a lost caller or the server's give-up may have ended it already.
    """

    __slots__ = (
        "__weakref__",
        "_cancelled_at",
        "_end",
        "_now",
        "_resume",
        "ended",
        "held",
        "on_abandon",
        "on_cancel",
        "record",
    )

    def __init__(
        self,
        record: CallRecord,
        *,
        end: Callable[[DetachedCall, Outcome], None],
        resume: Callable[[DetachedCall, Callable[[], Awaitable[Any]]], None],
        now: Callable[[], float],
    ) -> None:
        #: The server's record of the call (read only).
        self.record = record
        self._end = end
        self._resume = resume
        self._now = now
        self._cancelled_at: float | None = None
        #: Whether the call was answered (or moved onto the task path).
        self.ended = False
        #: Whether the holder keeps the call without having handed it on yet (see the module
        #: docstring): the holder sets it while the call waits in its queue.
        self.held = False
        #: Told the reason of a cancel (``caller``, ``deadline``, ``superseded`` or
        #: ``shutdown``): the holder passes it on and still ends the call with the answer.
        self.on_cancel: Callable[[CancelReason], object] | None = None
        #: Told when the call ended without the holder's answer (its caller is gone, or the
        #: server stopped waiting): the holder passes the cancel on and forgets the call.
        self.on_abandon: Callable[[CancelReason], object] | None = None

    @property
    def deadline(self) -> float | None:
        """The call's deadline on the server's (trio) clock, or ``None``."""
        return self.record.deadline

    @property
    def overdue(self) -> bool:
        """Whether the call's deadline has passed."""
        deadline = self.record.deadline
        return deadline is not None and self._now() >= deadline

    @property
    def cancelling(self) -> bool:
        """Whether a cancel was passed on and the call awaits the answer."""
        return self._cancelled_at is not None

    @property
    def gives_up_at(self) -> float | None:
        """When the server stops waiting for the holder's answer (its clock), or ``None``."""
        deadline = self.record.deadline
        if self.on_cancel is None or self.held:
            return deadline  # nothing was handed on: the deadline is the server's to answer
        limit = None if deadline is None else deadline + ANSWER_GRACE
        if self._cancelled_at is not None:
            after_cancel = self._cancelled_at + ANSWER_GRACE
            limit = after_cancel if limit is None else min(limit, after_cancel)
        return limit

    def succeed(self, value: Any) -> None:
        self._finish(Result(id=self.record.call.id, value=value))

    def succeed_encoded(self, value: bytes) -> None:
        """Answer with a value that is msgpack already (an owner's result, passed on)."""
        self._finish(EncodedResult(id=self.record.call.id, value=value))

    def fail(self, error: WireError) -> None:
        self._finish(error_reply(self.record.call.id, error))

    def cancelled(self, state: str | None = None) -> None:
        """Answer ``cancelled``, as a handler stopped by the call's cancel would: the holder
        knows the call never took effect (the server it was passed on to said so).

        Args:
            state: ``queued`` or ``running``, where the other server says the cancel found the
                call (default: ``running``, as the call is here).
        """
        record = self.record
        reason = record.cancel_reason
        if state not in ("queued", "running") or reason is None:
            self._finish(Interrupted.CANCELLED)
            return
        self._finish(cancelled_error(record.call.id, state, reason))

    def resume(self, handler: Callable[[], Awaitable[Any]]) -> None:
        """Go on in a task running ``handler()``, whose value or error answers the call."""
        if not self.ended:
            self.ended = True
            self._resume(self, handler)

    def cancel(self) -> None:
        """The server's cancel (the protocol asked for it, ``record.cancel_reason`` says why):
        pass it on; the holder's answer ends the call (see the module docstring)."""
        if self.ended or self._cancelled_at is not None:
            return
        record = self.record
        reason = record.cancel_reason or CancelReason.CALLER
        if reason is CancelReason.PEER_LOST:
            self._abandon(reason)  # nobody is left to answer: no frame goes out
            self._finish(Interrupted.CANCELLED)
            return
        if self.held:
            self._abandon(reason)
            self.cancelled("queued")
            return
        if self.on_cancel is None:
            self._finish(Interrupted.CANCELLED)
            return
        now = self._now()
        if reason is CancelReason.CALLER and record.deadline is not None and now >= record.deadline:
            reason = CancelReason.DEADLINE
        self._cancelled_at = now
        try:
            self.on_cancel(reason)
        except Exception:
            log.exception("passing on the cancel of call %s failed", record.call.id)
            self._finish(self._unknown("its cancel could not be passed on"))

    def expire(self) -> None:
        """The server stopped waiting (:attr:`gives_up_at` passed): a call handed on is
        answered ``unavailable``, outcome unknown; one that was not, ``deadline-exceeded``."""
        if self.ended:
            return
        if self.held:
            self._abandon(CancelReason.DEADLINE)
            self._finish(deadline_error(self.record.call.id, "queued"))
            return
        if self.on_cancel is None:
            self._finish(Interrupted.DEADLINE)
            return
        waited_for = "its cancel" if self._cancelled_at is not None else "its deadline"
        self._abandon(self.record.cancel_reason or CancelReason.DEADLINE)
        self._finish(self._unknown(f"no answer came within {ANSWER_GRACE:g} s of {waited_for}"))

    def _unknown(self, why: str) -> Error:
        record = self.record
        return error_reply(
            record.call.id,
            UnavailableError(
                f"{record.call.endpoint} was handed on and {why}; it may have taken effect",
                details={"outcome": "unknown"},
            ),
        )

    def _abandon(self, reason: CancelReason) -> None:
        hook = self.on_abandon or self.on_cancel
        if hook is not None:
            try:
                hook(reason)
            except Exception:
                log.exception("passing on the cancel of call %s failed", self.record.call.id)

    def _finish(self, outcome: Outcome) -> None:
        if not self.ended:
            self.ended = True
            self._end(self, outcome)
