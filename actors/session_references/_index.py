"""An incremental candidate index for keystroke-rate discovery over many sessions.

:func:`~actors.session_references._candidates.list_candidates` sorts and scans every summary per
call, which is fine for hundreds of sessions but not for 100 000 at keystroke rate. This
index answers the same query with the same result (tests check equivalence) by scanning
only as far as needed, and follows listing changes without a rebuild:

- rows are kept in listing order per rank group (each cwd, no cwd, all), in blocks of at
  most ``2 * _BLOCK_ROWS`` rows; a changed, added or removed session rebuilds only the
  blocks it sits in (:meth:`CandidateIndex.apply`, fed by :meth:`CandidateIndex.diff`);
- a block keeps its rows' case-folded searchable fields (each lower-cased on its own, like
  the reference filter) as one UTF-8 byte string, fields and rows separated by ``\\x00``,
  so a filter is a C-speed ``bytes.find`` walk (about 1 ns a byte, a few milliseconds for
  the whole of 100 000 titles in the worst case) whose hits map to rows by ``bisect``; a
  second string without the ids serves needles that cannot be part of any id (ids are
  mostly hex: a needle with a space or a letter past ``f`` only scans the titles);
- a block is skipped when it lacks a byte of the needle, or (for a needle of four bytes or
  more that cannot be in an id) when a 4-byte gram of the needle is missing from a Bloom
  filter of its titles' grams: a needle with few matches then scans only the blocks that
  may hold them, not every title;
- a cwd is matched once per distinct cwd, then all its rows follow in listing order;
- ranking is by group (same cwd, no cwd, then the rest, each in listing order), so the walk
  stops as soon as ``limit`` candidates are found: empty and short queries touch about
  ``limit`` rows, and only a needle with fewer than ``limit`` matches scans everything.
"""

from __future__ import annotations

import heapq
import operator
import sys
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate
from typing import Final

import attrs

from actors.session_references._candidates import (
    Candidate,
    SessionSummary,
    list_candidates,
    listing_order,
    resolve_limit,
    to_mention_candidates,
)
from actors.session_references._config import SessionReferenceConfig
from actors.session_references._inputs import AgentView
from actors.session_references._wire_types import (
    SessionReferenceMentionCandidate,
)

__all__ = ["CandidateIndex", "IndexChanges"]

# Separates fields and rows in a block's text; a needle containing it takes the slow path
# (any other needle cannot match across it, so a hit lies inside one field).
_SEP: Final = "\x00"
#: Rows per block after a split (a block holds up to twice as many before it splits).
_BLOCK_ROWS: Final = 1024

#: Bloom filter of a block's title 4-grams: ``1 << _BLOOM_BITS`` bits (8 KiB).
_BLOOM_BITS: Final = 16
_BLOOM_SHIFT: Final = 32 - _BLOOM_BITS
#: Blocks of fewer rows have no Bloom filter.
_BLOOM_ROWS: Final = 512
#: At most this many 4-grams of a long needle are checked per block.
_MAX_GRAMS: Final = 4

_Key = tuple[int, str]


def _utf8(text: str) -> bytes:
    # Substring search on UTF-8 equals search on code points (UTF-8 is self-synchronizing),
    # and keeps ASCII rows one byte per character even beside non-Latin titles.
    return text.encode("utf-8", "surrogatepass")


@attrs.frozen(eq=False)
class _Row:
    """One listed session with its sort key and lower-cased searchable text."""

    summary: SessionSummary
    #: Listing order: ``createdAt`` descending, then id ascending.
    key: _Key
    #: Lower-cased UTF-8 id.
    id_text: bytes
    #: Lower-cased UTF-8 label and display title (left out when equal to the label).
    title_text: bytes

    @classmethod
    def of(cls, summary: SessionSummary) -> _Row:
        # Each field is lower-cased on its own, exactly like the reference filter (final
        # sigma depends on its neighbours); the cwd is matched per distinct cwd instead.
        session_id = summary.session_id
        label = session_id if summary.label is None else summary.label
        display = label if summary.display_title is None else summary.display_title
        title = _utf8(label.lower())
        if display != label:
            title += b"\x00" + _utf8(display.lower())
        return cls(
            summary=summary,
            key=(-summary.created_at, session_id),
            id_text=_utf8(session_id.lower()),
            title_text=title,
        )


