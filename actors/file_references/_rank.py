"""Upstream's score tiers, tie-breaks and result cap (spec §3), at keystroke rate.

Upstream measures lengths, gaps and the final path comparison in UTF-16 code units (spec §3.1,
§9.10). Python strings count code points, so every string that takes part in scoring is kept in a
"code-unit view": astral characters are spelled as their two surrogates. For BMP-only text (the
overwhelming case, checked once per path) the view is the string itself.

This module holds the rules (:func:`score`, :func:`sort_paths`); ``_pool``
applies them to many candidates at keystroke rate.
"""

from __future__ import annotations

import bisect
import functools
import re
import threading
from collections.abc import Callable, Iterable
from typing import Final

from actors.file_references._query import CandidateKind

__all__ = [
    "DIRECTORY_BONUS",
    "GAP_ALLOWANCE",
    "TIER_BASENAME",
    "TIER_EXACT",
    "TIER_PATH",
    "TIER_PREFIX",
    "TIER_SUBSEQUENCE",
    "RankAbortedError",
    "all_bmp",
    "check_abort",
    "compile_needle",
    "prepare_needle",
    "score",
    "sort_paths",
    "utf16_units",
]

DIRECTORY_BONUS: Final = 25
"""Added to every tier for directories, so they win ties but never jump a tier (§3.1)."""

TIER_EXACT: Final = 1000
TIER_PREFIX: Final = 900
TIER_BASENAME: Final = 700
TIER_PATH: Final = 500
TIER_SUBSEQUENCE: Final = 300
GAP_ALLOWANCE: Final = 100

_ASTRAL: Final = re.compile("[\U00010000-\U0010ffff]")


def utf16_units(text: str) -> str:
    """Return the UTF-16 code-unit view of ``text`` (astral characters as surrogate pairs).

    Comparing, measuring and searching the views gives exactly JavaScript's results.
    """
    if text.isascii() or _ASTRAL.search(text) is None:
        return text
    return _ASTRAL.sub(_surrogates, text)


def _surrogates(found: re.Match[str]) -> str:
    point = ord(found.group()) - 0x10000
    return chr(0xD800 + (point >> 10)) + chr(0xDC00 + (point & 0x3FF))


def prepare_needle(text: str) -> str:
    """Lower-case a needle and take its code-unit view, as candidates are prepared."""
    return utf16_units(text.lower())


def all_bmp(texts: Iterable[str]) -> bool:
    """Whether no text has an astral character (then code points order like code units)."""
    texts = list(texts)
    if all(map(str.isascii, texts)):
        return True
    return all(text.isascii() or _ASTRAL.search(text) is None for text in texts)


def _units_with_length(path: str) -> tuple[int, str]:
    units = utf16_units(path)
    return (len(units), units)


def sort_paths(paths: list[str], *, with_length: bool, bmp: bool | None = None) -> None:
    """Sort paths in place by the tie-breaks after score and kind (spec §3.2).

    "only when the needle is non-empty: shorter path first (UTF-16 length of the returned
    path); path ascending by plain code-unit comparison (no locale, no case folding — Z sorts
    before a)". Without astral characters this is two C-level sorts, no key per path.

    Args:
        paths: one kind's paths.
        with_length: whether the length tie-break applies (the needle is non-empty).
        bmp: whether all paths are known to be free of astral characters; checked if ``None``.
    """
    if bmp is None:
        bmp = all_bmp(paths)
    if not bmp:
        paths.sort(key=_units_with_length if with_length else utf16_units)
    elif not with_length:
        paths.sort()
    else:
        # Shorter first, then code units: sort by length, then each run of one length alone
        # (fewer, shorter comparisons than sorting everything by path first).
        paths.sort(key=len)
        start = 0
        while start < len(paths):
            end = bisect.bisect_right(paths, len(paths[start]), lo=start, key=len)
            if end - start > 1:
                paths[start:end] = sorted(paths[start:end])
            start = end


@functools.lru_cache(maxsize=256)
def compile_needle(needle: str) -> Callable[..., re.Match[str] | None]:
    """Return a matcher for "``q`` is a subsequence of lower-cased ``P``", greedy leftmost.

    ``[^c]*+c`` per needle unit is the greedy leftmost scan as a regular expression: each unit
    takes its first occurrence after the previous match, and the possessive quantifiers make a
    miss fail in linear time. The match ends just past the last matched unit, so
    ``gap = match.end() - len(q)`` (spec §3.1). The matcher takes the position to start at,
    so a match can continue where a shorter needle's match ended.
    """
    pattern = "".join(f"[^{re.escape(unit)}]*+{re.escape(unit)}" for unit in needle)
    return re.compile(pattern).match


def score(path: str, kind: CandidateKind, query: str) -> int | None:
    """Score one candidate against a raw query (spec §3.1); ``None`` means "dropped".

    The reference definition, one candidate at a time; ``_pool`` computes the
    same scores for a whole pool at once (and the tests compare the two).
    """
    needle = prepare_needle(query)
    lowered = prepare_needle(path)
    basename = lowered[lowered.rfind("/") + 1 :]
    bonus = DIRECTORY_BONUS if kind == "directory" else 0
    if not needle:
        return 0
    # "The first rule that applies wins" (spec §3.1).
    if basename == needle:
        return TIER_EXACT + bonus
    if basename.startswith(needle):
        return TIER_PREFIX + bonus
    if needle in basename:
        return TIER_BASENAME + bonus
    if needle in lowered:
        return TIER_PATH + bonus
    found = compile_needle(needle)(lowered)
    if found is None:
        return None
    return TIER_SUBSEQUENCE + max(0, GAP_ALLOWANCE - (found.end() - len(needle))) + bonus


class RankAbortedError(Exception):
    """The caller that wanted this ranking was cancelled or superseded."""


def check_abort(abort: threading.Event | None) -> None:
    """Stop a ranking whose caller is gone.

    Raises:
        RankAbortedError: ``abort`` was set.
    """
    if abort is not None and abort.is_set():
        raise RankAbortedError("ranking abandoned: the caller was cancelled")
