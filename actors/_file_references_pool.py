"""A pool of candidates prepared once and ranked at keystroke rate (spec §3, §5 "levers").

Upstream scores every candidate and sorts every match on each keystroke. The order, though, is a
pure function of (score, kind, length, path), and the kind/length/path part does not depend on
the needle. So a pool is sorted once in that order ("pool order": directories first, then by
code-unit length, then by code units) and its lower-cased paths and basenames are joined into two
strings in pool order. Then, per needle:

- the four substring tiers ("``N`` equals / starts with / contains ``q``", "``P`` contains
  ``q``") are found with ``str.find`` on the joined strings; hits come in pool order, which is
  the order within a tier, so each tier's scan stops as soon as the results are full — and a
  lower tier is only scanned when the higher ones left room;
- the subsequence tier (only reached when fewer than ``maxResults`` candidates contain the
  needle) finds each row's greedy leftmost end with one ``str.find`` per needle character over
  the rows still matching, narrowing from a cached earlier needle when the new one extends it
  (typing), then picks the best by (score, pool order) with a heap.

The output equals upstream's full sort (the tests compare them on random pools).
"""

from __future__ import annotations

import heapq
import re
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable
from itertools import accumulate, chain, compress, repeat
from operator import add, itemgetter, mul, sub
from typing import Final, cast

from actors._file_references_query import FileCandidate
from actors._file_references_rank import (
    DIRECTORY_BONUS,
    GAP_ALLOWANCE,
    TIER_BASENAME,
    TIER_EXACT,
    TIER_PATH,
    TIER_PREFIX,
    TIER_SUBSEQUENCE,
    RankAbortedError,
    all_bmp,
    check_abort,
    compile_needle,
    sort_paths,
    utf16_units,
)

__all__ = ["RankAbortedError", "RankPool", "Ranked"]

Ranked = tuple[int, int]
"""``(score, row)``: a ranked candidate of one pool (``row`` is its pool-order position)."""

_SEPARATOR: Final = "\0"  # no file name contains NUL; a needle that does matches nothing
_BEST_SUBSEQUENCE: Final = TIER_SUBSEQUENCE + GAP_ALLOWANCE + DIRECTORY_BONUS
_CHAINS: Final = 8  # subsequence match sets kept for narrowing (typing, backspace, retyping)
_MEMO: Final = 128  # finished results kept per pool
_BLOCK: Final = 4096  # rows matched per C-level call in the subsequence tier
_EAGER_PATHS: Final = 20_000  # up to this size, lowered paths are prepared with the pool
_plus_one = (1).__add__
_found = (-1).__lt__
_third = itemgetter(2)
_end = cast("Callable[[object], int]", re.Match.end)


def _lower_units(texts: Iterable[str], bmp: bool) -> list[str]:
    # "Lower-case both P and q (Unicode full lower-casing ...)" in code units, in one C call.
    texts = list(texts)
    lowered = _SEPARATOR.join(texts).lower()
    if not bmp:
        lowered = utf16_units(lowered)
    parts = lowered.split(_SEPARATOR) if texts else []
    if len(parts) != len(texts):
        raise ValueError("a candidate path contains NUL")
    return parts


def _starts(parts: list[str]) -> list[int]:
    # Offsets of each part in SEP + SEP.join(parts) + SEP, plus the end: all C-level iterators.
    return list(accumulate(map(_plus_one, map(len, parts)), initial=1))


