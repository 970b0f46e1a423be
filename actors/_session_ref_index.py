"""An incremental candidate index for keystroke-rate discovery over many sessions.

:func:`~actors._session_ref_candidates.list_candidates` sorts and scans every summary per
call, which is fine for hundreds of sessions but not for 100 000 at keystroke rate. This
index answers the same query with the same result (tests check equivalence) by scanning
only as far as needed, and follows listing changes without a rebuild:

- rows are kept in listing order in blocks of at most ``2 * _BLOCK_ROWS`` rows, per rank
  group (each cwd, no cwd, all); a changed, added or removed session rebuilds only the
  blocks it sits in (:meth:`CandidateIndex.apply`, fed by :meth:`CandidateIndex.diff`);
- a block keeps its rows' lower-cased id, label and display title as one UTF-8 byte string,
  so a filter is a C-speed ``bytes.find`` walk, not a Python loop;
- a block is skipped without scanning when it cannot hold the needle: a byte of the needle
  it lacks, or (in the label and title text) a 2-byte gram of the needle it lacks, unless
  the needle could also be part of an id (whose bytes are not gram-indexed);
- a needle of three bytes or more is first looked up in trigram postings of the label and
  title text (row slots), so a needle with few matches spread over the whole listing costs
  its few candidates, not a scan of every row (``bytes.find`` runs at 1 to 3 ns a byte for
  such needles: 3 to 9 ms over 100 000 titles); dense needles walk the blocks instead and
  stop at ``limit``;
- a cwd is matched once per distinct cwd, then all its rows follow in listing order;
- the walk stops as soon as ``limit`` candidates are found, so empty and short queries
  touch about ``limit`` rows.
"""

from __future__ import annotations

import heapq
import operator
import sys
from array import array
from bisect import bisect_left, bisect_right, insort
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate
from typing import Any, Final

import attrs

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

__all__ = ["CandidateIndex", "IndexChanges"]

# Separates fields and rows in a block's text; a needle containing it takes the slow path.
_SEP: Final = "\x00"
#: Rows per block after a split (a block holds up to twice as many before it splits).
_BLOCK_ROWS: Final = 256
#: At most this many grams of a long needle are checked per block.
_MAX_GRAMS: Final = 4
#: Candidate rows from the trigram postings are narrowed (by intersecting the postings of
#: the needle's other trigrams, rarest first, each of at most ``_INTERSECT`` rows) until at
#: most ``_FEW`` remain.
_FEW: Final = 400
_INTERSECT: Final = 4000
#: When more candidates than this remain, the needle is common enough that walking the
#: blocks (which stops at ``limit``) beats checking every candidate.
_DENSE: Final = 3000

_Key = tuple[int, str]


def _utf8(text: str) -> bytes:
    # Substring search on UTF-8 equals search on code points (UTF-8 is self-synchronizing),
    # and keeps ASCII rows one byte per character even beside non-Latin titles.
    return text.encode("utf-8", "surrogatepass")


def _grams(text: bytes, width: int) -> set[int]:
    """Every ``width``-byte gram (2 or 4) of ``text`` as a native-order integer, gathered at C
    speed through ``memoryview.cast`` at each offset."""
    found: set[int] = set()
    for offset in range(width):
        usable = (len(text) - offset) // width * width
        if usable > 0:
            view = memoryview(text[offset : offset + usable])
            found.update(view.cast("H") if width == 2 else view.cast("I"))
    return found


def _trigrams(text: bytes) -> set[bytes]:
    return {text[start : start + 3] for start in range(len(text) - 2)}


