"""Candidate record, query grammar and the lexical containment check of ``fileReferences/list``.

Everything here is pure: no filesystem access. The filesystem half of the safety rules (no
symbolic link is ever crossed) lives in ``_fs``.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Final, Literal

import attrs

__all__ = [
    "CandidateKind",
    "DirectoryQuery",
    "FileReferenceCandidate",
    "GlobalQuery",
    "ParsedQuery",
    "ResolvedDirectory",
    "absolute_root",
    "normalise_query",
    "parse_query",
    "resolve_directory",
]

CandidateKind = Literal["file", "directory"]
_KINDS: Final = ("file", "directory")


@attrs.frozen(slots=True)
class FileReferenceCandidate:
    """One ``@``-completion candidate: a path inside the agent's cwd and its kind.

    The record "never carries contents, sizes, mtimes, scores, match positions or 'more results'
    flags" (spec §1.1).
    """

    path: str
    """User-facing path: ``/``-separated, relative to the cwd unless the query typed a prefix,
    no trailing slash on directories (the formatter adds it)."""
    kind: CandidateKind = attrs.field(validator=attrs.validators.in_(_KINDS))
    """``"directory"`` keeps completion open; ``"file"`` finishes the mention."""

    def to_wire(self) -> dict[str, str]:
        """Return the wire form ``{"path": ..., "kind": ...}``."""
        return {"path": self.path, "kind": self.kind}


@attrs.frozen(slots=True)
class DirectoryQuery:
    """A query that lists one directory live (empty, or containing ``/``)."""

    directory: str
    """The query up to and including its last ``/`` (empty for the cwd); echoed verbatim."""
    fragment: str
    """What follows the last ``/``; ranks the listing."""


@attrs.frozen(slots=True)
class GlobalQuery:
    """A slash-free, non-empty query matched against the agent's cached tree index."""

    needle: str
    """The whole query."""


ParsedQuery = DirectoryQuery | GlobalQuery


def normalise_query(query: str) -> str:
    """Replace every backslash with ``/``, "on every OS" (spec §2.4 step 3)."""
    return query.replace("\\", "/")


def parse_query(query: str) -> ParsedQuery:
    """Split a query into its mode, after normalisation.

    "If the query is empty or contains a ``/``, use directory mode: the directory part is the
    query up to and including the last slash (empty if no slash), the fragment is what follows
    it. Otherwise use global (fuzzy) mode over the cached recursive index with the whole query."
    (spec §2.4 step 4). So ``.``, ``..`` and ``~`` are global needles, never navigation.
    """
    query = normalise_query(query)
    cut = query.rfind("/")
    if not query or cut >= 0:
        return DirectoryQuery(directory=query[: cut + 1], fragment=query[cut + 1 :])
    return GlobalQuery(needle=query)


@attrs.frozen(slots=True)
class ResolvedDirectory:
    """A directory part that lexically stays inside the root."""

    root: str
    """The absolute, lexically normalised root."""
    segments: tuple[str, ...]
    """Names to descend from the root to the target; empty for the root itself."""


def absolute_root(root: str | os.PathLike[str]) -> str:
    """Make the root absolute and lexically normalised, never resolving symbolic links.

    "The root itself is used as given (it may be, or lie under, a symlink; it is never checked)"
    (spec §4.1). An empty root means the process cwd, like upstream's fallback (spec §1.4).
    """
    return _collapse_double_root(os.path.abspath(os.fspath(root) or os.curdir))


def _collapse_double_root(path: str) -> str:
    # POSIX normpath keeps a leading "//" (implementation-defined); Node's path.resolve, which
    # upstream uses, collapses it, and so does Linux.
    if os.sep == "/" and path.startswith("//"):
        return "/" + path.lstrip("/")
    return path


def resolve_directory(
    root: str, directory: str, excluded: Collection[str]
) -> ResolvedDirectory | None:
    """Resolve a directory-mode directory part against the root, lexically.

    Args:
        root: the absolute root from :func:`absolute_root`.
        directory: the normalised directory part of a :class:`DirectoryQuery`.
        excluded: excluded directory basenames.

    Returns:
        The segments beneath the root, or ``None`` when the part names an excluded directory or
        resolves outside the root (the caller then answers with an empty list).
    """
    # "If any /-separated segment of the directory part (including segments of an absolute
    # prefix) equals an excluded basename exactly (case-sensitive), return empty without
    # touching the disk" (spec §4.3 step 1).
    if any(segment in excluded for segment in directory.split("/")):
        return None
    # "Resolution is purely lexical: ./.. segments and duplicate slashes are collapsed; an
    # absolute directory part replaces the root" (§4.3 step 2). No "~" expansion (§4.8).
    native = directory.replace("/", os.sep)
    target = _collapse_double_root(os.path.normpath(os.path.join(root, native)))
    try:
        relative = os.path.relpath(target, root)
    except ValueError:  # Windows: different drives, "only possible on Windows across drives"
        return None
    # "if that is .. or starts with .. plus the separator, return empty; if it is itself
    # absolute ..., return empty" (§4.3 step 3).
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return None
    if os.path.isabs(relative) or os.path.splitdrive(relative)[0]:
        return None
    if relative == os.curdir:
        return ResolvedDirectory(root=root, segments=())
    segments = tuple(relative.split(os.sep))
    if os.pardir in segments or os.curdir in segments or "" in segments:
        return None  # unreachable after normpath; kept so a platform quirk cannot widen access
    return ResolvedDirectory(root=root, segments=segments)