def _quads(text: bytes) -> set[int]:
    """Every 4-byte gram of ``text`` as a native-order integer, gathered at C speed through
    ``memoryview.cast`` at each of the four alignments."""
    found: set[int] = set()
    for offset in range(4):
        usable = (len(text) - offset) // 4 * 4
        if usable > 0:
            found.update(memoryview(text[offset : offset + usable]).cast("I"))
    return found


def _bit(gram: int) -> int:
    # Fibonacci hashing: the top bits of the product spread similar grams apart.
    return (gram * 0x9E3779B1 & 0xFFFFFFFF) >> _BLOOM_SHIFT


def _bloom(text: bytes) -> bytes:
    bits = bytearray(1 << (_BLOOM_BITS - 3))
    for gram in _quads(text):
        bit = _bit(gram)
        bits[bit >> 3] |= 1 << (bit & 7)
    return bytes(bits)


def _needle_bits(needle: bytes) -> list[int]:
    """Bloom bits of up to ``_MAX_GRAMS`` 4-grams of ``needle``, spread from start to end."""
    last = len(needle) - 4
    if last < 0:
        return []
    steps = min(_MAX_GRAMS, last + 1)
    starts = sorted({last * k // max(1, steps - 1) for k in range(steps)})
    return [_bit(int.from_bytes(needle[s : s + 4], sys.byteorder)) for s in starts]


def _starts(pieces: Sequence[bytes]) -> list[int]:
    """Offsets of ``pieces`` joined by one separator byte."""
    return list(accumulate((len(piece) + 1 for piece in pieces), initial=0))[:-1]


def _walk(text: bytes, starts: list[int], rows: list[_Row], needle: bytes) -> Iterator[_Row]:
    """Rows (in order) whose piece of ``text`` contains ``needle`` (no separator in it)."""
    find = text.find
    last = len(starts) - 1
    position = 0
    while True:
        hit = find(needle, position)
        if hit < 0:
            return
        slot = bisect_right(starts, hit) - 1
        yield rows[slot]
        if slot >= last:
            return
        position = starts[slot + 1]


class _Block:
    """Up to ``2 * _BLOCK_ROWS`` consecutive rows of one group and their search text."""

    __slots__ = ("_all", "_all_starts", "_alphabet", "_bloom", "_title_starts", "_titles", "rows")

    def __init__(self, rows: list[_Row]) -> None:
        self.rows = rows
        self.rebuild()

    def rebuild(self) -> None:
        """Recompute the search text after ``rows`` changed."""
        titles = [row.title_text for row in self.rows]
        both = [row.id_text + b"\x00" + row.title_text for row in self.rows]
        self._titles = b"\x00".join(titles)
        self._title_starts = _starts(titles)
        self._all = b"\x00".join(both)
        self._all_starts = _starts(both)
        self._alphabet = frozenset(self._all)
        # Small blocks (most cwd groups) are scanned faster than their filter is built.
        self._bloom = _bloom(self._titles) if len(self.rows) >= _BLOOM_ROWS else None

    def matches(self, needle: bytes, in_ids: bool, bits: Sequence[int]) -> Iterator[_Row]:
        """Rows containing the non-empty ``needle`` in any field, in order.

        Args:
            needle: Lower-cased UTF-8, without the separator.
            in_ids: Whether an id may contain ``needle`` (else only titles are searched).
            bits: :func:`_needle_bits` of ``needle`` (checked only when ``in_ids`` is false).
        """
        if not self._alphabet.issuperset(needle):
            return iter(())
        if in_ids:
            return _walk(self._all, self._all_starts, self.rows, needle)
        bloom = self._bloom
        if bloom is not None:
            for bit in bits:
                if not bloom[bit >> 3] & (1 << (bit & 7)):
                    return iter(())
        return _walk(self._titles, self._title_starts, self.rows, needle)


class _Group:
    """Rows of one rank group in listing order, split into blocks."""

    __slots__ = ("_blocks", "_firsts")

    def __init__(self, rows: Sequence[_Row]) -> None:
        self._blocks = [
            _Block(list(rows[start : start + _BLOCK_ROWS]))
            for start in range(0, len(rows), _BLOCK_ROWS)
        ]
        self._firsts = [block.rows[0].key for block in self._blocks]

    def __bool__(self) -> bool:
        return bool(self._blocks)

    def rows(self) -> Iterator[_Row]:
        """Every row, in order."""
        for block in self._blocks:
            yield from block.rows

    def matches(self, needle: bytes, in_ids: bool) -> Iterator[_Row]:
        """Rows with any field containing ``needle`` (all rows for ``b""``), in order."""
        if not needle:
            yield from self.rows()
            return
        bits = [] if in_ids else _needle_bits(needle)
        for block in self._blocks:
            yield from block.matches(needle, in_ids, bits)

    def _block_of(self, key: _Key) -> int:
        return max(0, bisect_right(self._firsts, key) - 1)

    def edit(self, removed: Iterable[_Row], added: Iterable[_Row]) -> None:
        """Remove then add rows, rebuilding (and splitting or dropping) touched blocks only."""
        touched: set[int] = set()
        for row in removed:
            number = self._block_of(row.key)
            rows = self._blocks[number].rows
            at = bisect_left([r.key for r in rows], row.key)
            if at < len(rows) and rows[at] is row:
                del rows[at]
                touched.add(number)
        for row in added:
            if not self._blocks:
                self._blocks.append(_Block([row]))
                self._firsts.append(row.key)
                continue
            number = self._block_of(row.key)
            insort(self._blocks[number].rows, row, key=_KEY)
            touched.add(number)
        blocks: list[_Block] = []
        for number, block in enumerate(self._blocks):
            if number not in touched:
                blocks.append(block)
            elif len(block.rows) > 2 * _BLOCK_ROWS:
                rows = block.rows
                blocks += [
                    _Block(rows[start : start + _BLOCK_ROWS])
                    for start in range(0, len(rows), _BLOCK_ROWS)
                ]
            elif block.rows:
                block.rebuild()
                blocks.append(block)
        self._blocks = blocks
        self._firsts = [block.rows[0].key for block in blocks]


_KEY: Final = operator.attrgetter("key")


def _dedupe(rows: Iterator[_Row]) -> Iterator[_Row]:
    last: _Row | None = None
    for row in rows:
        if row is not last:
            yield row
            last = row


@attrs.frozen(kw_only=True)
class IndexChanges:
    """What changed in a listing since an index was built (see :meth:`CandidateIndex.diff`)."""

    #: New sessions and sessions whose listed fields changed.
    upserted: tuple[SessionSummary, ...] = ()
    #: Ids of sessions no longer listed.
    removed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.upserted or self.removed)

    def __len__(self) -> int:
        return len(self.upserted) + len(self.removed)


class CandidateIndex:
    """Ranked search structure over session summaries, updated in place by :meth:`apply`.

    Queries and :meth:`apply` must not run at the same time (the resolver applies changes on
    its event loop, between queries); :meth:`diff` only reads and may run in a worker thread
    while queries go on. :meth:`diff` and :meth:`apply` key sessions by id, so they assume
    unique ids (the projection cache's primary key); queries accept duplicates.
    """

    def __init__(self, summaries: Iterable[SessionSummary]) -> None:
        rows = [_Row.of(summary) for summary in listing_order(summaries)]
        self._by_id = {row.summary.session_id: row for row in rows}
        self._all = _Group(rows)
        self._no_cwd = _Group([row for row in rows if row.summary.cwd is None])
        by_cwd: dict[str, list[_Row]] = {}
        for row in rows:
            if row.summary.cwd is not None:
                by_cwd.setdefault(row.summary.cwd, []).append(row)
        self._by_cwd = {cwd: _Group(group) for cwd, group in by_cwd.items()}
        self._cwd_lower = {cwd: cwd.lower() for cwd in by_cwd}
        # Bytes that occur in some id (only grows): a needle with any other byte cannot
        # match an id, so the id text is not searched.
        self._id_alphabet = set(b"".join(row.id_text for row in rows))
        self._summaries: tuple[SessionSummary, ...] | None = tuple(r.summary for r in rows)

    def __len__(self) -> int:
        return len(self._by_id)

    @property
    def summaries(self) -> tuple[SessionSummary, ...]:
        """The summaries in listing order (newest first)."""
        if self._summaries is None:
            self._summaries = tuple(row.summary for row in self._all.rows())
        return self._summaries

    def diff(self, summaries: Iterable[SessionSummary]) -> IndexChanges:
        """The changes that turn this index's listing into ``summaries`` (read-only)."""
        by_id = self._by_id
        upserted = []
        seen = set()
        for summary in summaries:
            seen.add(summary.session_id)
            row = by_id.get(summary.session_id)
            if row is None or row.summary != summary:
                upserted.append(summary)
        removed = [session_id for session_id in by_id if session_id not in seen]
        return IndexChanges(upserted=tuple(upserted), removed=tuple(removed))

    def apply(self, changes: IndexChanges) -> None:
        """Apply ``changes`` in place, rebuilding only the blocks they touch."""
        if not changes:
            return
        old: list[_Row] = []
        for session_id in changes.removed:
            row = self._by_id.pop(session_id, None)
            if row is not None:
                old.append(row)
        new: list[_Row] = []
        for summary in changes.upserted:
            previous = self._by_id.get(summary.session_id)
            if previous is not None:
                old.append(previous)
            row = self._by_id[summary.session_id] = _Row.of(summary)
            self._id_alphabet.update(row.id_text)
            new.append(row)
        self._all.edit(old, new)
        self._no_cwd.edit(
            [r for r in old if r.summary.cwd is None], [r for r in new if r.summary.cwd is None]
        )
        cwds = {r.summary.cwd for r in (*old, *new) if r.summary.cwd is not None}
        for cwd in cwds:
            group = self._by_cwd.get(cwd) or _Group([])
            group.edit(
                [r for r in old if r.summary.cwd == cwd], [r for r in new if r.summary.cwd == cwd]
            )
            if group:
                self._by_cwd[cwd] = group
                self._cwd_lower[cwd] = cwd.lower()
            else:
                self._by_cwd.pop(cwd, None)
                self._cwd_lower.pop(cwd, None)
        self._summaries = None

    def _ranked_rows(self, target: str | None, needle: str) -> Iterator[_Row]:
        """Matching rows in (rank, listing order): same cwd, no cwd, then the rest."""
        needle_bytes = _utf8(needle)
        in_ids = self._id_alphabet.issuperset(needle_bytes)
        same = self._by_cwd.get(target) if target is not None else None
        if same is not None:
            if target is not None and needle in target.lower():
                yield from same.rows()
            else:
                yield from same.matches(needle_bytes, in_ids)
        yield from self._no_cwd.matches(needle_bytes, in_ids)
        by_key = (
            row
            for row in self._all.matches(needle_bytes, in_ids)
            if (cwd := row.summary.cwd) is not None and cwd != target
        )
        if not needle:
            yield from by_key
            return
        # Rows of other workspaces whose cwd matches, merged in listing order.
        by_cwd = [
            self._by_cwd[cwd].rows()
            for cwd, lowered in self._cwd_lower.items()
            if cwd != target and needle in lowered
        ]
        if not by_cwd:
            yield from by_key
            return
        yield from _dedupe(heapq.merge(by_key, *by_cwd, key=_KEY))

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
                agent, self.summaries, query, checked_limit, config=config, presorted=True
            )
        target = agent.cwd
        found: list[Candidate] = []
        for row in self._ranked_rows(target, needle):
            summary = row.summary
            if summary.session_id == agent.session_id:
                continue
            found.append(Candidate.from_summary(summary, target))
            if len(found) == checked_limit:
                break
        return found

    def remote_candidates(
        self, agent: AgentView, query: str = "", *, config: SessionReferenceConfig
    ) -> list[SessionReferenceMentionCandidate]:
        """The remote ``candidates`` result (configured limit, with mentions)."""
        return to_mention_candidates(self.candidates(agent, query, None, config=config))
