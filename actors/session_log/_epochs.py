"""Fencing epochs in a session log: epoch-open records, epoch markers and the reader's filter.

A clustered worker writes a session only under the fencing epoch of its shard claim (issue 8:
"the fencing token (epoch) is the key's ``create_revision``"). A paused owner (a zombie) may
still land appends after another worker claimed the shard under a higher epoch; readers must
ignore those late writes, and only those.

Representation, and why. DSH's envelope admits exactly seven top-level keys ("any other key
rejects the log", `session-log-format` §5.1), packed chunk rows have exact data keys
(§5.2), and a skippable zstd frame is "bad magic" to upstream (§9). So an epoch can neither
ride on each record nor in the framing. What upstream does tolerate is an event of an unknown
type marked ``"ignorable": true`` (§6.2: it "is kept in the list (it still counts for
``capturedThroughSeq``)"). Hence two such events, with ``data = {"epoch": E}``:

- ``fence/epoch-open`` (`EPOCH_OPEN_TYPE`): a writer opened the log under epoch ``E``; it is the
  first record that writer writes, ahead of its first append.
- ``fence/epoch`` (`EPOCH_MARK_TYPE`): the first record of every later write batch (one zstd
  frame, or one ``write`` of raw lines) of that writer.

Every record of a batch therefore carries, by position, the epoch of the marker that opens its
batch: a batch is one atomic ``O_APPEND`` write, so two writers' batches never interleave.
Markers cost one seq per batch, and only in clustered logs; plain logs (single process, DSH)
never contain them and read exactly as before. Upstream reads a fenced log as it is, markers
included (unless a zombie's late batch broke seq contiguity; then the log is damaged for
upstream exactly as two unfenced writers would have damaged it).

The reader's rule (`EpochFilter`): records that follow a marker of a *lower* epoch than the
highest epoch opened so far are dropped, up to the next marker of the current epoch or higher.
Records before any marker are unaffected. When a higher epoch-open finds lower-epoch batches
at seqs it claims (a zombie wrote between the new owner's read and its open), those batches
are rolled back: they were never acknowledged, since the zombie's ack guard stops acks before
the new claim exists, and the new owner read everything acknowledged before it opened.

Writers (`_writer`): a writer without an epoch that opens a fenced log continues
under the log's highest epoch, so its batches never read as part of a zombie's; a crash repair
puts the writer's epoch record ahead of the closers (`_epoch_repair`). An upstream
DSH writer knows no markers: its batches after a dropped zombie batch would be dropped too, so
a fenced log is for this service to write (upstream may read it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from actors.session_log._errors import LogWriteError

__all__ = [
    "EPOCH_MARK_TYPE",
    "EPOCH_OPEN_TYPE",
    "FENCE_TYPES",
    "EpochFilter",
    "StaleEpochError",
    "fence_epoch",
    "fence_record",
]

EPOCH_OPEN_TYPE = "fence/epoch-open"
"""A writer opened the log under ``data.epoch`` (ignorable, so upstream keeps it as is)."""
EPOCH_MARK_TYPE = "fence/epoch"
"""A later batch of the writer that opened under ``data.epoch``."""
FENCE_TYPES = frozenset({EPOCH_OPEN_TYPE, EPOCH_MARK_TYPE})
"""Types reserved for the store: hosts may not append them."""


class StaleEpochError(LogWriteError):
    """A writer's epoch is lower than one the log already opened (it lost its claim).

    Attributes:
        epoch: the writer's epoch.
        log_epoch: the highest epoch opened in the log.
    """

    def __init__(self, message: str, *, epoch: int, log_epoch: int) -> None:
        self.epoch = epoch
        self.log_epoch = log_epoch
        super().__init__(message)


def fence_record(kind: str, epoch: int) -> dict[str, Any]:
    """The ``type``, ``data`` and ``ignorable`` of a marker (the writer adds seq and time)."""
    return {"type": kind, "data": {"epoch": epoch}, "ignorable": True}


def fence_epoch(value: Mapping[str, Any]) -> int | None:
    """The epoch of a well-formed marker (a fence type, ``ignorable: true``, and
    ``data.epoch`` a non-negative integer); None for anything else, which then reads as an
    ordinary ignorable event, as upstream reads it."""
    if value.get("ignorable") is not True:
        return None
    data = value.get("data")
    epoch = data.get("epoch") if type(data) is dict else None
    if type(epoch) is not int or epoch < 0:
        return None
    return epoch


@attrs.define
class _Mark:
    index: int
    """Position of the marker among the kept items."""
    seq: int
    epoch: int


@attrs.define
class EpochFilter:
    """The reader's fencing state over one log, from its first marker on.

    The scanner feeds it only records it could keep; `admit` says whether a record stays.
    """

    #: The highest epoch opened so far.
    epoch: int = -1
    #: Inside a lower-epoch (zombie) batch: drop records until the next current marker.
    skipping: bool = False
    _marks: list[_Mark] = attrs.Factory(list)

    def admit_marker(self, epoch: int) -> bool:
        """Whether a marker (either kind: both fence alike), and the batch it opens, stays."""
        if epoch < self.epoch:
            self.skipping = True
            return False
        self.skipping = False
        if epoch > self.epoch:
            # A batch marker above every open (its open was lost with a torn frame) raises
            # the epoch too: only a writer holding a newer claim can write it.
            self.epoch = epoch
        return True

    def rollback_to(self, seq: int, epoch: int) -> int | None:
        """Where to cut the kept items so that a new epoch-open at ``seq`` continues them.

        Returns the item index to truncate to, or None when the records at ``seq`` and later
        are not all batches of lower epochs (then the seq gap is real damage).
        """
        for position, mark in enumerate(self._marks):
            if mark.seq == seq:
                later = self._marks[position:]
                if all(other.epoch < epoch for other in later):
                    del self._marks[position:]
                    return mark.index
                return None
            if mark.seq > seq:
                return None
        return None

    def record_mark(self, index: int, seq: int, epoch: int) -> None:
        """Remember a kept marker (for `rollback_to`)."""
        self._marks.append(_Mark(index=index, seq=seq, epoch=epoch))
