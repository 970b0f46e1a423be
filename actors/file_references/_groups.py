"""The path and subsequence tiers of a large pool, computed per parent directory (spec §3.1).

A global needle never contains ``/`` (a slash selects directory mode, spec §2.4), so for a
candidate ``P = D + "/" + N`` (``D`` its parent directory, ``N`` its basename, both lower-cased):

- "lower-cased ``P`` contains ``q``" exactly when ``D`` or ``N`` contains it; the rows whose
  ``N`` contains it are already in the basename tiers, so the path tier is "``D`` contains ``q``":
  one test per distinct directory (about a tenth of the rows), not per row;
- the greedy leftmost scan of ``P`` is the scan of ``D`` continued into ``N``. When ``D`` holds
  all of ``q``, every child matches with the same end (one scan per directory covers all its
  children, and they are ranked without touching them); otherwise each child continues from
  where its directory's scan stopped, so only those children are scanned, and only their short
  basenames.

Pools from :data:`BIT_MATCHER_ROWS` rows on whose names are ASCII run the subsequence tier on
:class:`~actors.file_references._bits.BitMatcher` (all candidates at once, with integer bit
sets). Other pools (small ones, directory listings, non-ASCII names) use the per-row engine
here: the scan state of every directory and the matches found in basenames are kept per needle
("chains"); a needle that extends a kept one (typing forward) continues from it with one
``str.find`` per live directory and per live row. Ranking takes the best ``(score, pool
order)`` with a heap: rows found in basenames have exact scores; directories holding the whole
needle are visited best end first and stop as soon as no later one can place.
"""

from __future__ import annotations

import heapq
import threading
from bisect import bisect_left, bisect_right
from collections import Counter, OrderedDict
from collections.abc import Iterable
from itertools import accumulate, chain, compress, count, repeat
from operator import add, itemgetter, mul, not_, sub
from typing import Final

import attrs

from actors.file_references._bits import BitMatcher
from actors.file_references._rank import (
    DIRECTORY_BONUS,
    GAP_ALLOWANCE,
    TIER_SUBSEQUENCE,
    check_abort,
    utf16_units,
)

__all__ = ["SEPARATOR", "ParentGroups", "lower_units"]

SEPARATOR: Final = "\0"  # no file name contains NUL; a needle that does matches nothing
_BEST_SUBSEQUENCE: Final = TIER_SUBSEQUENCE + GAP_ALLOWANCE + DIRECTORY_BONUS
_CHAINS: Final = 16  # needles whose scan states are kept (typing, backspacing, retyping)
BIT_MATCHER_ROWS = 2048
"""From this many rows on, an ASCII pool's subsequence tier uses :class:`BitMatcher`."""
_BIT_MATCHER_NEEDLE: Final = 64  # longer needles (never typed) take the per-row scan
_found = (-1).__lt__
_plus_one = (1).__add__
_parent = itemgetter(0)


@attrs.frozen
class _Chain:
    """The greedy scan state of every candidate for one needle."""

    full: list[int]
    """Directories (group numbers) whose lower-cased path holds the whole needle."""
    full_texts: list[str]
    """Their lower-cased paths."""
    full_ends: list[int]
    """Where each one's scan ended (just past its last matched unit)."""
    rows: list[int]
    """Rows matched into their basename (their directory holds only a prefix of the needle)."""
    bases: list[str]
    """Their lower-cased basenames."""
    ends: list[int]
    """Where each one's scan ended in its basename."""
    offsets: list[int]
    """Where each one's basename starts in its path (so the path end is ``offset + end``)."""


