"""What a log writer goes back to when a batch fails to write.

A writer folds every appended event into its surface fold and title fold as it queues it (the
next event is checked against them), before the batch is written. A batch that then fails to
write is discarded, and the writer returns to the folds as of its last durable batch: the seq
counter, the surface, the title and the subagent descriptor are again what the log holds.

Saving must not cost a copy of the fold per batch: a long log's surface holds hundreds of
thousands of seqs. A fold that is replaced (the owner folded the batch into a copy of its own,
`SessionLogWriter.append_checked`) is simply kept. A fold changed in place is marked instead:
appends only grow its lists, so cutting them back to the mark undoes them; the first
replacement of a batch (which rewrites the middle of the surface) is preceded by one copy of
the fold as it was at the mark.
"""

from __future__ import annotations

from actors.session_log._surface import SurfaceFolder
from actors.session_log._title_fold import TitleFold

__all__ = ["Checkpoint"]


class Checkpoint:
    """The folds as of the last durable batch, saved when a new batch starts."""

    def __init__(self) -> None:
        self._titles: TitleFold | None = None
        #: The durable fold itself (replaced folds), or its copy taken before a replacement.
        self._folder: SurfaceFolder | None = None
        #: ``(count, nodes, replacements)`` of a fold folded in place, as it was durable.
        self._mark: tuple[int, int, int] | None = None

    def save(self, folder: SurfaceFolder, titles: TitleFold, *, replaced: bool) -> None:
        """Save the durable folds (the writer's, before a batch's first event).

        Args:
            folder: the writer's fold now.
            titles: the writer's title fold now.
            replaced: ``folder`` will be replaced, not changed in place, so it is kept as is.
        """
        self._titles = titles.copy()
        self._folder = folder if replaced else None
        self._mark = None if replaced else _mark_of(folder)

    def before_replacement(self, folder: SurfaceFolder) -> None:
        """Call before a replacement is folded into a fold changed in place."""
        if self._mark is not None and self._folder is None:
            self._folder = _cut(folder.copy(), self._mark)

    def clear(self) -> None:
        """The batch is durable: nothing to go back to."""
        self._titles = self._folder = self._mark = None

    def restore(self, folder: SurfaceFolder) -> tuple[SurfaceFolder, TitleFold] | None:
        """The durable folds, given the writer's fold now (None when no batch started); the
        checkpoint is cleared."""
        titles, saved, mark = self._titles, self._folder, self._mark
        self.clear()
        if titles is None:
            return None
        if saved is None:
            assert mark is not None
            saved = _cut(folder, mark)
        return saved, titles


def _mark_of(folder: SurfaceFolder) -> tuple[int, int, int]:
    return folder._count, len(folder._nodes), len(folder._replacements)


def _cut(folder: SurfaceFolder, mark: tuple[int, int, int]) -> SurfaceFolder:
    """Undo the appends folded into ``folder`` since ``mark`` (in place; no replacements)."""
    count, nodes, replacements = mark
    for seq in folder._nodes[nodes:]:
        folder._tool_results.pop(seq, None)
    del folder._nodes[nodes:]
    del folder._replacements[replacements:]
    folder._count = count
    return folder