class RankPool:
    """Candidates (directories and files) prepared for ranking many needles.

    Immutable after construction apart from its caches, which a lock guards, so concurrent
    rankings (worker threads) are safe.
    """

    def __init__(self, directories: list[str], files: list[str]) -> None:
        """Prepare a pool.

        Args:
            directories: directory paths as returned (unique; consumed, the lists are sorted).
            files: file paths as returned (unique, none also a directory).

        Raises:
            ValueError: a path contains NUL (no file system name can).
        """
        bmp = all_bmp(directories) and all_bmp(files)
        sort_paths(directories, with_length=True, bmp=bmp)
        sort_paths(files, with_length=True, bmp=bmp)
        paths = directories + files
        self._paths = paths
        self._directories = len(directories)
        self._bmp = bmp
        # "Let N be the part of lower-cased P after its last /" (spec §3.1): as no lower-casing
        # produces or crosses a "/", that is the lower-cased basename. NUL is neither cased nor
        # case-ignorable either, so lower-casing the joined names equals lower-casing each.
        basenames = _lower_units(map(_third, map(str.rpartition, paths, repeat("/"))), bmp)
        self._base_text = f"{_SEPARATOR}{_SEPARATOR.join(basenames)}{_SEPARATOR}"
        self._base_starts = _starts(basenames)
        self._lock = threading.Lock()
        # The lowered paths are only needed by the path and subsequence tiers: a large pool
        # builds them on first need, so they do not delay the first query.
        self._path_index: tuple[str, list[int], list[str]] | None = None
        self._chains: OrderedDict[str, tuple[list[int], list[str], list[int]]] = OrderedDict()
        self._memo: OrderedDict[tuple[str, int], list[Ranked]] = OrderedDict()
        if len(paths) <= _EAGER_PATHS:
            self._paths_lowered()

    def _paths_lowered(self) -> tuple[str, list[int], list[str]]:
        """The joined lowered paths, their offsets and the lowered paths (built once)."""
        with self._lock:
            if self._path_index is None:
                parts = _lower_units(self._paths, self._bmp)
                text = f"{_SEPARATOR}{_SEPARATOR.join(parts)}{_SEPARATOR}"
                self._path_index = (text, _starts(parts), parts)
            return self._path_index

    def __len__(self) -> int:
        return len(self._paths)

    @property
    def directories(self) -> int:
        """How many of the candidates are directories (they come first in pool order)."""
        return self._directories

    def entries(self) -> list[tuple[str, bool]]:
        """Every ``(path, is_directory)``, in pool order."""
        directories = self._directories
        return [(path, row < directories) for row, path in enumerate(self._paths)]

    def candidate(self, row: int) -> FileCandidate:
        """The candidate record of a row."""
        return FileCandidate(self._paths[row], "directory" if row < self._directories else "file")

    def order_key(self, ranked: Ranked) -> tuple[int, bool, int, str]:
        """Upstream's full sort key of a ranked row, to merge the results of several pools."""
        value, row = ranked
        path = self._paths[row]
        units = path if self._bmp else utf16_units(path)
        return (-value, row >= self._directories, len(units), units)

    def rank(self, needle: str, limit: int, abort: threading.Event | None = None) -> list[Ranked]:
        """Score, order and truncate the pool exactly like upstream (spec §3.1, §3.2).

        Args:
            needle: from :func:`~actors._file_references_rank.prepare_needle`.
            limit: ``maxResults``.
            abort: set when the caller was cancelled; checked between passes.

        Returns:
            At most ``limit`` ``(score, row)`` pairs, best first.

        Raises:
            RankAbortedError: ``abort`` was set.
        """
        if not needle:
            # "Empty needle ...: every candidate scores 0 and none is dropped", and "only when
            # the needle is non-empty: shorter path first" — so kind, then code units.
            return [(0, row) for row in self._first_by_path(limit)]
        if _SEPARATOR in needle:
            return []
        key = (needle, limit)
        with self._lock:
            memo = self._memo.get(key)
            if memo is not None:
                self._memo.move_to_end(key)
                return list(memo)
        ranked: list[Ranked] = []
        taken: set[int] = set()
        base, base_starts = self._base_text, self._base_starts
        # "The first rule that applies wins" (spec §3.1): each tier is scanned only while the
        # tiers above left room, and in pool order, so it stops once the results are full.
        tiers = (
            (base, base_starts, f"{_SEPARATOR}{needle}{_SEPARATOR}", 1, TIER_EXACT),
            (base, base_starts, f"{_SEPARATOR}{needle}", 1, TIER_PREFIX),
            (base, base_starts, needle, 0, TIER_BASENAME),
            (None, None, needle, 0, TIER_PATH),
        )
        for text, starts, pattern, offset, tier in tiers:
            check_abort(abort)
            if text is None or starts is None:
                text, starts, _ = self._paths_lowered()
            self._scan(text, starts, pattern, offset, tier, limit, taken, ranked)
            if len(ranked) >= limit:
                break
        else:
            if len(needle) > 1:  # one character: a subsequence is a substring, done above
                ranked.extend(self._subsequence_tier(needle, limit - len(ranked), taken, abort))
        with self._lock:
            self._memo[key] = list(ranked)
            if len(self._memo) > _MEMO:
                self._memo.popitem(last=False)
        return ranked

    def _scan(
        self,
        text: str,
        starts: list[int],
        pattern: str,
        offset: int,
        tier: int,
        limit: int,
        taken: set[int],
        ranked: list[Ranked],
    ) -> None:
        directories = self._directories
        position = text.find(pattern)
        while position >= 0:
            row = bisect_right(starts, position + offset) - 1
            if row not in taken:
                taken.add(row)
                ranked.append((tier + (DIRECTORY_BONUS if row < directories else 0), row))
                if len(ranked) >= limit:
                    return
            # A pattern never spans a separator, so the next hit is in a later row.
            position = text.find(pattern, starts[row + 1] - offset)

    def _subsequence_tier(
        self, needle: str, wanted: int, taken: set[int], abort: threading.Event | None
    ) -> list[Ranked]:
        # "300 + max(0, 100 − gap) + B" with gap = (index of last matched char + 1) − len(q):
        # rank by the deficit from the best subsequence score, then by pool order, both packed
        # into one integer per row. The rows of the tiers above are subsequence matches too:
        # fetch enough to drop them.
        scale = len(self._paths) + 1
        count = wanted + len(taken)
        rows, ends = self._subsequence(needle, abort)
        check_abort(abort)
        split = bisect_right(rows, self._directories - 1)
        keys = []
        for part, penalty in ((slice(0, split), 0), (slice(split, None), DIRECTORY_BONUS)):
            gaps = map(sub, ends[part], repeat(len(needle) - penalty))
            deficits = map(min, gaps, repeat(GAP_ALLOWANCE + penalty))
            keys.append(map(add, map(mul, deficits, repeat(scale)), rows[part]))
        # C-level iterators feed the heap: no Python frame per row.
        best = heapq.nsmallest(count, chain.from_iterable(keys))
        picked = [(_BEST_SUBSEQUENCE - key // scale, key % scale) for key in best]
        return [item for item in picked if item[1] not in taken][:wanted]

    def _subsequence(
        self, needle: str, abort: threading.Event | None
    ) -> tuple[list[int], list[int]]:
        """Every row whose lowered path has ``needle`` as a subsequence, with its greedy end
        (just past the last matched unit).

        "scan P left to right, taking for each character of q its first occurrence at or after
        the position just past the previous match (greedy leftmost)" (spec §3.1): one regular
        expression match per row. The rows matching a prefix of the needle are the only
        candidates, so a cached prefix's matches (the previous keystroke while typing) are
        narrowed further, each continuing where its prefix match ended (with one ``str.find``
        per row when the needle adds a single unit).
        """
        with self._lock:
            done = ""
            for cached in self._chains:
                if needle.startswith(cached) and len(cached) > len(done):
                    done = cached
            if done:
                self._chains.move_to_end(done)
                rows, texts, ends = self._chains[done]
        if not done:
            rows = list(range(len(self._paths)))
            texts = self._paths_lowered()[2]
            ends = []
        if len(needle) > len(done):
            check_abort(abort)
            # One C-level regex match per row for all the new characters, from where the
            # prefix's match ended (see compile_needle).
            match = compile_needle(needle[len(done) :])
            unit = needle[len(done) :] if done and len(needle) == len(done) + 1 else ""
            kept_rows: list[int] = []
            kept_texts: list[str] = []
            kept_ends: list[int] = []
            # In blocks: each block is one C-level loop that holds the GIL, so blocks keep the
            # event loop responsive and let a superseded ranking stop promptly; and a block's
            # match objects die young (they are garbage-collected objects: tens of thousands
            # alive at once would be promoted and make the collector scan the whole heap).
            for start in range(0, len(texts), _BLOCK):
                check_abort(abort)
                stop = start + _BLOCK
                block = texts[start:stop]
                if unit:
                    # One new unit (typing): ``str.find`` is the greedy step and makes no match
                    # object per row.
                    positions = list(map(str.find, block, repeat(unit), ends[start:stop]))
                    keep = list(map(_found, positions))
                    kept_rows += compress(rows[start:stop], keep)
                    kept_texts += compress(block, keep)
                    kept_ends += map(_plus_one, compress(positions, keep))
                    continue
                found = list(map(match, block, ends[start:stop]) if done else map(match, block))
                # A match object is true and a miss is None: ``compress`` keeps the matches.
                kept_rows += compress(rows[start:stop] if done else range(start, stop), found)
                kept_texts += compress(block, found)
                kept_ends += map(_end, filter(None, found))
                del found
            rows, texts, ends = kept_rows, kept_texts, kept_ends
        if len(needle) > len(done):
            with self._lock:
                self._chains[needle] = (rows, texts, ends)
                if len(self._chains) > _CHAINS:
                    self._chains.popitem(last=False)
        return rows, ends

    def _first_by_path(self, limit: int) -> list[int]:
        paths = self._paths
        key = paths.__getitem__ if self._bmp else (lambda row: utf16_units(paths[row]))
        directories = self._directories
        chosen = heapq.nsmallest(limit, range(directories), key=key)
        if len(chosen) < limit:
            chosen += heapq.nsmallest(limit - len(chosen), range(directories, len(paths)), key=key)
        return chosen