class ParentGroups:
    """A pool's rows grouped by parent directory, for needles without ``/``.

    Immutable after construction apart from its chain cache, which a lock guards.
    """

    def __init__(
        self, paths: list[str], basenames: list[str], directories: int, *, bmp: bool
    ) -> None:
        """Group a pool.

        Args:
            paths: the pool's paths in pool order (as returned, any case).
            basenames: their lower-cased basenames in code units, in pool order.
            directories: how many of the first rows are directories.
            bmp: whether no path has an astral character.
        """
        self._directories = directories
        self._rows_total = len(paths)
        parents = list(map(_parent, map(str.rpartition, paths, repeat("/"))))
        # Group numbers in order of first appearance; rows keep pool order within a group.
        numbers = dict(zip(dict.fromkeys(parents), count(), strict=False))
        group_of = list(map(numbers.__getitem__, parents))
        order = sorted(range(len(paths)), key=group_of.__getitem__)
        sizes = Counter(group_of)
        self._sizes = list(map(sizes.__getitem__, range(len(numbers))))
        bounds = list(accumulate(self._sizes, initial=0))
        grouped_bases = list(map(basenames.__getitem__, order))
        slices = list(map(slice, bounds, bounds[1:]))
        self._rows = list(map(tuple, map(order.__getitem__, slices)))
        self._bases = list(map(tuple, map(grouped_bases.__getitem__, slices)))
        # "lower-cased P": "/" is neither cased nor case-ignorable, so lower-casing a parent on
        # its own gives the prefix of the lower-cased path (final sigma included).
        self._texts = lower_units(numbers, bmp)
        self._offsets = [len(text) + 1 if text else 0 for text in self._texts]
        # The directory paths joined (each after a separator), with their start offsets.
        self._joined = (
            SEPARATOR + SEPARATOR.join(self._texts) + SEPARATOR,
            list(accumulate(map(_plus_one, map(len, self._texts)), initial=1)),
        )
        self._lock = threading.Lock()
        self._bits: BitMatcher | None = None
        self._bits_lock = threading.Lock()
        # The bit matcher lays names out in one ASCII text with \0 and \1 as separators.
        self._ascii = (
            all(map(str.isascii, self._texts))
            and all(map(str.isascii, basenames))
            and "\1" not in SEPARATOR.join(basenames)
            and "\1" not in SEPARATOR.join(self._texts)
        )
        everything = list(range(len(self._texts)))
        self._chains: OrderedDict[str, _Chain] = OrderedDict()
        self._empty = _Chain(everything, list(self._texts), [0] * len(everything), [], [], [], [])

    def bit_matcher_if_built(self) -> BitMatcher | None:
        """The bit-set matcher if it is already built (never builds it)."""
        return self._bits

    def bit_matcher(self) -> BitMatcher | None:
        """The bit-set matcher of this pool, built on first call; ``None`` when the pool has
        fewer than :data:`BIT_MATCHER_ROWS` rows or a non-ASCII path."""
        if self._rows_total < BIT_MATCHER_ROWS or not self._ascii:
            return None
        with self._bits_lock:
            if self._bits is None:
                self._bits = BitMatcher(
                    self._texts, self._rows, self._bases, self._directories, self._rows_total
                )
            return self._bits

    def prepare(self, abort: threading.Event | None = None) -> None:
        """Build the bit-set matcher and its masks ahead of the first keystroke that needs them.

        Raises:
            RankAbortedError: ``abort`` was set (checked between masks).
        """
        bits = self.bit_matcher()
        if bits is not None:
            bits.prepare(abort)

    def containing(self, needle: str, count: int) -> list[int]:
        """The first ``count`` rows in pool order whose parent directory contains ``needle``."""
        # Groups are numbered in pool order of their first row, and the joined paths are in
        # that order: the ``count`` smallest rows lie in the first ``count`` groups that hit,
        # so the scan stops there. A hit is counted once per directory (the next search starts
        # at the following one: a needle never spans a separator).
        text, starts = self._joined
        hits: list[int] = []
        position = text.find(needle)
        while position >= 0 and len(hits) < count:
            group = bisect_right(starts, position) - 1
            hits.append(group)
            position = text.find(needle, starts[group + 1])
        prefix = itemgetter(slice(0, count))
        rows = map(prefix, map(self._rows.__getitem__, hits))
        return heapq.nsmallest(count, chain.from_iterable(rows))

    def subsequence(
        self, needle: str, wanted: int, taken: set[int], abort: threading.Event | None
    ) -> list[tuple[int, int]]:
        """The best ``wanted`` rows outside ``taken`` of the subsequence tier, best first.

        "300 + max(0, 100 − gap) + B" with gap = (index of last matched char + 1) − len(q),
        ordered by score, then pool order (spec §3.1, §3.2).

        Returns:
            ``(score, row)`` pairs.

        Raises:
            RankAbortedError: ``abort`` was set.
        """
        bits = self.bit_matcher() if len(needle) <= _BIT_MATCHER_NEEDLE else None
        if bits is not None:
            return bits.subsequence(needle, wanted, taken, abort)
        found = self._chain(needle, abort)
        check_abort(abort)
        length = len(needle)
        scale = self._rows_total + 1
        directories = self._directories
        # Keys pack (deficit from the best subsequence score, pool order) into one integer.
        heap: list[int] = []  # the best keys so far, negated (a max-heap)
        if found.rows:
            penalties = list(map(mul, map(directories.__le__, found.rows), repeat(DIRECTORY_BONUS)))
            gaps = map(
                add, map(sub, map(add, found.offsets, found.ends), repeat(length)), penalties
            )
            deficits = map(min, gaps, map(add, penalties, repeat(GAP_ALLOWANCE)))
            keys = map(add, map(mul, deficits, repeat(scale)), found.rows)
            best = heapq.nsmallest(wanted + len(taken), keys)
            heap = [-key for key in best if key % scale not in taken][:wanted]
            heapq.heapify(heap)
        if found.full:
            self._add_full_groups(found, length, wanted, taken, heap, scale)
        return [(_BEST_SUBSEQUENCE - key // scale, key % scale) for key in sorted(-k for k in heap)]

    def _add_full_groups(
        self, found: _Chain, length: int, wanted: int, taken: set[int], heap: list[int], scale: int
    ) -> None:
        # Every child of a directory that holds the whole needle ends where the directory's
        # scan ended: visit those directories by that end, best first, and stop when even a
        # directory child of the next one (the best it could offer) cannot place.
        width = len(found.full)
        order = list(map(add, map(mul, found.full_ends, repeat(width)), range(width)))
        heapq.heapify(order)
        directories = self._directories
        while order:
            end, index = divmod(heapq.heappop(order), width)
            gap = end - length
            bound = min(gap, GAP_ALLOWANCE) * scale
            if len(heap) >= wanted and bound > -heap[0]:
                return
            rows = self._rows[found.full[index]]
            split = bisect_left(rows, directories)
            parts = (
                (rows[:split], min(gap, GAP_ALLOWANCE)),
                (rows[split:], min(gap + DIRECTORY_BONUS, GAP_ALLOWANCE + DIRECTORY_BONUS)),
            )
            for part, deficit in parts:
                base = deficit * scale
                for row in part:
                    if row in taken:
                        continue
                    key = base + row
                    if len(heap) < wanted:
                        heapq.heappush(heap, -key)
                    elif key < -heap[0]:
                        heapq.heapreplace(heap, -key)
                    else:
                        break  # later rows of this kind only have larger keys

    def _chain(self, needle: str, abort: threading.Event | None) -> _Chain:
        """The scan state for ``needle``, continued from the longest kept prefix."""
        with self._lock:
            done = ""
            for cached in self._chains:
                if len(cached) > len(done) and needle.startswith(cached):
                    done = cached
            if done:
                self._chains.move_to_end(done)
                current = self._chains[done]
            else:
                current = self._empty
        for position in range(len(done), len(needle)):
            check_abort(abort)
            current = self._extend(current, needle[position])
            with self._lock:
                self._chains[needle[: position + 1]] = current
                if len(self._chains) > _CHAINS:
                    self._chains.popitem(last=False)
        return current

    def _extend(self, previous: _Chain, unit: str) -> _Chain:
        """Take one more needle unit: "its first occurrence at or after the position just past
        the previous match (greedy leftmost)", for every directory and row still matching."""
        positions = list(map(str.find, previous.full_texts, repeat(unit), previous.full_ends))
        keep = list(map(_found, positions))
        dropped = list(compress(previous.full, map(not_, keep)))
        found = list(map(str.find, previous.bases, repeat(unit), previous.ends))
        kept = list(map(_found, found))
        rows = list(compress(previous.rows, kept))
        bases = list(compress(previous.bases, kept))
        ends = list(map(_plus_one, compress(found, kept)))
        offsets = list(compress(previous.offsets, kept))
        if dropped:
            # A directory without the unit hands its children the rest of the needle: each
            # continues from the start of its basename.
            child_bases = list(chain.from_iterable(map(self._bases.__getitem__, dropped)))
            starts = list(map(str.find, child_bases, repeat(unit)))
            kept = list(map(_found, starts))
            rows += compress(chain.from_iterable(map(self._rows.__getitem__, dropped)), kept)
            bases += compress(child_bases, kept)
            ends += map(_plus_one, compress(starts, kept))
            child_offsets = _repeat_each(
                map(self._offsets.__getitem__, dropped), map(self._sizes.__getitem__, dropped)
            )
            offsets += compress(child_offsets, kept)
        return _Chain(
            list(compress(previous.full, keep)),
            list(compress(previous.full_texts, keep)),
            list(map(_plus_one, compress(positions, keep))),
            rows,
            bases,
            ends,
            offsets,
        )


def lower_units(texts: Iterable[str], bmp: bool) -> list[str]:
    """Lower-case texts into their code-unit views, in one C call.

    "Lower-case both P and q (Unicode full lower-casing ...)": NUL is neither cased nor
    case-ignorable, so lower-casing the joined texts equals lower-casing each.

    Raises:
        ValueError: a text contains NUL (no file system name can).
    """
    texts = list(texts)
    lowered = SEPARATOR.join(texts).lower()
    if not bmp:
        lowered = utf16_units(lowered)
    parts = lowered.split(SEPARATOR) if texts else []
    if len(parts) != len(texts):
        raise ValueError("a candidate path contains NUL")
    return parts


def _repeat_each(values: Iterable[int], times: Iterable[int]) -> Iterable[int]:
    return chain.from_iterable(map(repeat, values, times))
