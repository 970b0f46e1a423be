"""The store's side of fencing (issue 8): which epoch a session's writer writes under.

A clustered process gives the store ``epoch_of(session_id)``: the epoch of its shard claim, or
None when it holds no claim (or is not clustered). Before each batch the writer follows it:
a new, higher epoch reopens the writer from disk (which writes a new epoch-open record); a
lower one (another owner opened the log under a newer claim), or a claim that is gone, may
not write (`UnavailableError`, before anything is written). The log records themselves are
`actors.session_log._epochs`.
"""

from __future__ import annotations

from actors.session_log import SessionLogWriter, StaleEpochError
from actors.store._events import EventInput
from actors.store._options import StoreOptions
from wire import UnavailableError

__all__ = ["batch_prefix", "claim_is_new", "claimed_epoch", "stale_error"]


def claimed_epoch(options: StoreOptions, session_id: str) -> int | None:
    """The epoch this process may write ``session_id`` under (None: no claim, or not
    clustered)."""
    epoch_of = options.epoch_of
    return None if epoch_of is None else epoch_of(session_id)


def claim_is_new(current: int | None, epoch: int | None, session_id: str, *, claimed: bool) -> bool:
    """Check the claim before a batch of a live writer that writes under ``current``.

    Args:
        current: the writer's epoch (None: a plain writer).
        epoch: the claim's epoch now (`claimed_epoch`).
        session_id: the session.
        claimed: whether the writer writes under a claim of this process.

    Returns:
        True for a new, higher claim: another owner may have written the log since this
        writer read it, so the caller reopens the writer from disk (which writes the new
        epoch-open at the right seq) instead of writing from stale memory.

    Raises:
        UnavailableError: the claim is gone, or its epoch is below the writer's.
    """
    if epoch is None:
        if claimed:
            raise UnavailableError(
                f'session "{session_id}": this process no longer holds the claim it wrote '
                f"under (epoch {current})",
                details={"sessionId": session_id},
            )
        return False
    if current is not None and epoch < current:
        raise stale_error(session_id, StaleEpochError("", epoch=epoch, log_epoch=current))
    return current is None or epoch > current


def stale_error(session_id: str, error: StaleEpochError) -> UnavailableError:
    """What a writer under a fenced-off epoch gets."""
    return UnavailableError(
        f'session "{session_id}": epoch {error.epoch} is fenced off: the session was opened '
        f"under epoch {error.log_epoch} by a newer owner",
        details={"sessionId": session_id, "epoch": error.epoch},
    )


def batch_prefix(writer: SessionLogWriter) -> tuple[EventInput, ...]:
    """The epoch record the next batch must start with (empty for a plain log, or a batch
    that joins a pending one)."""
    marker = writer.next_marker()
    if marker is None:
        return ()
    return (EventInput(type=marker["type"], data=marker["data"], ignorable=True),)
