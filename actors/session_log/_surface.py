"""The surface fold: the ordered, model-visible view of a session log.

`session-log-format` §6.6 (upstream `foldSurface` / `readSurface`). Folding every
event in seq order from an empty list: ``"append"`` pushes the event's seq;
``{"op": "replace", "start": s, "end": e}`` splices the inclusive surface range
``s..e`` out and puts the event's seq in its place. Only the three surface types may
carry (and must carry) `surfaceOp`. This module also validates provenance
(`sourceEventSeqs`) and tool-result rewrites, so the reader and the writer share one
rule set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from actors.session_log._events import SURFACE_EVENT_TYPES
from actors.session_log._header import SessionHeader
from actors.session_log._json import safe_int

__all__ = [
    "SurfaceError",
    "SurfaceFold",
    "SurfaceFolder",
    "SurfaceReplacement",
    "SurfaceSnapshot",
    "fold_surface",
]

_REPLACE_KEYS = frozenset({"op", "start", "end"})
_INT: frozenset[type] = frozenset({int})


class SurfaceError(ValueError):
    """An event breaks a surface rule; the message is upstream's detail text."""


@attrs.frozen
class SurfaceReplacement:
    """One replacement observed while folding."""

    seq: int
    """Seq of the replacing event."""
    start: int
    """Declared inclusive start seq of the replaced range."""
    end: int
    """Declared inclusive end seq of the replaced range."""
    shadowed_seqs: tuple[int, ...]
    """Surface entries actually removed, in surface order."""


@attrs.frozen
class SurfaceFold:
    """Result of folding a whole log."""

    nodes: tuple[int, ...]
    """Current surface seqs, in model-visible order."""
    replacements: tuple[SurfaceReplacement, ...]
    """Replacements in event order (non-empty means the session was compacted)."""


@attrs.frozen(kw_only=True)
class SurfaceSnapshot:
    """What upstream's `readSurface` returns (§6.6)."""

    session: SessionHeader
    """The header from the same observation."""
    captured_through_seq: int | None
    """Seq of the last event of the loaded log (any type), or None for an empty log."""
    events: tuple[Mapping[str, Any], ...]
    """Current surface events, in surface order."""


def _seq(value: object) -> int | None:
    number = safe_int(value)
    return number if number is not None and number >= 0 else None


def _content_blanked(data: Mapping[str, Any]) -> dict[str, Any]:
    # Everything but the tool-result block's `content` must stay equal.
    message = data.get("message")
    message = message if isinstance(message, dict) else {}
    content = message.get("content")
    first = content[0] if isinstance(content, list) and content else None
    block = {**first, "content": None} if isinstance(first, dict) else first
    return {**data, "message": {**message, "content": [block]}}


