"""The per-agent tree index behind global (fuzzy) queries: a breadth-first walk with an entry cap.

Building is blocking filesystem work, meant for a worker thread (see
``_service``); searching is pure CPU over the finished, immutable entries.
"""

from __future__ import annotations

import os
import threading
from collections import deque

import attrs

from actors.file_references._config import FileReferencesConfig
from actors.file_references._fs import (
    Identity,
    ListedEntry,
    close_directory,
    open_root,
    open_subdirectory,
    read_entries,
)
from actors.file_references._ignore import IgnoreRules, ancestor_rules, is_ignored, with_directory
from actors.file_references._pool import Ranked, RankPool
from actors.file_references._query import FileReferenceCandidate, absolute_root
from actors.file_references._rank import all_bmp, prepare_needle, utf16_units

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
    """An agent's recursive index, ready for ranking at keystroke rate.

    Hidden entries ("any segment of the path starts with ``.``") live in their own pool: a
    query that does not start with ``.`` ranks the visible pool alone; one that does ranks both
    and merges the two top lists by upstream's full sort key (the best ``maxResults`` of the
    union are among the best ``maxResults`` of each part).
    """

    root: str
    """The absolute root the walk started from."""
    visible: RankPool
    """Entries without a segment starting with ``.``."""
    hidden: RankPool
    """Entries with one (shown only to queries that start with ``.``)."""
    truncated: bool
    """See :attr:`FileIndexStatistics.truncated`."""
    entry_cap: int | None
    """See :attr:`FileIndexStatistics.entry_cap`."""

    @classmethod
    def from_entries(
        cls, root: str, entries: list[tuple[str, bool]], *, truncated: bool = False
    ) -> FileIndex:
        """An index of given ``(path, is_directory)`` entries (tests and tools)."""
        directories = [path for path, is_directory in entries if is_directory]
        files = [path for path, is_directory in entries if not is_directory]
        shown_directories, hidden_directories = _split_hidden(directories)
        shown_files, hidden_files = _split_hidden(files)
        return cls(
            root=root,
            visible=RankPool(shown_directories, shown_files),
            hidden=RankPool(hidden_directories, hidden_files),
            truncated=truncated,
            entry_cap=None,
        )

    def __len__(self) -> int:
        return len(self.visible) + len(self.hidden)

    def entries(self) -> list[tuple[str, bool]]:
        """Every ``(path, is_directory)``, in upstream's walk order (breadth-first, each
        directory's entries in code-unit name order), reconstructed from the kept entries.

        The kept entries are a prefix of that order, so this is the order the walk kept them in.
        """
        children: dict[str, list[tuple[str, bool]]] = {}
        for pool in (self.visible, self.hidden):
            for path, is_directory in pool.entries():
                parent, _, name = path.rpartition("/")
                children.setdefault(parent, []).append((name, is_directory))
        bmp = all_bmp(name for listed in children.values() for name, _ in listed)
        ordered: list[tuple[str, bool]] = []
        queue = deque([""])
        while queue:
            parent = queue.popleft()
            listed = children.get(parent, [])
            listed.sort(key=_name if bmp else _name_units)
            for name, is_directory in listed:
                path = f"{parent}/{name}" if parent else name
                ordered.append((path, is_directory))
                if is_directory:
                    queue.append(path)
        return ordered

    def prepare(self, abort: threading.Event | None = None) -> None:
        """Do the ranking's one-off preparation now (a worker thread after the build), so the
        first keystroke that needs it does not wait for it.

        Raises:
            RankAbortedError: ``abort`` was set.
        """
        self.visible.prepare(abort)
        self.hidden.prepare(abort)

    def statistics(self) -> FileIndexStatistics:
        """Return a snapshot of the index's size and whether the cap cut it off."""
        return FileIndexStatistics(
            entries=len(self),
            directories=self.visible.directories + self.hidden.directories,
            truncated=self.truncated,
            entry_cap=self.entry_cap,
        )

    def search(
        self, needle: str, limit: int, abort: threading.Event | None = None
    ) -> list[FileReferenceCandidate]:
        """Answer one global query (spec §3.3, "Global mode").

        "if the query starts with ``.`` everything is visible; otherwise any path having a
        segment that starts with ``.`` is removed (so files inside hidden directories are hidden
        too)".

        Args:
            needle: the whole (slash-free, non-empty) query.
            limit: ``maxResults``.
            abort: set when the caller is cancelled or superseded; stops the ranking early.

        Raises:
            RankAbortedError: ``abort`` was set.
        """
        found = self._search(needle, limit, abort, cached_only=False)
        assert found is not None  # only a cached-only search returns None
        return found

    def search_cached(self, needle: str, limit: int) -> list[FileReferenceCandidate] | None:
        """The answer of an earlier identical query (kept by the pools), or ``None``: no
        ranking, so a caller can answer repeated keystrokes (backspacing, retyping) inline."""
        return self._search(needle, limit, None, cached_only=True)

    def _search(
        self, needle: str, limit: int, abort: threading.Event | None, *, cached_only: bool
    ) -> list[FileReferenceCandidate] | None:
        prepared = prepare_needle(needle)
        pools = (self.visible,) if not needle.startswith(".") else (self.visible, self.hidden)
        found: list[list[Ranked]] = []
        for pool in pools:
            ranked = (
                pool.cached(prepared, limit) if cached_only else pool.rank(prepared, limit, abort)
            )
            if ranked is None:
                return None
            found.append(ranked)
        if len(pools) == 1:
            return [self.visible.candidate(row) for _, row in found[0]]
        merged: list[tuple[tuple[int, bool, int, str], RankPool, Ranked]] = [
            (pool.order_key(ranked), pool, ranked)
            for pool, results in zip(pools, found, strict=True)
            for ranked in results
        ]
        merged.sort(key=_first)
        return [pool.candidate(ranked[1]) for _, pool, ranked in merged[:limit]]


