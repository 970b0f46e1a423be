"""Opt-in ``.gitignore``/``.ignore`` pruning of the index (``respectIgnoreFiles``; not upstream).

Upstream honours no ignore files: "only the configured basenames are excluded" (spec §4.6).
Users ask for both directions (spec §8.4): pruning for speed and noise, yet a way to reach
ignored files such as ``.env``. So the rules prune only the *global index*; a directory-mode
query still lists everything in the directory it names, which keeps every file reachable by
typing its path.

Semantics follow git and the ``ignore`` crate: each directory's ``.gitignore`` and ``.ignore``
apply to paths below it; a deeper file's match overrides a shallower one; within one directory
``.ignore`` overrides ``.gitignore``; the repository's ``.git/info/exclude`` has the lowest
precedence; an ignored directory is pruned whole, so nothing below it can be re-included. When
the cwd lies inside a git work tree, the ignore files of its ancestors up to the work-tree root
apply too (their rules are read, their names never listed). Like Codex (``require_git(false)``)
the rules apply outside git repositories as well. The global ``core.excludesFile`` is not read.
"""

from __future__ import annotations

import os
from typing import Final

import attrs
import pathspec

from actors.file_references._fs import (
    DirectoryHandle,
    close_directory,
    open_root,
    read_small_text,
)

__all__ = ["IGNORE_FILE_NAMES", "IgnoreRules", "ancestor_rules", "is_ignored", "with_directory"]

IGNORE_FILE_NAMES: Final = (".gitignore", ".ignore")
"""Read in this order, so a later (``.ignore``) match wins within one directory."""


@attrs.frozen(slots=True)
class IgnoreRules:
    """One directory's rules, linked to the rules of the directories above it."""

    spec: pathspec.GitIgnoreSpec
    """The directory's patterns, in precedence order (last match wins)."""
    strip: str
    """Root-relative prefix of this directory (``""`` or ``"a/b/"``), removed before matching."""
    prepend: str
    """For ancestors of the root: the root's path below this directory (``"sub/dir/"``)."""
    parent: IgnoreRules | None
    """The nearest enclosing directory's rules, with lower precedence."""


def is_ignored(rules: IgnoreRules | None, path: str, is_directory: bool) -> bool:
    """Whether a root-relative path is ignored by the nearest rules that decide it.

    Args:
        rules: the chain for the path's parent directory (from :func:`with_directory`).
        path: root-relative, ``/``-separated.
        is_directory: directories are matched with a trailing ``/`` (``build/`` patterns).
    """
    suffix = "/" if is_directory else ""
    node = rules
    while node is not None:
        decision = node.spec.check_file(node.prepend + path[len(node.strip) :] + suffix).include
        if decision is not None:
            return decision
        node = node.parent
    return False


def _spec_from(texts: list[str]) -> pathspec.GitIgnoreSpec | None:
    lines = [line for text in texts for line in text.splitlines()]
    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    return spec if len(spec.patterns) else None


def with_directory(
    rules: IgnoreRules | None, handle: DirectoryHandle, relative: str, names: set[str]
) -> IgnoreRules | None:
    """Extend the chain with one directory's ignore files, if it has any.

    Args:
        rules: the chain of the enclosing directories.
        handle: the open directory.
        relative: its root-relative path (``""`` for the root).
        names: the names it contains, so absent files cost no system call.
    """
    texts = [
        text
        for name in IGNORE_FILE_NAMES
        if name in names and (text := read_small_text(handle, name)) is not None
    ]
    spec = _spec_from(texts) if texts else None
    if spec is None:
        return rules
    return IgnoreRules(
        spec=spec, strip=f"{relative}/" if relative else "", prepend="", parent=rules
    )


def _read_rules(directory: str, names: tuple[str, ...]) -> pathspec.GitIgnoreSpec | None:
    handle = open_root(directory)
    if handle is None:
        return None
    try:
        texts = [text for name in names if (text := read_small_text(handle, name)) is not None]
    finally:
        close_directory(handle)
    return _spec_from(texts) if texts else None


def ancestor_rules(root: str) -> IgnoreRules | None:
    """Rules that apply to the root from above: ``.git/info/exclude`` and ancestor ignore files.

    Args:
        root: the absolute root.

    Returns:
        The chain up to (not including) the root's own ignore files, or ``None`` when the root
        is not inside a git work tree (or is its top, apart from ``info/exclude``).
    """
    top = root
    while not os.path.lexists(os.path.join(top, ".git")):
        parent = os.path.dirname(top)
        if parent == top:
            return None
        top = parent
    chain: IgnoreRules | None = None
    exclude = _read_rules(os.path.join(top, ".git", "info"), ("exclude",))
    below = os.path.relpath(root, top).replace(os.sep, "/")
    below = "" if below == "." else below + "/"
    if exclude is not None:
        chain = IgnoreRules(spec=exclude, strip="", prepend=below, parent=None)
    directory = top
    while below:
        spec = _read_rules(directory, IGNORE_FILE_NAMES)
        if spec is not None:
            chain = IgnoreRules(spec=spec, strip="", prepend=below, parent=chain)
        head, _, below = below.partition("/")
        directory = os.path.join(directory, head)
    return chain
