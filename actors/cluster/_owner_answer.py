"""What a caller is told when the call was passed on to the worker that owns its agent.

Only the owner knows whether a call took effect, so its answer is the truth: ``moved`` and a
shutdown that found the call still queued prove it never ran (the router may try the next
owner), any other error is the caller's answer, and a call cancelled here waits for the
owner's answer to the passed-on cancel (`call_to_outcome`), at most ``wire``'s answer grace,
before it says the outcome is unknown.
"""

from __future__ import annotations

import math
from typing import Any

import trio

from wire import (
    CallCancelledError,
    CancelReason,
    Client,
    UnavailableError,
    WireError,
)
from wire._detached import ANSWER_GRACE
from wire._errors import MovedError

__all__ = ["call_to_outcome", "never_ran", "owner_error"]


def owner_error(
    error: WireError, worker_id: str, endpoint: str, agent_id: str | None
) -> WireError | None:
    """What the caller gets for the owner's ``error``; ``None`` when it proves the call did not
    run, so the next owner may be tried."""
    if isinstance(error, MovedError):
        return None  # not executed; the owner's view and ours differ for a moment
    if not isinstance(error, CallCancelledError) or error.reason is not CancelReason.SHUTDOWN:
        return error
    if error.state == "queued":
        return None  # still queued when the owner shut down: it never ran
    # Our caller did not cancel: the owner shut down mid-call, so the call may have taken
    # effect, and `cancelled` would misstate who stopped it.
    about = "" if agent_id is None else f" for agent {agent_id!r}"
    return UnavailableError(
        f"worker {worker_id!r} shut down while running {endpoint}{about}; it may have taken effect",
        details={"agentId": agent_id, "worker": worker_id},
    )


class _Answer:
    """The one end of a call started with ``Client.start_call``, for a task to wait on."""

    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.value: Any = None
        self.error: WireError | None = None

    def __call__(self, value: Any, error: WireError | None) -> None:
        self.value, self.error = value, error
        self.done.set()


def never_ran(error: WireError) -> bool:
    """Whether the owner's answer to a call it was asked to cancel shows it had no effect."""
    return isinstance(error, CallCancelledError | MovedError)


def _unknown_outcome(endpoint: str, reason: str) -> UnavailableError:
    return UnavailableError(
        f"the owner did not answer {endpoint} within {ANSWER_GRACE:g} s of its {reason}; "
        "it may have taken effect",
        details={"outcome": "unknown"},
    )


async def call_to_outcome(client: Client, endpoint: str, args: dict[str, Any]) -> Any:
    """``client.call`` for a call that answers another caller: if this task is cancelled, the
    cancel is passed on and the owner's own answer awaited (shielded, at most ``ANSWER_GRACE``
    seconds), so what the caller is told is what happened.

    Returns:
        The owner's result, even when the cancel came too late to stop it.

    Raises:
        trio.Cancelled: cancelled, and the owner answered ``cancelled`` or ``moved`` (the call
            had no effect).
        UnavailableError: cancelled, and the owner did not answer in time
            (``details.outcome``: ``unknown``).
        WireError: the owner's error (``deadline-exceeded``, ``peer-lost``, …).
    """
    await trio.lowlevel.checkpoint_if_cancelled()  # nothing sent yet: a cancel is the truth
    deadline = trio.current_effective_deadline()
    budget = None if deadline == math.inf else max(0.0, deadline - trio.current_time()) * 1000
    answer = _Answer()
    call_id = client.start_call(endpoint, args, deadline_ms=budget, on_done=answer)
    try:
        await answer.done.wait()
    except trio.Cancelled:
        now = trio.current_time()
        reason = CancelReason.DEADLINE if now >= deadline else CancelReason.CALLER
        client.request_cancel(call_id, reason)
        with trio.move_on_after(ANSWER_GRACE, shield=True):
            await answer.done.wait()
        if not answer.done.is_set():
            client.cancel_call(call_id, reason)
            raise _unknown_outcome(endpoint, reason.value) from None
        if answer.error is None:
            return answer.value  # it finished before the cancel reached it
        if never_ran(answer.error):
            raise
        raise answer.error from None
    if answer.error is not None:
        raise answer.error
    return answer.value
