"""Reopening a session log for appending: where its writer resumes, and the repair it commits.

`session-log-format` §6.4: a torn tail is truncated; events recovered from a torn zstd frame
and the synthetic closers are rewritten as one new batch ("a resume commits them"). Under a
fencing epoch the repair puts the writer's epoch record ahead of the closers
(`actors.session_log._epoch_repair`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from actors.session_log._batch import BatchWriter
from actors.session_log._epoch_repair import fenced_repair
from actors.session_log._epochs import StaleEpochError
from actors.session_log._json import dumps_line
from actors.session_log._reader import LoadedSession
from actors.session_log._surface import SurfaceFolder
from actors.session_log._title_fold import TitleFold

__all__ = ["Resumption", "commit_repair", "repair_batch", "resumption"]


@attrs.frozen(kw_only=True)
class Resumption:
    """What a writer reopening a loaded log continues from."""

    durable_count: int
    """Events wholly on disk; the rest of the loaded events are rewritten by the repair."""
    epoch: int | None
    """The epoch to write under."""
    epoch_opened: bool
    """Whether the writer continues an epoch the log already opened (markers only, no new
    epoch-open)."""


def resumption(loaded: LoadedSession, epoch: int | None) -> Resumption:
    """Where a writer of ``loaded`` resumes, writing under ``epoch``.

    Args:
        loaded: the log as loaded.
        epoch: the fencing epoch to write under; None continues under the log's own highest
            epoch, if it has one (else the log stays plain).

    Raises:
        StaleEpochError: ``epoch`` is lower than an epoch the log already opened.
    """
    if epoch is not None and loaded.epoch is not None and epoch < loaded.epoch:
        raise StaleEpochError(
            f"{loaded.path}: cannot write under epoch {epoch}: the log is already "
            f"fenced at epoch {loaded.epoch}",
            epoch=epoch,
            log_epoch=loaded.epoch,
        )
    return Resumption(
        # Events at or past `durable` are not (or not validly) on disk: recovered from a
        # torn zstd frame, or synthetic closers. A committing open rewrites them.
        durable_count=loaded.torn.durable_count if loaded.torn else loaded.stored_count,
        epoch=epoch if epoch is not None else loaded.epoch,
        # Continuing a fenced log under its own epoch needs markers, not a new open.
        epoch_opened=epoch is None,
    )


def repair_batch(
    loaded: LoadedSession,
    durable: int,
    marker: Mapping[str, Any] | None,
    clock: Callable[[], int],
) -> tuple[SurfaceFolder | None, list[Mapping[str, Any]]]:
    """The batch that commits a reopened log's repair, and the fold after it when it changed.

    Args:
        loaded: the log as loaded.
        durable: events wholly on disk (`Resumption.durable_count`).
        marker: the writer's epoch record (`SessionLogWriter.next_marker`), None for a plain
            repair.
        clock: the writer's clock, for an epoch record in a log without events.

    Returns:
        None and ``loaded.events[durable:]`` as they are (a plain repair: the loaded fold
        stands), or the fold after a fenced repair and its batch.
    """
    if marker is None:
        return None, list(loaded.events[durable:])
    folder, fenced = fenced_repair(loaded, durable, marker, clock())
    return folder, list(fenced)


def commit_repair(
    batches: BatchWriter,
    loaded: LoadedSession,
    durable: int,
    titles: TitleFold,
    clock: Callable[[], int],
) -> SurfaceFolder | None:
    """Open the log of ``loaded`` for appending: cut its torn tail and write its repair batch.

    Args:
        batches: the reopening writer's batches (nothing queued yet).
        loaded: the log as loaded.
        durable: events wholly on disk (`Resumption.durable_count`).
        titles: the writer's title fold, which takes the records of a fenced repair.
        clock: the writer's clock.

    Returns:
        The fold after a fenced repair, None when the loaded fold stands.

    Raises:
        LogWriteError: the file cannot be opened, cut or written (nothing of the repair
            batch is in it).
    """
    batches.open(truncate_to=loaded.torn.truncate_to if loaded.torn else None)
    if durable >= len(loaded.events):
        return None
    folder, repair = repair_batch(loaded, durable, batches.next_marker(), clock)
    for event in repair:
        if folder is not None:  # a fenced repair's batch holds new records
            titles.track(event)
        # An epoch record among them marks the batches opened under the epoch.
        batches.add(dict(event), dumps_line(event))
    batches.flush()
    return folder
