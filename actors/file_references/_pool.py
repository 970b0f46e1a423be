"""A pool of candidates prepared once and ranked at keystroke rate (spec §3, §5 "levers").

Upstream scores every candidate and sorts every match on each keystroke. The order, though, is a
pure function of (score, kind, length, path), and the kind/length/path part does not depend on
the needle. So a pool is sorted once in that order ("pool order": directories first, then by
code-unit length, then by code units) and its lower-cased basenames are joined into one string
in pool order. Then, per needle:

- the three basename tiers ("``N`` equals / starts with / contains ``q``") are found with
  ``str.find`` on the joined string; hits come in pool order, which is the order within a tier,
  so each tier's scan stops as soon as the results are full — and a lower tier is only scanned
  when the higher ones left room;
- the path tier ("``P`` contains ``q``") and the subsequence tier (reached only when fewer than
  ``maxResults`` candidates contain the needle) work per parent directory
  (``_groups``): a directory's path is scanned once for all its children.

The output equals upstream's full sort (the tests compare them on random pools and trees).
"""

from __future__ import annotations

import heapq
import threading
from bisect import bisect_right
from collections import Counter, OrderedDict
from itertools import accumulate, repeat
from operator import itemgetter
from typing import Final

from actors.file_references._groups import SEPARATOR, ParentGroups, lower_units
from actors.file_references._query import FileReferenceCandidate
from actors.file_references._rank import (
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

_BEST_SUBSEQUENCE: Final = TIER_SUBSEQUENCE + GAP_ALLOWANCE + DIRECTORY_BONUS
_MEMO: Final = 128  # finished results kept per pool
_BLOCK: Final = 4096  # rows matched per C-level call in the subsequence tier
_plus_one = (1).__add__
_third = itemgetter(2)


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
        basenames = lower_units(map(_third, map(str.rpartition, paths, repeat("/"))), bmp)
        self._base_text = f"{SEPARATOR}{SEPARATOR.join(basenames)}{SEPARATOR}"
        self._base_starts = _starts(basenames)
        self._basenames = basenames
        self._lock = threading.Lock()
        self._groups_lock = threading.Lock()
        # Lower-cased basename -> its rows in pool order (the exact tier), built by prepare().
        self._exact: tuple[dict[str, int], set[str]] | None = None
        # The grouping by parent directory serves the path and subsequence tiers only: it is
        # built on first need (or by :meth:`prepare`), so it does not delay the first query.
        self._groups: ParentGroups | None = None
        # The lowered paths, only for needles with "/" (never global ones).
        self._path_index: tuple[str, list[int], list[str]] | None = None
        self._memo: OrderedDict[tuple[str, int], list[Ranked]] = OrderedDict()

    def prepare(self, abort: threading.Event | None = None) -> None:
        """Build what the exact, path and subsequence tiers need now rather than on first need
        (the exact tier scans until then).

        Raises:
            RankAbortedError: ``abort`` was set.
        """
        if self._exact is None:
            names = self._basenames
            # Each name's first row in pool order, and the names several rows share.
            firsts = dict(zip(reversed(names), range(len(names) - 1, -1, -1), strict=True))
            shared = {name for name, rows in Counter(names).items() if rows > 1}
            self._exact = (firsts, shared)
        check_abort(abort)
        self._parent_groups().prepare(abort)

    def _parent_groups(self) -> ParentGroups:
        # Its own lock: a preparation in a worker thread must not hold up the memo lookups of
        # keystrokes that only need the basename tiers.
        with self._groups_lock:
            if self._groups is None:
                self._groups = ParentGroups(
                    self._paths, self._basenames, self._directories, bmp=self._bmp
                )
            return self._groups

    def _paths_lowered(self) -> tuple[str, list[int], list[str]]:
        """The joined lowered paths, their offsets and the lowered paths (built once)."""
        with self._lock:
            if self._path_index is None:
                parts = lower_units(self._paths, self._bmp)
                text = f"{SEPARATOR}{SEPARATOR.join(parts)}{SEPARATOR}"
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

    def candidate(self, row: int) -> FileReferenceCandidate:
        """The candidate record of a row."""
        return FileReferenceCandidate(
            self._paths[row], "directory" if row < self._directories else "file"
        )

    def order_key(self, ranked: Ranked) -> tuple[int, bool, int, str]:
        """Upstream's full sort key of a ranked row, to merge the results of several pools."""
        value, row = ranked
        path = self._paths[row]
        units = path if self._bmp else utf16_units(path)
        return (-value, row >= self._directories, len(units), units)

    def cached(self, needle: str, limit: int) -> list[Ranked] | None:
        """The result of an earlier :meth:`rank` of the same needle and limit, or ``None``."""
        if not needle:
            return None  # not kept: ranked by path on each call
        if SEPARATOR in needle:
            return []
        with self._lock:
            memo = self._memo.get((needle, limit))
            if memo is None:
                return None
            self._memo.move_to_end((needle, limit))
            return list(memo)

    def rank(self, needle: str, limit: int, abort: threading.Event | None = None) -> list[Ranked]:
        """Score, order and truncate the pool exactly like upstream (spec §3.1, §3.2).

        Args:
            needle: from :func:`~actors.file_references._rank.prepare_needle`.
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
        if SEPARATOR in needle:
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
            (f"{SEPARATOR}{needle}{SEPARATOR}", 1, TIER_EXACT),
            (f"{SEPARATOR}{needle}", 1, TIER_PREFIX),
            (needle, 0, TIER_BASENAME),
        )
        exact = self._exact
        for pattern, offset, tier in tiers:
            check_abort(abort)
            if tier == TIER_EXACT and exact is not None:
                # "N equals q": a lookup; a name several rows share is scanned for from its
                # first row on.
                firsts, shared = exact
                first = firsts.get(needle)
                if first is not None and needle not in shared:
                    taken.add(first)
                    bonus = DIRECTORY_BONUS if first < self._directories else 0
                    ranked.append((tier + bonus, first))
                elif first is not None:
                    start = base_starts[first] - offset
                    self._scan(
                        base, base_starts, pattern, offset, tier, limit, taken, ranked, start
                    )
            else:
                self._scan(base, base_starts, pattern, offset, tier, limit, taken, ranked)
            if len(ranked) >= limit:
                break
        else:
            check_abort(abort)
            self._path_tier(needle, limit, taken, ranked)
        if len(ranked) < limit and len(needle) > 1:
            # One character: a subsequence is a substring, done above.
            check_abort(abort)
            ranked.extend(self._subsequence_tier(needle, limit - len(ranked), taken, abort))
        else:
            self._follow(needle, abort)
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
        start: int = 0,
    ) -> None:
        directories = self._directories
        position = text.find(pattern, start)
        while position >= 0:
            row = bisect_right(starts, position + offset) - 1
            if row not in taken:
                taken.add(row)
                ranked.append((tier + (DIRECTORY_BONUS if row < directories else 0), row))
                if len(ranked) >= limit:
                    return
            # A pattern never spans a separator, so the next hit is in a later row.
            position = text.find(pattern, starts[row + 1] - offset)

    def _follow(self, needle: str, abort: threading.Event | None) -> None:
        # Typing forward is the common case: keep the subsequence tier's scan state one unit
        # behind the keystrokes (one cheap step each), so that the keystroke that first needs
        # the tier continues from the previous one instead of scanning from the start.
        groups = self._groups
        bits = groups.bit_matcher_if_built() if groups is not None else None
        if bits is not None and "/" not in needle:
            bits.follow(needle, abort)

    def _path_tier(self, needle: str, limit: int, taken: set[int], ranked: list[Ranked]) -> None:
        # "lower-cased P contains q", in pool order after the basename tiers' rows.
        if "/" in needle:
            text, starts, _ = self._paths_lowered()
            self._scan(text, starts, needle, 0, TIER_PATH, limit, taken, ranked)
            return
        directories = self._directories
        for row in self._parent_groups().containing(needle, limit - len(ranked) + len(taken)):
            if row not in taken:
                taken.add(row)
                ranked.append((TIER_PATH + (DIRECTORY_BONUS if row < directories else 0), row))
                if len(ranked) >= limit:
                    return

    def _subsequence_tier(
        self, needle: str, wanted: int, taken: set[int], abort: threading.Event | None
    ) -> list[Ranked]:
        if "/" not in needle:
            return self._parent_groups().subsequence(needle, wanted, taken, abort)
        # A needle with "/" (only a tool's direct call: queries with a slash are directory
        # mode, whose fragment has none) is matched against each lowered path.
        # "300 + max(0, 100 − gap) + B" with gap = (index of last matched char + 1) − len(q):
        # rank by the deficit from the best subsequence score, then by pool order, both packed
        # into one integer per row.
        scale = len(self._paths) + 1
        texts = self._paths_lowered()[2]
        match = compile_needle(needle)
        keys: list[int] = []
        for start in range(0, len(texts), _BLOCK):
            check_abort(abort)
            found = map(match, texts[start : start + _BLOCK])
            for row, hit in enumerate(found, start):
                if hit is not None:
                    penalty = 0 if row < self._directories else DIRECTORY_BONUS
                    gap = hit.end() - len(needle) + penalty
                    keys.append(min(gap, GAP_ALLOWANCE + penalty) * scale + row)
        best = heapq.nsmallest(wanted + len(taken), keys)
        picked = [(_BEST_SUBSEQUENCE - key // scale, key % scale) for key in best]
        return [item for item in picked if item[1] not in taken][:wanted]

    def _first_by_path(self, limit: int) -> list[int]:
        paths = self._paths
        key = paths.__getitem__ if self._bmp else (lambda row: utf16_units(paths[row]))
        directories = self._directories
        chosen = heapq.nsmallest(limit, range(directories), key=key)
        if len(chosen) < limit:
            chosen += heapq.nsmallest(limit - len(chosen), range(directories, len(paths)), key=key)
        return chosen
