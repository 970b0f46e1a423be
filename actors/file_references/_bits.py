"""The subsequence tier of a large ASCII pool, matched for every candidate at once with integers.

The candidates are laid out in one text, directory by directory: ``\\0``, the directory's
lower-cased path ``D``, then each child's lower-cased basename after a ``\\1``. Python integers
serve as bit sets over that text (bit ``p`` is position ``p``), and the greedy leftmost scan
("for each character of ``q`` its first occurrence at or after the position just past the
previous match", spec §3.1) runs for all candidates at once: with ``Z`` the positions of the
character or of any separator and ``S`` one bit where each scan resumes, ``((~Z + S) & Z)`` sets,
for each scan, the first position at or after it that holds the character or ends its segment
(the carry of the addition runs over the positions between). A directory's scan that runs out of
``D`` hands the rest of the needle to all its children at once; a basename's scan that hits a
separator drops that candidate. Each needle unit costs a few integer operations over the whole
text, independent of how many candidates still match, and a needle that extends a kept one
(typing forward) costs one more step.

Ranking reads the hits by path-offset band (each position carries its offset in its path as a
code; a band is a bit-sliced comparison over the code's bit planes), best band first, and stops
once no later band can place.
"""

from __future__ import annotations

import heapq
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from itertools import accumulate, chain, compress, repeat
from operator import add, mul, not_
from typing import Final

from actors.file_references._rank import (
    DIRECTORY_BONUS,
    GAP_ALLOWANCE,
    TIER_SUBSEQUENCE,
    check_abort,
)

__all__ = ["BitMatcher"]

_BEST_SUBSEQUENCE: Final = TIER_SUBSEQUENCE + GAP_ALLOWANCE + DIRECTORY_BONUS
_FOLLOW_LIMIT: Final = 64  # needles longer than this are not followed
_CHAINS: Final = 16  # needles whose hits are kept (typing, backspacing, retyping)
_BANDS: Final = (16, 24, 32, 40, 48, 64, 80, 96, 128, 254)  # path offsets read per band
_CAP: Final = 253  # path offsets at or past this share one band code
_SEPARATOR_CODE: Final = 255
_NONZERO: Final = bytes([0] + [1] * 255)  # byte -> whether it is non-zero
_DIRECT = 2000  # up to this many hits, every hit is ranked (no band masks)
_plus_one = (1).__add__
_minus_one = (-1).__add__
_is_child = "\1".__eq__


def _mask(reversed_text: bytes, selected: bytes) -> int:
    """The bit set of the positions whose byte is in ``selected``."""
    table = bytearray(b"0" * 256)
    for byte in selected:
        table[byte] = ord("1")
    return int(reversed_text.translate(bytes(table)), 2)


