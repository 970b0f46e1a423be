"""Calls read but not started yet: where a newer call sheds the one it supersedes, unrun.

A call with a ``supersede`` key (protocol §8: latest wins) cancels the older call with the same
key when it arrives. That only saves work if the older call has not run yet, and a server that
runs every call as soon as it reads it never has such a call: under overload the backlog waits
in ZeroMQ's queue, read in arrival order, so a keystroke's call has long finished by the time
the next keystroke's call is read (measured with 256 typists: 98 % of the superseded calls
ran to the end, and the answers came seconds late).

So a server that is behind (its last read left messages unread) stages what it reads instead:
a keyed call, and every call read while any call is staged (calls start in the order they
arrived), goes into a :class:`CallStage`. The socket's owner reads on while it finds staged
calls, which costs a decode each, and starts a budget of them per pass, oldest first. A call
superseded while staged ends at once with ``cancelled`` and ``details.state: queued``: it never
ran. Under load the backlog is in the stage, where each caller's newest call replaces its older
ones, instead of in a queue nobody can look into.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from wire._server_events import CallRecord, Interrupted
from wire._state import CallState

__all__ = ["STAGED", "CallStage"]


class _Staged:
    """The ``handle`` of a staged call (its handler has not started)."""

    def __repr__(self) -> str:
        return "STAGED"


STAGED = _Staged()


class CallStage:
    """Admitted calls waiting to start, in arrival order.

    Args:
        start: Starts a call (the server's usual path).
        finish: Ends a call that never started, with how it was interrupted.
        clock: The driver's clock (deadlines are on it).
    """

    def __init__(
        self,
        start: Callable[[CallRecord], None],
        finish: Callable[[CallRecord, Interrupted], None],
        clock: Callable[[], float],
    ) -> None:
        self._start = start
        self._finish = finish
        self._clock = clock
        self._queue: collections.deque[CallRecord] = collections.deque()
        #: Calls staged since the socket's owner last reset it (one drain): they cost a
        #: decode, not a handler, so they do not use the drain's budget.
        self.held_in_drain = 0
        #: Whether the server is behind (its last read left messages unread): only then do
        #: keyed calls wait. A server that keeps up starts each call as it reads it, as
        #: without a stage; there is no backlog for a newer call to find its older one in.
        self.behind = False
        #: Set by the socket's owner for the rest of a drain in which a running handler was
        #: cancelled: the calls read after it wait a pass, so that handler ends first, while
        #: the drain reads on and the cancels behind it take effect at once.
        self.hold = False

    def offer(self, record: CallRecord) -> bool:
        """Stage ``record`` if it must wait (the server is behind and it may be superseded,
        others wait before it, or the drain holds new calls); ``False``: start it now."""
        if self._queue or self.hold or (self.behind and record.call.supersede is not None):
            record.handle = STAGED
            self._queue.append(record)
            self.held_in_drain += 1
            return True
        return False

    def waiting(self) -> bool:
        return bool(self._queue)

    def __len__(self) -> int:
        return len(self._queue)

    def shed(self, record: CallRecord) -> bool:
        """End a staged call that was cancelled (superseded, its peer gone, shut down) without
        running it; ``False`` if ``record`` is not staged."""
        if record.handle is not STAGED:
            return False
        record.handle = None  # left in the queue; `release` skips it
        self._finish(record, Interrupted.CANCELLED)
        return True

    def release(self, limit: int) -> int:
        """Start up to ``limit`` staged calls, oldest first; how many started. A call whose
        deadline passed while it waited ends ``deadline-exceeded`` unrun."""
        started = 0
        queue = self._queue
        while queue and started < limit:
            record = queue.popleft()
            if record.handle is not STAGED:
                continue  # shed while staged
            record.handle = None
            if record.state is not CallState.QUEUED:
                continue  # ended some other way (defensive: a cancel sheds it)
            if record.deadline is not None and self._clock() >= record.deadline:
                self._finish(record, Interrupted.DEADLINE)
                continue
            self._start(record)
            started += 1
        return started
