"""Directory mode: a live, uncached listing of the one directory a query names (spec §4.3)."""

from __future__ import annotations

import os

from actors.file_references._config import FileReferencesConfig
from actors.file_references._fs import close_directory, open_beneath, read_entries
from actors.file_references._pool import RankPool
from actors.file_references._query import (
    DirectoryQuery,
    FileReferenceCandidate,
    absolute_root,
    resolve_directory,
)
from actors.file_references._rank import prepare_needle

__all__ = ["list_directory"]


def list_directory(
    root: str | os.PathLike[str], query: DirectoryQuery, config: FileReferencesConfig
) -> list[FileReferenceCandidate]:
    """List and rank the directory a directory-mode query names, never leaving the root.

    Steps (spec §4.3): refuse a directory part with an excluded segment; resolve it lexically
    against the root and refuse anything outside; descend without crossing a link or a
    non-directory; read the entries; keep real directories that are not excluded and regular
    files, "rendered as directory part + entry name"; "drop dot-entries unless the fragment
    starts with ``.``"; rank with the fragment against the whole returned path and truncate.

    Args:
        root: the agent's cwd.
        query: from :func:`parse_query`.
        config: exclusions and ``maxResults``.

    Returns:
        The candidates; empty for any refusal or filesystem error (spec §6.2).
    """
    excluded = config.excluded_directories
    resolved = resolve_directory(absolute_root(root), query.directory, excluded)
    if resolved is None:
        return []
    handle = open_beneath(resolved.root, resolved.segments)
    if handle is None:
        return []
    try:
        listed = read_entries(handle)
    finally:
        close_directory(handle)
    show_hidden = query.fragment.startswith(".")
    prefix = query.directory
    directories: list[str] = []
    files: list[str] = []
    for name, is_directory, _ in listed:
        if not show_hidden and name.startswith("."):
            continue
        if is_directory:
            if name not in excluded:
                directories.append(prefix + name)
        else:
            files.append(prefix + name)
    # "scored as in 3.1 against the full returned path" — so a fragment can match inside the
    # typed directory part (`src/src` returns all of `src/`), pinned upstream (spec §3.4, §9.1).
    pool = RankPool(directories, files)
    ranked = pool.rank(prepare_needle(query.fragment), config.max_results)
    return [pool.candidate(row) for _, row in ranked]
