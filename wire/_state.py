"""Per-call state on the server, as a transition table (h11's "Rule 1": every state change
lives here).

The table is what guarantees exactly one terminal frame per call id: only a ``FINISH`` input
produces one, and it moves the call to ``DONE``, which has no outgoing moves. A cancel remembers
whether it landed while the call was still queued or already running, because the terminal
``cancelled`` error must say so.
"""

from __future__ import annotations

from enum import Enum

from wire._errors import LocalProtocolError

__all__ = ["CALL_TRANSITIONS", "CallInput", "CallState", "next_call_state"]


class CallState(Enum):
    # Members are singletons, so identity hashing is exact; Enum's own ``__hash__`` is Python
    # code, and the transition table hashes a pair of these per state change.
    __hash__ = object.__hash__

    #: Received; waiting for admission (the actor's mailbox, an activation).
    QUEUED = "queued"
    #: The handler is executing.
    RUNNING = "running"
    #: Cancel requested while queued; the handler task is unwinding.
    CANCELLING_QUEUED = "cancelling-queued"
    #: Cancel requested while running; the handler task is unwinding.
    CANCELLING_RUNNING = "cancelling-running"
    #: The terminal frame has been produced. No input is valid any more.
    DONE = "done"


class CallInput(Enum):
    __hash__ = object.__hash__

    #: The handler was admitted and began executing.
    START = "start"
    #: Cancel requested (by the caller, a deadline, a supersede, peer loss or shutdown).
    CANCEL = "cancel"
    #: The handler task ended; its terminal frame is produced now.
    FINISH = "finish"


CALL_TRANSITIONS: dict[tuple[CallState, CallInput], CallState] = {
    (CallState.QUEUED, CallInput.START): CallState.RUNNING,
    (CallState.QUEUED, CallInput.CANCEL): CallState.CANCELLING_QUEUED,
    # Rejected before it ever ran (unknown agent, invalid arguments, …).
    (CallState.QUEUED, CallInput.FINISH): CallState.DONE,
    (CallState.RUNNING, CallInput.CANCEL): CallState.CANCELLING_RUNNING,
    (CallState.RUNNING, CallInput.FINISH): CallState.DONE,
    # Admission may complete in the same scheduler batch as the cancel; the call still counts as
    # cancelled while queued, and its already-cancelled scope stops the handler at its first
    # checkpoint.
    (CallState.CANCELLING_QUEUED, CallInput.START): CallState.CANCELLING_QUEUED,
    (CallState.CANCELLING_QUEUED, CallInput.CANCEL): CallState.CANCELLING_QUEUED,
    (CallState.CANCELLING_QUEUED, CallInput.FINISH): CallState.DONE,
    (CallState.CANCELLING_RUNNING, CallInput.CANCEL): CallState.CANCELLING_RUNNING,
    (CallState.CANCELLING_RUNNING, CallInput.FINISH): CallState.DONE,
}


def next_call_state(state: CallState, event: CallInput) -> CallState:
    """Apply one input.

    Raises:
        LocalProtocolError: the pair has no transition (a bug in the caller of the core).
    """
    try:
        return CALL_TRANSITIONS[(state, event)]
    except KeyError:
        raise LocalProtocolError(
            f"can't handle {event.value} when call state={state.value}"
        ) from None
