"""A precomputed candidate index for keystroke-rate discovery over many sessions.

:func:`~actors._session_ref_candidates.list_candidates` sorts and scans every summary per
call, which is fine for hundreds of sessions but not for 100 000 at keystroke rate. This
index is built once from the summaries (rebuild it when they change) and answers the
same query with the same result (tests check equivalence) by scanning only as far as
needed:

- rows are kept in listing order, in lower-cased UTF-8 haystacks per rank group (same cwd,
  no cwd, all) and field (id, label, display title), so a filter is a C-speed
  ``bytes.find`` walk, not a Python loop; a field whose bytes lack one of the needle's
  bytes (typically hex ids against a word) is not scanned at all;
- a cwd is matched once per distinct cwd, then all its rows follow in listing order;
- the walk stops as soon as ``limit`` candidates are found, so empty and short queries
  touch about ``limit`` rows.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate
from typing import Any, Final

from actors._session_ref_candidates import (
    Candidate,
    SessionSummary,
    list_candidates,
    listing_order,
    resolve_limit,
    to_mention_candidates,
)
from actors._session_ref_config import SessionReferenceConfig
from actors._session_ref_inputs import AgentView

__all__ = ["CandidateIndex"]

# Separates fields and rows in a haystack; a needle containing it takes the slow path.
_SEP: Final = "\x00"


def _utf8(text: str) -> bytes:
    # Substring search on UTF-8 equals search on code points (UTF-8 is self-synchronizing),
    # and keeps ASCII rows one byte per character even beside non-Latin titles.
    return text.encode("utf-8", "surrogatepass")


class _Field:
    """One field of a group of rows as one searchable byte string, in listing order."""

    __slots__ = ("_alphabet", "_rows", "_starts", "_text")

    def __init__(self, rows: Sequence[int], keys: Sequence[bytes]) -> None:
        self._rows = rows
        self._starts = list(accumulate((len(key) + 1 for key in keys), initial=0))[:-1]
        self._text = b"\x00".join(keys)
        # Bytes that occur at all: ids usually use a tiny alphabet (hex and `-`), so most
        # needles skip the id field without scanning it.
        self._alphabet = frozenset(self._text)

    def matches(self, needle: bytes) -> Iterator[int]:
        """Yield rows whose key contains the non-empty ``needle``, in order."""
        alphabet = self._alphabet
        if any(byte not in alphabet for byte in needle):
            return
        text, starts, rows = self._text, self._starts, self._rows
        position = 0
        while True:
            hit = text.find(needle, position)
            if hit < 0:
                return
            slot = bisect_right(starts, hit) - 1
            yield rows[slot]
            if slot + 1 >= len(starts):
                return
            position = starts[slot + 1]


class _Group:
    """Rows of one rank group, searchable by id, label and display title."""

    __slots__ = ("_fields", "rows")

    def __init__(self, rows: Sequence[int], keys: Sequence[tuple[bytes, bytes, bytes]]) -> None:
        self.rows = list(rows)
        self._fields = [
            _Field(self.rows, [keys[row][field] for row in self.rows]) for field in range(3)
        ]

    def matches(self, needle: bytes) -> Iterator[int]:
        """Yield rows with any field containing ``needle`` (all rows for ``b""``), in order."""
        if not needle:
            return iter(self.rows)
        return _dedupe(heapq.merge(*(field.matches(needle) for field in self._fields)))


def _keys(summary: SessionSummary) -> tuple[bytes, bytes, bytes]:
    """Searchable id, label and display title (empty when equal to the label).

    The cwd is matched per distinct cwd instead (it repeats across many rows). Each field
    is lower-cased on its own, exactly like the reference filter.
    """
    label = summary.session_id if summary.label is None else summary.label
    display = label if summary.display_title is None else summary.display_title
    return (
        _utf8(summary.session_id.lower()),
        _utf8(label.lower()),
        b"" if display == label else _utf8(display.lower()),
    )


def _dedupe(rows: Iterator[int]) -> Iterator[int]:
    last = -1
    for row in rows:
        if row != last:
            yield row
            last = row


class CandidateIndex:
    """Immutable ranked search structure over session summaries."""

    def __init__(self, summaries: Iterable[SessionSummary]) -> None:
        self._summaries = tuple(listing_order(summaries))
        keys = [_keys(summary) for summary in self._summaries]
        by_cwd: dict[str, list[int]] = {}
        no_cwd: list[int] = []
        for row, summary in enumerate(self._summaries):
            if summary.cwd is None:
                no_cwd.append(row)
            else:
                by_cwd.setdefault(summary.cwd, []).append(row)
        self._all = _Group(range(len(keys)), keys)
        self._no_cwd = _Group(no_cwd, keys)
        self._by_cwd = {cwd: _Group(rows, keys) for cwd, rows in by_cwd.items()}
        self._cwd_lower = [(cwd, cwd.lower()) for cwd in by_cwd]

    def __len__(self) -> int:
        return len(self._summaries)

    @property
    def summaries(self) -> tuple[SessionSummary, ...]:
        """The summaries in listing order (newest first)."""
        return self._summaries

    def _ranked_rows(self, target: str | None, needle: str) -> Iterator[int]:
        """Matching rows in (rank, listing order): same cwd, no cwd, then the rest."""
        needle_bytes = _utf8(needle)
        same = self._by_cwd.get(target) if target is not None else None
        if same is not None:
            if target is not None and needle in target.lower():
                yield from same.rows
            else:
                yield from same.matches(needle_bytes)
        yield from self._no_cwd.matches(needle_bytes)
        summaries = self._summaries
        by_key = (
            row
            for row in self._all.matches(needle_bytes)
            if (cwd := summaries[row].cwd) is not None and cwd != target
        )
        if not needle:
            yield from by_key
            return
        # Rows of other workspaces whose cwd matches, merged in listing order.
        by_cwd = [
            self._by_cwd[cwd].rows
            for cwd, lowered in self._cwd_lower
            if cwd != target and needle in lowered
        ]
        yield from _dedupe(heapq.merge(by_key, *by_cwd))

    def candidates(
        self,
        agent: AgentView,
        query: str = "",
        limit: int | None = None,
        *,
        config: SessionReferenceConfig,
    ) -> list[Candidate]:
        """Same contract and result as ``list_candidates(agent, summaries, query, limit)``.

        Raises:
            SessionReferenceError: INVALID_REFERENCE for a bad ``limit``.
            TypeError: ``query`` is not a string.
        """
        checked_limit = resolve_limit(limit, config)
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, not {type(query).__name__}")
        needle = query.lower()
        if _SEP in needle:
            return list_candidates(
                agent, self._summaries, query, checked_limit, config=config, presorted=True
            )
        target = agent.cwd
        found: list[Candidate] = []
        for row in self._ranked_rows(target, needle):
            summary = self._summaries[row]
            if summary.session_id == agent.session_id:
                continue
            found.append(Candidate.from_summary(summary, target))
            if len(found) == checked_limit:
                break
        return found

    def remote_candidates(
        self, agent: AgentView, query: str = "", *, config: SessionReferenceConfig
    ) -> list[dict[str, Any]]:
        """The remote ``candidates`` result (configured limit, with mentions)."""
        return to_mention_candidates(self.candidates(agent, query, None, config=config))
