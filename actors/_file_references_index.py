"""The per-agent tree index behind global (fuzzy) queries: a breadth-first walk with an entry cap.

Building is blocking filesystem work, meant for a worker thread (see
``_file_references_service``); searching is pure CPU over the finished, immutable entries.
"""

from __future__ import annotations

import os
import threading
from collections import deque

import attrs

from actors._file_references_config import FileReferencesConfig
from actors._file_references_fs import (
    Identity,
    close_directory,
    open_root,
    open_subdirectory,
    read_entries,
)
from actors._file_references_ignore import IgnoreRules, ancestor_rules, is_ignored, with_directory
from actors._file_references_query import FileCandidate, absolute_root
from actors._file_references_rank import (
    Row,
    candidates,
    make_row,
    prepare_needle,
    rank,
    sort_names,
    sort_rows,
)

__all__ = ["FileIndex", "FileIndexStatistics", "ScanAbortedError", "build_index"]


class ScanAbortedError(Exception):
    """The scan's private abort flag was set (the index was invalidated or disposed)."""


@attrs.frozen(kw_only=True)
class FileIndexStatistics:
    """A snapshot of one finished index."""

    entries: int
    """Files and directories indexed."""
    directories: int
    """How many of the entries are directories."""
    truncated: bool
    """Whether the entry cap stopped the walk while more entries remained (upstream gives no
    such indication, spec §9.4)."""
    entry_cap: int | None
    """The cap in force (``maxEntries``), or ``None`` when ``unlimitedEntries`` lifted it."""


@attrs.define(eq=False)
class FileIndex:
    """An agent's recursive index, ready for ranking at keystroke rate."""

    root: str
    """The absolute root the walk started from."""
    rows: list[Row]
    """Everything indexed, in walk (breadth-first) order."""
    truncated: bool
    """See :attr:`FileIndexStatistics.truncated`."""
    entry_cap: int | None
    """See :attr:`FileIndexStatistics.entry_cap`."""
    _everything: list[Row] = attrs.field(init=False)
    _visible: list[Row] = attrs.field(init=False)
    _last: tuple[str, bool, list[Row]] | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        # Pools in tie-break order, so ranking never sorts more than a score bucket's head.
        self._everything = list(self.rows)
        sort_rows(self._everything)
        self._visible = [row for row in self._everything if not _is_hidden(row[3])]

    def __len__(self) -> int:
        return len(self.rows)

    def statistics(self) -> FileIndexStatistics:
        """Return a snapshot of the index's size and whether the cap cut it off."""
        return FileIndexStatistics(
            entries=len(self.rows),
            directories=sum(1 for row in self.rows if row[2]),
            truncated=self.truncated,
            entry_cap=self.entry_cap,
        )

    def search(self, needle: str, limit: int) -> list[FileCandidate]:
        """Answer one global query (spec §3.3, "Global mode").

        "if the query starts with ``.`` everything is visible; otherwise any path having a
        segment that starts with ``.`` is removed (so files inside hidden directories are hidden
        too)". When the needle extends the previous one, only the previous matches can match
        (every tier implies a subsequence match), so they are the pool; the order is a pure
        function of each entry, so the result is unchanged (spec §5 "levers").

        Args:
            needle: the whole (slash-free, non-empty) query.
            limit: ``maxResults``.
        """
        dot = needle.startswith(".")
        prepared = prepare_needle(needle)
        pool = self._everything if dot else self._visible
        last = self._last
        if last is not None and last[1] == dot and prepared.startswith(last[0]):
            pool = last[2]
        best, matches = rank(pool, prepared, limit)
        # One tuple assignment: atomic, so concurrent searches at worst reuse a wider pool.
        self._last = (prepared, dot, matches)
        return candidates(best)


def _is_hidden(path: str) -> bool:
    return path.startswith(".") or "/." in path


_Pending = tuple[str, Identity | None, IgnoreRules | None]


def build_index(
    root: str | os.PathLike[str],
    config: FileReferencesConfig,
    abort: threading.Event | None = None,
) -> FileIndex:
    """Walk the tree under ``root`` breadth-first, as upstream does (spec §4.2).

    "a FIFO queue of directories starting with the root. For each directory, read its entries
    with their types, sort them by name in code-unit order, and visit them in that order": an
    excluded directory is skipped entirely, any other real directory (hidden ones included) is
    indexed and queued, a regular file is indexed, anything else is ignored. "Stop as soon as
    the index holds ``maxEntries`` items, even in the middle of a directory."

    Args:
        root: the agent's cwd, used as given (links in it are followed; none below it is).
        config: cap, exclusions and the opt-in ignore-file rules.
        abort: checked before each directory; once set the walk stops.

    Returns:
        The index. A missing or unreadable root gives an empty one; unreadable subtrees are
        skipped ("contributes nothing; the scan continues").

    Raises:
        ScanAbortedError: ``abort`` was set.
    """
    top = absolute_root(root)
    excluded = frozenset(config.excluded_directories)
    cap = config.entry_cap
    respect = config.respect_ignore_files
    rows: list[Row] = []
    queue: deque[_Pending] = deque()
    queue.append(("", None, ancestor_rules(top) if respect else None))
    truncated = False
    while queue and not truncated:
        if abort is not None and abort.is_set():
            raise ScanAbortedError("file search index invalidated")
        relative, identity, rules = queue.popleft()
        if relative:
            handle = open_subdirectory(os.path.join(top, relative.replace("/", os.sep)), identity)
        else:
            handle = open_root(top)
        if handle is None:
            continue  # "An unreadable or vanished directory contributes nothing"
        try:
            listed = read_entries(handle, identities=True)
            if respect:
                rules = with_directory(rules, handle, relative, {item[0] for item in listed})
        finally:
            close_directory(handle)
        sort_names(listed)  # "sort them by name in code-unit order"
        prefix = f"{relative}/" if relative else ""
        for name, is_directory, child_identity in listed:
            if is_directory and name in excluded:
                continue  # "skipped entirely (not indexed, not descended)"
            path = prefix + name
            if rules is not None and is_ignored(rules, path, is_directory):
                continue
            if cap is not None and len(rows) >= cap:
                # Upstream stops silently at the cap; we stop at the first entry the cap keeps
                # out, so ``truncated`` is exact (the kept entries are the same).
                truncated = True
                break
            rows.append(make_row(path, is_directory))
            if is_directory:
                queue.append((path, child_identity, rules))
    return FileIndex(root=top, rows=rows, truncated=truncated, entry_cap=cap)