def _positions(bits: int) -> Iterator[int]:
    """The set bits of ``bits``, lowest first."""
    data = bits.to_bytes((bits.bit_length() + 7) // 8, "little")
    # One C pass marks the non-zero bytes; ``find`` then jumps between them.
    marks = data.translate(_NONZERO)
    index = marks.find(1)
    while index >= 0:
        start = index * 8
        value = data[index]
        while value:
            low = value & -value
            yield start + low.bit_length() - 1
            value ^= low
        index = marks.find(1, index + 1)


class BitMatcher:
    """A pool's candidates, grouped by parent directory, as bit sets over one ASCII text."""

    def __init__(
        self,
        texts: Sequence[str],
        group_rows: Sequence[tuple[int, ...]],
        group_bases: Sequence[tuple[str, ...]],
        directories: int,
        rows_total: int,
    ) -> None:
        """Lay out a pool.

        Args:
            texts: each group's lower-cased parent path (``""`` for the root), ASCII only.
            group_rows: each group's rows (pool order, ascending).
            group_bases: each group's lower-cased basenames (ASCII only), matching the rows.
            directories: how many of the first rows (pool order) are directories.
            rows_total: the pool's size.

        Raises:
            ValueError: a text is not ASCII.
        """
        self._directories = directories
        self._scale = rows_total + 1
        self._group_rows = group_rows
        # Flat segments in text order: each group's D, then its children's basenames; each
        # segment is preceded by its separator (\0 before a D, \1 before a basename).
        segments: list[str] = []
        separators: list[str] = []
        code_starts: list[int] = []
        kinds: list[str] = []
        for text, rows, bases in zip(texts, group_rows, group_bases, strict=True):
            segments.append(text)
            segments += bases
            separators.append("\0")
            separators += repeat("\1", len(bases))
            # A position's code is its offset in the candidate's path: D's characters are the
            # path's first ones, a basename's follow "D/".
            code_starts.append(0)
            code_starts += repeat(len(text) + 1 if text else 0, len(bases))
            kinds.append("f")
            split = bisect_left(rows, directories)
            kinds += repeat("d", split)
            kinds += repeat("f", len(rows) - split)
        text = "".join(map(add, separators, segments)) + "\0"
        if not text.isascii():
            raise ValueError("the bit matcher needs ASCII paths")
        lengths = list(map(len, segments))
        code_ends = list(map(add, code_starts, lengths))
        offsets = bytes(range(_CAP)) + bytes((_CAP,)) * max(0, max(code_ends, default=0) - _CAP)
        codes = map(offsets.__getitem__, map(slice, code_starts, code_ends))
        separator = bytes((_SEPARATOR_CODE,))
        self._codes = separator + separator.join(codes) + separator
        self._reversed_codes = self._codes[::-1]
        marks = "f" + "f".join(map(mul, kinds, lengths)) + "f"
        self._directory_children = _mask(marks.encode("ascii")[::-1], b"d")
        self._size = len(text)
        self._reversed = text.encode("ascii")[::-1]
        starts = list(accumulate(map(_plus_one, lengths), initial=1))
        is_child = list(map(_is_child, separators))
        directory_starts = list(compress(starts, map(not_, is_child)))
        self._group_starts = list(map(_minus_one, directory_starts))
        self._directory_end_positions = list(map(add, directory_starts, map(len, texts)))
        self._child_starts = list(compress(starts, is_child))
        self._child_rows = list(chain.from_iterable(group_rows))
        self._full = (1 << self._size) - 1
        self._separators = _mask(self._reversed, b"\0\1")
        self._group_separators = _mask(self._reversed, b"\0")
        self._child_separators = _mask(self._reversed, b"\1")
        self._not_separators = self._full ^ self._separators
        # The first \1 of each group ends its D; D's positions lie between the \0 and it.
        marks_bits = bytearray(b"0" * self._size)
        for end in self._directory_end_positions:
            marks_bits[self._size - 1 - end] = ord("1")
        self._directory_ends = int(marks_bits, 2)
        # Every scan starts at the beginning of its directory's D.
        self._start = (self._group_separators << 1) & self._full
        landed = ((self._directory_ends ^ self._full) + self._start) & self._directory_ends
        self._directory_region = landed - self._start
        self._lock = threading.Lock()
        self._characters: dict[str, int] = {}
        self._bands: dict[int, int] = {}
        self._text_planes: list[int] | None = None
        self._offset_planes: list[int] | None = None
        self._chains: OrderedDict[str, int] = OrderedDict()

    def prepare(self, abort: threading.Event | None = None) -> None:
        """Build the bit planes of the text and of the offset codes, and from them (a few
        operations each) the offset bands and every character's positions.

        Raises:
            RankAbortedError: ``abort`` was set (checked between bit sets).
        """
        self._planes(abort)
        self._code_planes(abort)
        for limit in _BANDS:
            check_abort(abort)
            self._below(min(limit, _CAP + 1))
        for code in sorted(set(self._reversed) - {0, 1}):
            check_abort(abort)
            self._character(chr(code))

    def _planes(self, abort: threading.Event | None = None) -> list[int]:
        """Bit ``k`` of each position's character code, one integer per ``k`` (ASCII: 7)."""
        planes = self._text_planes
        if planes is None:
            planes = []
            for bit in range(7):
                check_abort(abort)
                planes.append(_mask(self._reversed, bytes(b for b in range(128) if b >> bit & 1)))
            self._text_planes = planes
        return planes

    def _code_planes(self, abort: threading.Event | None = None) -> list[int]:
        """Bit ``k`` of each position's offset code, one integer per ``k`` (8)."""
        planes = self._offset_planes
        if planes is None:
            planes = []
            for bit in range(8):
                check_abort(abort)
                selected = bytes(b for b in range(256) if b >> bit & 1)
                planes.append(_mask(self._reversed_codes, selected))
            self._offset_planes = planes
        return planes

    def _character(self, character: str) -> int:
        """The positions holding ``character`` or a separator."""
        found = self._characters.get(character)
        if found is None:
            found = self._separators
            code = ord(character)
            if code < 128:
                # Bit-sliced equality: the positions whose code agrees with ``code`` on every
                # bit plane.
                full = equal = self._full
                for bit, plane in enumerate(self._planes()):
                    equal &= plane if code >> bit & 1 else plane ^ full
                found |= equal
            with self._lock:
                self._characters[character] = found
        return found

    def _below(self, limit: int) -> int:
        """The positions whose offset code is below ``limit`` (a bit-sliced comparison)."""
        found = self._bands.get(limit)
        if found is None:
            planes = self._code_planes()
            full = equal = self._full
            below = 0
            for bit in range(7, -1, -1):
                if limit >> bit & 1:
                    below |= equal & (planes[bit] ^ full)
                    equal &= planes[bit]
                else:
                    equal &= planes[bit] ^ full
            found = below & self._not_separators if limit < _SEPARATOR_CODE else below
            with self._lock:
                self._bands[limit] = found
        return found

    def _band(self, low: int, limit: int) -> int:
        """The positions whose path offset is in ``[low, limit)`` (separators excluded)."""
        return self._below(min(limit, _CAP + 1)) & ~self._below(low)

    def hits(self, needle: str, abort: threading.Event | None = None) -> int:
        """Where each candidate's greedy scan of ``needle`` took its last unit.

        A hit inside a directory's ``D`` stands for all its children; a hit in a basename for
        that child alone.
        """
        with self._lock:
            done = ""
            for cached in self._chains:
                if len(cached) > len(done) and needle.startswith(cached):
                    done = cached
            current = self._chains[done] if done else -1
            if done:
                self._chains.move_to_end(done)
        full = self._full
        for position in range(len(done), len(needle)):
            check_abort(abort)
            stops = self._character(needle[position])
            resume = self._start if current < 0 else (current << 1) & full
            landed = ((stops ^ full) + resume) & stops
            found = landed & self._not_separators
            # A directory whose D ran out hands the unit to every child, from its start.
            exhausted = landed & self._directory_ends
            if exhausted:
                groups = self._group_separators
                ends = ((groups ^ full) + exhausted) & groups
                children = ((ends - exhausted) & self._child_separators) << 1
                found |= ((stops ^ full) + children) & stops & self._not_separators
            current = found
            with self._lock:
                self._chains[needle[: position + 1]] = current
                if len(self._chains) > _CHAINS:
                    self._chains.popitem(last=False)
        return current

    def follow(self, needle: str, abort: threading.Event | None = None) -> None:
        """Take the scan state of ``needle`` when a kept state is one unit shorter (or the
        needle is one unit long): the next keystroke then costs one step."""
        if len(needle) > _FOLLOW_LIMIT:
            return
        with self._lock:
            skip = needle in self._chains or (len(needle) > 1 and needle[:-1] not in self._chains)
        if not skip:
            self.hits(needle, abort)

    def subsequence(
        self, needle: str, wanted: int, taken: set[int], abort: threading.Event | None = None
    ) -> list[tuple[int, int]]:
        """The best ``wanted`` rows outside ``taken`` of the subsequence tier, best first.

        "300 + max(0, 100 − gap) + B" with gap = (index of last matched char + 1) − len(q),
        ordered by score, then pool order (spec §3.1, §3.2).

        Raises:
            RankAbortedError: ``abort`` was set.
        """
        found = self.hits(needle, abort)
        length = len(needle)
        scale = self._scale
        heap: list[int] = []  # the best keys so far, negated
        groups = found & self._directory_region
        directories = found & self._directory_children
        files = found ^ groups ^ directories
        if found.bit_count() <= _DIRECT:
            self._take_groups(groups, length, wanted, taken, heap)
            self._take_children(directories | files, length, wanted, taken, heap)
        else:
            # Band by band, best first; a file's deficit is the directory bonus above a
            # directory's, so file hits stop being read sooner.
            low = 0
            for limit in _BANDS:
                check_abort(abort)
                band = self._band(low, limit)
                if groups | directories:
                    self._take_groups(groups & band, length, wanted, taken, heap)
                    self._take_children(directories & band, length, wanted, taken, heap)
                if files:
                    self._take_children(files & band, length, wanted, taken, heap)
                if len(heap) >= wanted:
                    # Candidates of later bands end at limit + 1 or later.
                    worst = -heap[0]
                    gap = limit + 1 - length
                    if min(gap, GAP_ALLOWANCE) * scale > worst:
                        break
                    if min(gap + DIRECTORY_BONUS, GAP_ALLOWANCE + DIRECTORY_BONUS) * scale > worst:
                        files = 0
                low = limit
        return [(_BEST_SUBSEQUENCE - key // scale, key % scale) for key in sorted(-k for k in heap)]

    def _take_children(
        self, bits: int, length: int, wanted: int, taken: set[int], heap: list[int]
    ) -> None:
        # Hits in basenames: each is one candidate, ending at its path offset + 1.
        if not bits:
            return
        scale = self._scale
        directories = self._directories
        codes = self._codes
        starts = self._child_starts
        rows = self._child_rows
        for position in _positions(bits):
            row = rows[bisect_right(starts, position) - 1]
            if row in taken:
                continue
            penalty = 0 if row < directories else DIRECTORY_BONUS
            gap = codes[position] + 1 - length + penalty
            _push(heap, wanted, min(gap, GAP_ALLOWANCE + penalty) * scale + row)

    def _take_groups(
        self, bits: int, length: int, wanted: int, taken: set[int], heap: list[int]
    ) -> None:
        # Hits in a directory's D: all its children match, ending where D's scan ended. Visit
        # them by that end, best first, and stop when even a directory child (the best a
        # directory can offer) cannot place.
        if not bits:
            return
        scale = self._scale
        directories = self._directories
        codes = self._codes
        starts = self._group_starts
        ends = sorted(
            (codes[position] + 1, bisect_right(starts, position) - 1)
            for position in _positions(bits)
        )
        for end, group in ends:
            gap = end - length
            if len(heap) >= wanted and min(gap, GAP_ALLOWANCE) * scale > -heap[0]:
                return
            for row in self._group_rows[group]:
                if row in taken:
                    continue
                penalty = 0 if row < directories else DIRECTORY_BONUS
                key = min(gap + penalty, GAP_ALLOWANCE + penalty) * scale + row
                if not _push(heap, wanted, key):
                    # Later rows of this directory have larger keys: a directory's deficit is
                    # below a file's, and within a kind the row decides.
                    break


def _push(heap: list[int], wanted: int, key: int) -> bool:
    """Keep ``key`` among the best ``wanted`` (a max-heap of negated keys); whether it was."""
    if len(heap) < wanted:
        heapq.heappush(heap, -key)
        return True
    if key < -heap[0]:
        heapq.heapreplace(heap, -key)
        return True
    return False