def _needle_grams(needle: bytes, width: int) -> list[int]:
    """Up to ``_MAX_GRAMS`` grams of ``needle``, spread from its start to its end."""
    last = len(needle) - width
    steps = min(_MAX_GRAMS, last + 1)
    starts = sorted({last * k // max(1, steps - 1) for k in range(steps)})
    return [int.from_bytes(needle[s : s + width], sys.byteorder) for s in starts]


@attrs.frozen(eq=False)
class _Row:
    """One listed session with its sort key and lower-cased searchable text."""

    summary: SessionSummary
    #: Listing order: ``createdAt`` descending, then id ascending.
    key: _Key
    #: Lower-cased UTF-8 id.
    id_text: bytes
    #: Lower-cased UTF-8 label and display title (empty when equal to the label).
    title_text: bytes
    #: Stable position in the index's slot table (trigram postings refer to it).
    slot: int

    @classmethod
    def of(cls, summary: SessionSummary, slot: int) -> _Row:
        # Each field is lower-cased on its own, exactly like the reference filter; the cwd
        # is matched per distinct cwd instead (it repeats across many rows).
        label = summary.session_id if summary.label is None else summary.label
        display = label if summary.display_title is None else summary.display_title
        return cls(
            summary=summary,
            key=(-summary.created_at, summary.session_id),
            id_text=_utf8(summary.session_id.lower()),
            title_text=_utf8(label.lower())
            + (b"" if display == label else b"\x00" + _utf8(display.lower())),
            slot=slot,
        )


class _Block:
    """Up to ``2 * _BLOCK_ROWS`` consecutive rows of one group and their search text."""

    __slots__ = ("_alphabet", "_id_alphabet", "_pairs", "_starts", "_text", "rows")

    def __init__(self, rows: list[_Row]) -> None:
        self.rows = rows
        self.rebuild()

    def rebuild(self) -> None:
        """Recompute the search text after ``rows`` changed."""
        titles = b"\x00".join(row.title_text for row in self.rows)
        ids = b"\x00".join(row.id_text for row in self.rows)
        pieces = [row.id_text + b"\x00" + row.title_text for row in self.rows]
        self._starts = list(accumulate((len(piece) + 1 for piece in pieces), initial=0))[:-1]
        self._text = b"\x00".join(pieces)
        self._alphabet = frozenset(self._text)
        # Ids (typically hex and `-`) are not gram-indexed: their grams are nearly all
        # distinct, so they would cost far more memory than the titles'.
        self._id_alphabet = frozenset(ids)
        self._pairs = frozenset(_grams(titles, 2))

    def may_hold(self, needle: bytes, pairs: Sequence[int]) -> bool:
        """False when the block certainly has no row containing ``needle``."""
        alphabet = self._alphabet
        if any(byte not in alphabet for byte in needle):
            return False
        if not pairs:  # a one-byte needle
            return True
        id_alphabet = self._id_alphabet
        if all(byte in id_alphabet for byte in needle):
            return True  # may be inside an id, which grams do not cover
        return all(gram in self._pairs for gram in pairs)

    def matches(self, needle: bytes) -> Iterator[_Row]:
        """Yield rows containing the non-empty ``needle`` in any field, in order."""
        text, starts, rows = self._text, self._starts, self.rows
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

    def matches(self, needle: bytes) -> Iterator[_Row]:
        """Rows with any field containing ``needle`` (all rows for ``b""``), in order."""
        if not needle:
            yield from self.rows()
            return
        pairs = _needle_grams(needle, 2) if len(needle) >= 2 else []
        for block in self._blocks:
            if block.may_hold(needle, pairs):
                yield from block.matches(needle)

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
            insort(self._blocks[number].rows, row, key=lambda r: r.key)
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
        self._load(summaries)

    def _load(self, summaries: Iterable[SessionSummary]) -> None:
        rows = [_Row.of(summary, slot) for slot, summary in enumerate(listing_order(summaries))]
        self._by_id = {row.summary.session_id: row for row in rows}
        self._slots: list[_Row | None] = list(rows)
        #: ``title_text`` per slot (empty for a dead slot), for the trigram candidate check.
        self._titles = [row.title_text for row in rows]
        self._index_titles(rows)
        self._all = _Group(rows)
        self._no_cwd = _Group([row for row in rows if row.summary.cwd is None])
        by_cwd: dict[str, list[_Row]] = {}
        for row in rows:
            if row.summary.cwd is not None:
                by_cwd.setdefault(row.summary.cwd, []).append(row)
        self._by_cwd = {cwd: _Group(group) for cwd, group in by_cwd.items()}
        self._cwd_lower = {cwd: cwd.lower() for cwd in by_cwd}
        self._summaries: tuple[SessionSummary, ...] | None = tuple(r.summary for r in rows)

    def __len__(self) -> int:
        return len(self._by_id)

    def _index_titles(self, rows: Iterable[_Row]) -> None:
        """(Re)build the trigram postings and the id alphabet over ``rows``."""
        lists: defaultdict[bytes, list[int]] = defaultdict(list)
        id_alphabet: set[int] = set()
        for row in rows:
            slot = row.slot
            for gram in _trigrams(row.title_text):
                lists[gram].append(slot)
            id_alphabet.update(row.id_text)
        self._postings: dict[bytes, array[int]] = {
            gram: array("I", slots) for gram, slots in lists.items()
        }
        self._id_alphabet = id_alphabet
        self._dead = 0

    def _add_postings(self, row: _Row) -> None:
        postings = self._postings
        for gram in _trigrams(row.title_text):
            found = postings.get(gram)
            if found is None:
                found = postings[gram] = array("I")
            found.append(row.slot)
        self._id_alphabet.update(row.id_text)

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
            row = self._by_id[summary.session_id] = _Row.of(summary, len(self._slots))
            self._slots.append(row)
            self._titles.append(row.title_text)
            self._add_postings(row)
            new.append(row)
        for row in old:
            self._slots[row.slot] = None
            self._titles[row.slot] = b""
        self._dead += len(old)
        if self._dead > max(1024, len(self._by_id)):
            # Postings only grow; once most slots are dead, start over from the live rows.
            self._load([row.summary for row in self._by_id.values()])
            return
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

    def _title_hits(self, needle: bytes) -> list[_Row] | None:
        """Rows whose label or title contains ``needle`` (3 bytes or more), found through the
        trigram postings; ``None`` when too many rows qualify (walk the blocks instead)."""
        lists = []
        for gram in _trigrams(needle):
            found = self._postings.get(gram)
            if found is None:
                return []
            lists.append(found)
        lists.sort(key=len)
        candidates: array[int] | set[int] = lists[0]
        for more in lists[1:]:
            if len(candidates) <= _FEW or len(more) > _INTERSECT:
                break
            # A set intersection runs in C, about ten times faster than checking a row.
            candidates = set(candidates).intersection(more)
        if len(candidates) > _DENSE:
            return None
        titles, slots = self._titles, self._slots
        return [slots[slot] for slot in candidates if needle in titles[slot]]  # type: ignore[misc]

    def _ranked_hits(self, target: str | None, needle: str, hits: list[_Row]) -> Iterator[_Row]:
        """Like :meth:`_ranked_rows`, from the complete list of label and title matches."""

        def ordered(rows: Iterable[_Row]) -> list[_Row]:
            return sorted(rows, key=_KEY)

        same = self._by_cwd.get(target) if target is not None else None
        if same is not None:
            if target is not None and needle in target.lower():
                yield from same.rows()
            else:
                yield from ordered(row for row in hits if row.summary.cwd == target)
        yield from ordered(row for row in hits if row.summary.cwd is None)
        others = ordered(
            row for row in hits if (cwd := row.summary.cwd) is not None and cwd != target
        )
        by_cwd = [
            self._by_cwd[cwd].rows()
            for cwd, lowered in self._cwd_lower.items()
            if cwd != target and needle in lowered
        ]
        if not by_cwd:
            yield from others
            return
        yield from _dedupe(heapq.merge(others, *by_cwd, key=lambda row: row.key))

    def _ranked_rows(self, target: str | None, needle: str) -> Iterator[_Row]:
        """Matching rows in (rank, listing order): same cwd, no cwd, then the rest."""
        needle_bytes = _utf8(needle)
        if len(needle_bytes) >= 3 and not self._id_alphabet.issuperset(needle_bytes):
            # Not part of any id: only labels, titles and cwds can match.
            hits = self._title_hits(needle_bytes)
            if hits is not None:
                yield from self._ranked_hits(target, needle, hits)
                return
        same = self._by_cwd.get(target) if target is not None else None
        if same is not None:
            if target is not None and needle in target.lower():
                yield from same.rows()
            else:
                yield from same.matches(needle_bytes)
        yield from self._no_cwd.matches(needle_bytes)
        by_key = (
            row
            for row in self._all.matches(needle_bytes)
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
        yield from _dedupe(heapq.merge(by_key, *by_cwd, key=lambda row: row.key))

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
    ) -> list[dict[str, Any]]:
        """The remote ``candidates`` result (configured limit, with mentions)."""
        return to_mention_candidates(self.candidates(agent, query, None, config=config))
