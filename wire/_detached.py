"""Calls that end from a callback instead of a task: a relay's fast path.

A server that forwards a call to another server (the cluster supervisor) would otherwise spend a
task and a cancel scope per call only to wait for the other side's answer, and those are most of
its per-call cost. Instead its endpoint's ``run_inline`` returns :class:`Detach`: the server
marks the call running, hands a :class:`DetachedCall` to ``Detach.begin``, and the call ends when
whoever holds it reports the answer (from the client's receive path, say). Nothing else changes
for the caller:

- a cancel (caller, superseded, peer lost, shutdown) runs the holder's ``on_cancel`` with the
  reason to pass on (``deadline`` when the caller's cancel says so or the deadline passed,
  else ``caller``), then answers ``cancelled`` at once, as a cancelled handler task would; a
  late answer is ignored, and so is an ``on_cancel`` that raises (it is logged: the caller
  still gets its one terminal frame and the server keeps serving);
- the call's deadline is the holder's to pass on (the other server enforces it), and the server
  enforces it too, on its timer, for an answer that never comes;
- :meth:`DetachedCall.resume` moves the call onto the task path (a retry that must wait, for
  instance), with a cancel scope that carries the call's deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from wire._errors import CancelReason, WireError
from wire._messages import Error, Result
from wire._server_protocol import CallRecord, EncodedResult, Interrupted

__all__ = ["Detach", "DetachedCall", "error_reply"]

log = logging.getLogger("wire.server")

Outcome = Result | Error | EncodedResult | Interrupted


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
    """One detached call: end it with :meth:`succeed`, :meth:`fail` or :meth:`resume`.

    Only the first end counts; a cancel or the deadline may have ended it already.
    """

    __slots__ = ("_end", "_now", "_record", "_resume", "ended", "on_cancel")

    def __init__(
        self,
        record: CallRecord,
        *,
        end: Callable[[DetachedCall, Outcome], None],
        resume: Callable[[DetachedCall, Callable[[], Awaitable[Any]]], None],
        now: Callable[[], float],
    ) -> None:
        self._record = record
        self._end = end
        self._resume = resume
        self._now = now
        #: Whether the call was answered (or moved onto the task path).
        self.ended = False
        #: Told why the call is being given up (``caller`` or ``deadline``) before the server
        #: answers ``cancelled``: the holder passes the cancel on.
        self.on_cancel: Callable[[CancelReason], None] | None = None

    @property
    def record(self) -> CallRecord:
        return self._record

    @property
    def deadline(self) -> float | None:
        """The call's deadline on the server's (trio) clock, or ``None``."""
        return self._record.deadline

    def succeed(self, value: Any) -> None:
        self._finish(Result(id=self._record.call.id, value=value))

    def succeed_encoded(self, value: bytes) -> None:
        """Answer with a value that is msgpack already (an owner's result, passed on)."""
        self._finish(EncodedResult(id=self._record.call.id, value=value))

    def fail(self, error: WireError) -> None:
        self._finish(error_reply(self._record.call.id, error))

    def resume(self, handler: Callable[[], Awaitable[Any]]) -> None:
        """Go on in a task running ``handler()``, whose value or error answers the call."""
        if not self.ended:
            self.ended = True
            self._resume(self, handler)

    def cancel(self) -> None:
        """The server's cancel (the protocol asked for it): pass it on, answer ``cancelled``."""
        if self.ended:
            return
        record = self._record
        passed = record.deadline is not None and self._now() >= record.deadline
        # The caller's own deadline may fire before ours (we count the budget from arrival).
        says_deadline = record.cancel_reason is CancelReason.DEADLINE
        self._give_up(CancelReason.DEADLINE if passed or says_deadline else CancelReason.CALLER)
        self._finish(Interrupted.CANCELLED)

    def expire(self) -> None:
        """The deadline passed with no answer: pass the cancel on, answer the deadline."""
        if not self.ended:
            self._give_up(CancelReason.DEADLINE)
            self._finish(Interrupted.DEADLINE)

    def _give_up(self, reason: CancelReason) -> None:
        if self.on_cancel is not None:
            try:
                self.on_cancel(reason)
            except Exception:
                log.exception("passing on the cancel of call %s failed", self._record.call.id)

    def _finish(self, outcome: Outcome) -> None:
        if not self.ended:
            self.ended = True
            self._end(self, outcome)