def _first(item: tuple[tuple[int, bool, int, str], RankPool, Ranked]) -> tuple[int, bool, int, str]:
    return item[0]


def _name(item: tuple[str, bool] | ListedEntry) -> str:
    return item[0]


def _name_units(item: tuple[str, bool] | ListedEntry) -> str:
    return utf16_units(item[0])


def _split_hidden(paths: list[str]) -> tuple[list[str], list[str]]:
    hidden = [path for path in paths if path[0] == "." or "/." in path]
    if not hidden:
        return list(paths), []
    marked = set(hidden)
    return [path for path in paths if path not in marked], hidden


_Pending = tuple[str, Identity | None, IgnoreRules | None, bool]


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
    # Kept entries by kind and visibility ("any segment ... starts with ."), in walk order.
    shown_directories: list[str] = []
    shown_files: list[str] = []
    hidden_directories: list[str] = []
    hidden_files: list[str] = []
    kept = 0
    queue: deque[_Pending] = deque()
    queue.append(("", None, ancestor_rules(top) if respect else None, False))
    truncated = False
    while queue and not truncated:
        if abort is not None and abort.is_set():
            raise ScanAbortedError("file search index invalidated")
        relative, identity, rules, hidden = queue.popleft()
        handle = open_subdirectory(top, relative, identity) if relative else open_root(top)
        if handle is None:
            continue  # "An unreadable or vanished directory contributes nothing"
        try:
            # A subdirectory that passed its identity check is on its parent's device (a
            # mount point reopened by open_subdirectory is not; its children then take the
            # link-proof reopening too, which is only slower).
            device = identity[0] if identity is not None else None
            listed = read_entries(handle, identities=True, device=device)
            if respect:
                rules = with_directory(rules, handle, relative, {item[0] for item in listed})
        finally:
            close_directory(handle)
        if rules is not None or (cap is not None and excluded):
            listed = [
                item
                for item in listed
                if not (item[1] and item[0] in excluded)  # "skipped entirely"
                and (rules is None or not is_ignored(rules, _join(relative, item[0]), item[1]))
            ]
        if cap is not None:
            # "sort them by name in code-unit order, and visit them in that order": with a cap
            # the order decides what is kept (and the queue order below). Without one the
            # result is a pure function of the set of entries, so the walk skips the sorts.
            listed.sort(key=_name if all_bmp(item[0] for item in listed) else _name_units)
            if kept + len(listed) > cap:
                # "Stop as soon as the index holds maxEntries items, even in the middle of a
                # directory"; ``truncated`` is exact: the cap kept an entry out.
                del listed[cap - kept :]
                truncated = True
        kept += len(listed)
        prefix = f"{relative}/" if relative else ""
        for name, is_directory, child_identity in listed:
            if is_directory:
                if name in excluded:
                    continue  # "skipped entirely (not indexed, not descended)"
                path = prefix + name
                if hidden or name[0] == ".":
                    hidden_directories.append(path)
                    queue.append((path, child_identity, rules, True))
                else:
                    shown_directories.append(path)
                    queue.append((path, child_identity, rules, False))
            elif hidden or name[0] == ".":
                hidden_files.append(prefix + name)
            else:
                shown_files.append(prefix + name)
    return FileIndex(
        root=top,
        visible=RankPool(shown_directories, shown_files),
        hidden=RankPool(hidden_directories, hidden_files),
        truncated=truncated,
        entry_cap=cap,
    )


def _join(relative: str, name: str) -> str:
    return f"{relative}/{name}" if relative else name
