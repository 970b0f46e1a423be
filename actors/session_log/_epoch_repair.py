"""Crash repair of a fenced log: the closers go after the repairing writer's epoch record.

A plain repair rewrites the reader's synthetic closers (§6.4) as they are. In a fenced log
(`actors.session_log._epochs`) that would attribute them to whatever batch the log ended in, and a
log that ends in a zombie's dropped batch would then drop them too. So a writer with an epoch
rewrites the events recovered from a torn frame, then its own epoch record, then closers
recomputed after that record (their seqs move up by one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.session_log._reader import LoadedSession
from actors.session_log._repair import interrupted_turn_closers
from actors.session_log._sequence import EventSequence, PackedRun
from actors.session_log._surface import SurfaceFolder

__all__ = ["fenced_repair"]

_ENVELOPE = ("type", "seq", "time", "data", "ignorable")


def fenced_repair(
    loaded: LoadedSession, durable: int, marker: Mapping[str, Any], now: int
) -> tuple[SurfaceFolder, list[dict[str, Any]]]:
    """The repair batch of a fenced writer, and the fold after it.

    Args:
        loaded: the log as loaded (its closers are replaced).
        durable: events wholly on disk; ``loaded.events[durable:stored_count]`` were
            recovered from a torn frame and are rewritten.
        marker: ``{type, data, ignorable}`` of the writer's epoch record.
        now: the record's time when the log has no event to take it from (closers reuse
            the last event's time, and so does the record).

    Returns:
        The fold after the batch, and the batch: recovered events, the epoch record, the
        closers.
    """
    events = loaded.events
    stored = loaded.stored_count
    last = events[stored - 1] if stored else None
    record = {**marker, "seq": stored, "time": last["time"] if last is not None else now}
    record = {key: record[key] for key in _ENVELOPE}
    # The fold of the stored events only: the loaded fold holds the reader's closers.
    folder = SurfaceFolder()
    position = 0
    items = events.items if isinstance(events, EventSequence) else tuple(events)
    for item in items:
        if position >= stored:
            break
        if isinstance(item, PackedRun):
            folder.skip(item.count)
            position += item.count
        else:
            folder.apply(item)
            position += 1
    folder.apply(record)
    singles = events.singles() if isinstance(events, EventSequence) else iter(events)
    kept = (event for event in singles if event["seq"] < stored)
    closers = interrupted_turn_closers((*kept, record), last=record)
    for closer in closers:
        folder.apply(closer)
    recovered = [dict(event) for event in events[durable:stored]]
    return folder, [*recovered, record, *closers]