class SurfaceFolder:
    """Incremental surface fold with validation; used by the reader and the writer.

    `apply` validates an event completely before changing any state, so a rejected
    event leaves the folder as it was.
    """

    __slots__ = ("_count", "_nodes", "_replacements", "_tool_results")

    def __init__(self) -> None:
        self._nodes: list[int] = []
        self._count = 0
        self._replacements: list[SurfaceReplacement] = []
        # Current surface tool/result events by seq, for the rewrite rule.
        self._tool_results: dict[int, Mapping[str, Any]] = {}

    def copy(self) -> SurfaceFolder:
        """An independent copy (the fold's state is a few lists of seqs)."""
        clone = SurfaceFolder()
        clone._nodes = list(self._nodes)
        clone._count = self._count
        clone._replacements = list(self._replacements)
        clone._tool_results = dict(self._tool_results)
        return clone

    @property
    def nodes(self) -> tuple[int, ...]:
        """Current surface seqs."""
        return tuple(self._nodes)

    @property
    def next_seq(self) -> int:
        """The seq the next event must carry."""
        return self._count

    def result(self) -> SurfaceFold:
        """Return the fold so far."""
        return SurfaceFold(nodes=tuple(self._nodes), replacements=tuple(self._replacements))

    def skip(self, count: int) -> None:
        """Account for `count` non-surface events known to be valid (packed-row members)."""
        self._count += count

    def apply(self, event: Mapping[str, Any]) -> None:
        """Validate one event at its position and fold it in.

        Raises:
            SurfaceError: seq is not the next one, a non-surface event carries surface
                metadata, a surface event lacks or has a bad `surfaceOp`, provenance is
                invalid, or a replacement breaks its range or rewrite rules.
        """
        seq = event.get("seq")
        if safe_int(seq) != self._count:
            raise SurfaceError(f"session event seq {seq} is not contiguous; expected {self._count}")
        kind = event.get("type")
        if not isinstance(kind, str) or kind not in SURFACE_EVENT_TYPES:
            if "surfaceOp" in event:
                raise SurfaceError(
                    f'session event "{kind}" is not surface-eligible and cannot carry surfaceOp'
                )
            if "sourceEventSeqs" in event:
                raise SurfaceError(
                    f'session event "{kind}" is not surface-eligible and cannot carry '
                    "sourceEventSeqs"
                )
            self._count += 1
            return
        op = event.get("surfaceOp")
        if op is None and "surfaceOp" not in event:
            raise SurfaceError(
                f'session event "{kind}" is surface-eligible and requires a surfaceOp marker'
            )
        if op == "append":
            self._check_provenance(event, self._count, ())
            self._commit_append(event)
            return
        if not isinstance(op, dict):
            raise SurfaceError(f'session event "{kind}" carries an invalid surfaceOp')
        start, end = _seq(op.get("start")), _seq(op.get("end"))
        if op.keys() != _REPLACE_KEYS or op.get("op") != "replace" or start is None or end is None:
            raise SurfaceError(f'session event "{kind}" carries an invalid replace surfaceOp')
        start_index, end_index = self._locate(start, end)
        shadowed = tuple(self._nodes[start_index : end_index + 1])
        self._check_provenance(event, self._count, shadowed)
        if kind == "tool/result":
            self._check_tool_result_rewrite(event, shadowed)
        this = self._count
        for node in shadowed:
            self._tool_results.pop(node, None)
        self._nodes[start_index : end_index + 1] = [this]
        if kind == "tool/result":
            self._tool_results[this] = event
        self._replacements.append(SurfaceReplacement(this, start, end, shadowed))
        self._count += 1

    def _commit_append(self, event: Mapping[str, Any]) -> None:
        self._nodes.append(self._count)
        if event.get("type") == "tool/result":
            self._tool_results[self._count] = event
        self._count += 1

    def _locate(self, start: int, end: int) -> tuple[int, int]:
        try:
            start_index = self._nodes.index(start)
        except ValueError:
            raise SurfaceError(f"surface replace: start seq {start} not found in surface") from None
        try:
            end_index = self._nodes.index(end)
        except ValueError:
            raise SurfaceError(f"surface replace: end seq {end} not found in surface") from None
        if start_index > end_index:
            raise SurfaceError(
                f"surface replace: start seq {start} (index {start_index}) is after end seq "
                f"{end} (index {end_index})"
            )
        return start_index, end_index

    @staticmethod
    def _check_provenance(event: Mapping[str, Any], seq: int, shadowed: Sequence[int]) -> None:
        sources = _provenance(event, seq) if "sourceEventSeqs" in event else set()
        missing = [node for node in shadowed if node not in sources]
        if missing:
            raise SurfaceError(
                "surface replace: sourceEventSeqs must include every shadowed surface node; "
                f"missing {', '.join(map(str, missing))}"
            )

    def _check_tool_result_rewrite(self, event: Mapping[str, Any], shadowed: Sequence[int]) -> None:
        # "a tool/result replacement must replace exactly one current tool/result and may
        # change only the tool-result block's content"
        if len(shadowed) != 1:
            raise SurfaceError(
                "tool/result surface replacement must rewrite exactly one current node"
            )
        original = self._tool_results.get(shadowed[0])
        if original is None:
            raise SurfaceError("tool/result surface replacement must target a current tool/result")
        if _content_blanked(original["data"]) != _content_blanked(event["data"]):
            raise SurfaceError("tool/result surface replacement may change only content")


def _provenance(event: Mapping[str, Any], seq: int) -> set[int]:
    # "sourceEventSeqs, when present: an array of distinct non-negative integers, all
    # smaller than the event's own seq; empty only allowed on assistant/message"
    raw = event["sourceEventSeqs"]
    if not isinstance(raw, list):
        raise SurfaceError(f"sourceEventSeqs on event at seq {seq} must be an array when present")
    if not raw:
        if event.get("type") != "assistant/message":
            raise SurfaceError("sourceEventSeqs must not be empty except on assistant/message")
        return set()
    if set(map(type, raw)) <= _INT and min(raw) >= 0 and max(raw) < seq:
        # Fast path (every real log): plain earlier ints, checked in C.
        sources = set(raw)
        non_earlier = None
    else:
        sources = set()
        non_earlier = None
        for value in raw:
            source = _seq(value)
            if source is None:
                raise SurfaceError(
                    f'session event "{event.get("type")}" sourceEventSeqs must densely '
                    "contain non-negative safe integers"
                )
            sources.add(source)
            if non_earlier is None and source >= seq:
                non_earlier = source
    if len(sources) != len(raw):
        raise SurfaceError("sourceEventSeqs must not contain duplicates")
    if non_earlier is not None:
        raise SurfaceError(
            f"sourceEventSeqs must reference earlier events: {non_earlier} >= current seq {seq}"
        )
    return sources


def fold_surface(events: Iterable[Mapping[str, Any]]) -> SurfaceFold:
    """Fold a complete log (events in seq order, starting at seq 0) into its surface.

    Raises:
        SurfaceError: the log breaks a surface rule (see `SurfaceFolder.apply`).
    """
    folder = SurfaceFolder()
    for event in events:
        folder.apply(event)
    return folder.result()
