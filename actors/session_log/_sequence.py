"""A compact, read-only sequence of loaded session events.

Most of a real log is `assistant/chunk` deltas (§13: "usually the bulk of the log"),
stored as packed rows. Expanded, every member costs three Python dicts (hundreds of
bytes) for a few bytes of text, so a loaded log keeps each validated packed row as its
original line bytes and expands members only when they are read. Every other event is a
plain dict. Indexing and iteration yield exactly the events the spec defines.
"""

from __future__ import annotations

import array
import bisect
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import attrs

from actors.session_log._chunks import expand_row
from actors.session_log._json import parse_line

__all__ = ["EventSequence", "Item", "PackedRun"]


@attrs.frozen(slots=True)
class PackedRun:
    """A validated packed row kept as its line bytes."""

    seq0: int
    """Seq of the first member."""
    count: int
    """Number of member events."""
    line: bytes
    """The row's line, without the newline; re-parsed on access."""

    def expand(self) -> list[dict[str, Any]]:
        """Return the member `assistant/chunk` events."""
        return expand_row(parse_line(self.line))


Item = dict[str, Any] | PackedRun


class EventSequence(Sequence[Mapping[str, Any]]):
    """Events of a loaded log, in seq order (``events[i]["seq"] == i``).

    Events are plain dicts; treat them as read-only. Members of packed rows are rebuilt
    on every access, so identity (`is`) is not stable for them; equality is.
    """

    __slots__ = ("_items", "_length", "_starts")

    def __init__(self, items: Sequence[Item]) -> None:
        self._items: tuple[Item, ...] = tuple(items)
        # An int array, not a list: one 8-byte slot per stored item instead of a 36-byte int
        # object and pointer (a loaded log holds this for as long as it lives).
        starts = array.array("q")
        position = 0
        for item in self._items:
            starts.append(position)
            position += item.count if isinstance(item, PackedRun) else 1
        self._starts = starts
        self._length = position

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self._length)))
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("event index out of range")
        slot = bisect.bisect_right(self._starts, index) - 1
        item = self._items[slot]
        if isinstance(item, PackedRun):
            return item.expand()[index - self._starts[slot]]
        return item

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        for item in self._items:
            if isinstance(item, PackedRun):
                yield from item.expand()
            else:
                yield item

    def __repr__(self) -> str:
        return f"<EventSequence of {self._length} events>"

    @property
    def items(self) -> tuple[Item, ...]:
        """The stored form: single events (dicts) and packed runs, in seq order."""
        return self._items

    def singles(self) -> Iterator[Mapping[str, Any]]:
        """Yield only events stored one per line (every event but packed-row members).

        Packed-row members are always `assistant/chunk` deltas, so folds that ignore
        chunks (surface, titles, subagent labels, crash repair) can use this fast path.
        """
        for item in self._items:
            if not isinstance(item, PackedRun):
                yield item
