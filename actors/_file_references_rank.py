"""Upstream's score tiers, tie-breaks and result cap (spec §3), at keystroke rate.

Upstream measures lengths, gaps and the final path comparison in UTF-16 code units (spec §3.1,
§9.10). Python strings count code points, so every string that takes part in scoring is kept in a
"code-unit view": astral characters are spelled as their two surrogates. For BMP-only text (the
overwhelming case, checked once per path) the view is the string itself.

Speed (spec §5 "levers"): a candidate is a plain tuple (:data:`Row`) prepared once; the tie-breaks
after the score — kind, length, path — do not depend on the needle, so a pool is sorted by them
once (:func:`sort_rows`) and ranking only buckets matches by score, keeping each bucket in pool
order. The output equals upstream's full sort.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Final, TypeAlias

from actors._file_references_query import CandidateKind, FileCandidate

__all__ = [
    "DIRECTORY_BONUS",
    "Row",
    "candidates",
    "compile_needle",
    "make_row",
    "prepare_needle",
    "rank",
    "score",
    "sort_names",
    "sort_rows",
    "utf16_units",
]

DIRECTORY_BONUS: Final = 25
"""Added to every tier for directories, so they win ties but never jump a tier (§3.1)."""

_TIER_EXACT: Final = 1000
_TIER_PREFIX: Final = 900
_TIER_BASENAME: Final = 700
_TIER_PATH: Final = 500
_TIER_SUBSEQUENCE: Final = 300
_GAP_ALLOWANCE: Final = 100

Row: TypeAlias = tuple[str, str, int, str]
"""``(basename, lowered, bonus, path)``: ``lowered`` is the code-unit view of the lower-cased
path ("Unicode full lower-casing, no smart-case"), ``basename`` its part after the last ``/``,
``bonus`` :data:`DIRECTORY_BONUS` for a directory else 0, ``path`` the path as returned."""


def utf16_units(text: str) -> str:
    """Return the UTF-16 code-unit view of ``text`` (astral characters as surrogate pairs).

    Comparing, measuring and searching the views gives exactly JavaScript's results.
    """
    if text.isascii() or max(text) < "\U00010000":
        return text
    units: list[str] = []
    for char in text:
        point = ord(char)
        if point < 0x10000:
            units.append(char)
        else:
            point -= 0x10000
            units.append(chr(0xD800 + (point >> 10)) + chr(0xDC00 + (point & 0x3FF)))
    return "".join(units)


def prepare_needle(text: str) -> str:
    """Lower-case a needle and take its code-unit view, as candidates are prepared."""
    return utf16_units(text.lower())


def make_row(path: str, is_directory: bool) -> Row:
    """Prepare one candidate path for ranking."""
    lowered = path.lower()
    if lowered == path:
        lowered = path  # share the string: an index holds tens of thousands of rows
    if not lowered.isascii():
        lowered = utf16_units(lowered)
    return (
        lowered[lowered.rfind("/") + 1 :],
        lowered,
        DIRECTORY_BONUS if is_directory else 0,
        path,
    )


def _order_with_length(row: Row) -> tuple[bool, int, str]:
    units = utf16_units(row[3])
    return (not row[2], len(units), units)


def _order(row: Row) -> tuple[bool, str]:
    return (not row[2], utf16_units(row[3]))


def _order_with_length_bmp(row: Row) -> tuple[bool, int, str]:
    return (not row[2], len(row[3]), row[3])


def _order_bmp(row: Row) -> tuple[bool, str]:
    return (not row[2], row[3])


def sort_rows(rows: list[Row], *, with_length: bool = True) -> None:
    """Sort rows in place by the tie-breaks that follow the score (spec §3.2).

    "directories before files; only when the needle is non-empty: shorter path first (UTF-16
    length of the returned path); path ascending by plain code-unit comparison (no locale, no
    case folding — Z sorts before a)".

    Args:
        rows: the pool.
        with_length: whether the length tie-break applies (the needle is non-empty).
    """
    # Without astral characters code points order and measure like UTF-16 code units.
    if _all_bmp(row[3] for row in rows):
        rows.sort(key=_order_with_length_bmp if with_length else _order_bmp)
    else:
        rows.sort(key=_order_with_length if with_length else _order)


def _all_bmp(texts: Iterable[str]) -> bool:
    joined = "".join(texts)
    return joined.isascii() or not joined or max(joined) < "\U00010000"


def sort_names(items: list[tuple[str, bool, tuple[int, int] | None]]) -> None:
    """Sort directory entries ``(name, ...)`` by name in code-unit order (spec §4.2)."""
    if _all_bmp(item[0] for item in items):
        items.sort(key=_first)
    else:
        items.sort(key=_first_units)


def _first(item: tuple[str, bool, tuple[int, int] | None]) -> str:
    return item[0]


def _first_units(item: tuple[str, bool, tuple[int, int] | None]) -> str:
    return utf16_units(item[0])


def candidates(rows: Sequence[Row]) -> list[FileCandidate]:
    """Turn ranked rows into candidate records."""
    return [FileCandidate(row[3], "directory" if row[2] else "file") for row in rows]


def compile_needle(needle: str) -> Callable[[str], re.Match[str] | None]:
    """Return a matcher for "``q`` is a subsequence of lower-cased ``P``", greedy leftmost.

    ``[^c]*+c`` per needle unit is the greedy leftmost scan as a regular expression: each unit
    takes its first occurrence after the previous match, and the possessive quantifiers make a
    miss fail in linear time. The match ends just past the last matched unit, so
    ``gap = match.end() - len(q)`` (spec §3.1).
    """
    pattern = "".join(f"[^{re.escape(unit)}]*+{re.escape(unit)}" for unit in needle)
    return re.compile(pattern).match


def score(path: str, kind: CandidateKind, query: str) -> int | None:
    """Score one candidate against a raw query (spec §3.1); ``None`` means "dropped".

    A convenience for tests and tools; :func:`rank` inlines the same rules.
    """
    needle = prepare_needle(query)
    basename, lowered, bonus, _ = make_row(path, kind == "directory")
    if not needle:
        return 0
    # "The first rule that applies wins" (spec §3.1).
    if basename == needle:
        return _TIER_EXACT + bonus
    if basename.startswith(needle):
        return _TIER_PREFIX + bonus
    if needle in basename:
        return _TIER_BASENAME + bonus
    if needle in lowered:
        return _TIER_PATH + bonus
    found = compile_needle(needle)(lowered)
    if found is None:
        return None
    return _TIER_SUBSEQUENCE + max(0, _GAP_ALLOWANCE - (found.end() - len(needle))) + bonus


def rank(pool: Sequence[Row], needle: str, limit: int) -> tuple[list[Row], list[Row]]:
    """Score, order and truncate a pool exactly like upstream (spec §3.1, §3.2).

    Args:
        pool: candidates with unique paths, already in :func:`sort_rows` order (with the length
            tie-break iff ``needle`` is non-empty).
        needle: from :func:`prepare_needle`.
        limit: ``maxResults``.

    Returns:
        The best ``limit`` rows in upstream order, and every matching row in pool order, which
        is a valid pool for any needle that extends this one.
    """
    if not needle:
        # "Empty needle ...: every candidate scores 0 and none is dropped."
        return list(pool[:limit]), list(pool)
    size = len(needle)
    subsequence = compile_needle(needle) if size > 1 else None
    # Within one score the pool order is the tie-break order, so a bucket needs only its
    # first ``limit`` rows, appended in pool order.
    buckets: dict[int, list[Row]] = {}
    matches: list[Row] = []
    for row in pool:
        basename, lowered, bonus, _ = row
        # The tiers of spec §3.1, tested in an order that needs fewest operations per row.
        if needle in basename:
            if basename.startswith(needle):
                value = (_TIER_EXACT if len(basename) == size else _TIER_PREFIX) + bonus
            else:
                value = _TIER_BASENAME + bonus
        elif needle in lowered:
            value = _TIER_PATH + bonus
        elif subsequence is None:
            continue  # one unit: a subsequence is a substring, already ruled out
        else:
            found = subsequence(lowered)
            if found is None:
                continue
            gap = found.end() - size
            value = _TIER_SUBSEQUENCE + (_GAP_ALLOWANCE - gap if gap < _GAP_ALLOWANCE else 0)
            value += bonus
        matches.append(row)
        bucket = buckets.get(value)
        if bucket is None:
            buckets[value] = [row]
        elif len(bucket) < limit:
            bucket.append(row)
    best: list[Row] = []
    for value in sorted(buckets, reverse=True):
        best.extend(buckets[value][: limit - len(best)])
        if len(best) >= limit:
            break
    return best, matches
