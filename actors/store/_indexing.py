"""Building and refreshing the projection cache from a DSH sessions directory.

What ``agent-actors index --sessions DIR`` runs, and what the store runs at start for each root
it serves. The walk follows the layout of `session-log-format` §2.1: ``<root>/<project>/
<session>/session.jsonl[.zstd]``. A transcript whose size and mtime match its cache row (or its
recorded rejection) is not read again; every other one is loaded completely, exactly as a read
would load it, and indexed, or rejected with the loader's reason. A log whose body fails but
whose header passes the listing's shape check is still indexed, with the reason in its row's
``load_error``: upstream's listing reads headers only (§2.4), so the session is listed and
a reference candidate, and only a read of it fails. Unlike upstream's
listing, which fails as a whole on a layout error (mixed encodings, a flat-layout file, a
duplicate id, a header naming another path, §2.3 and §2.4), the indexer rejects just the files
concerned and indexes the rest.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import attrs

from actors.session_log import (
    Compression,
    LoadedSession,
    LogReadError,
    SessionHeader,
    compression_of,
    load_session,
    log_path,
    log_suffix,
    read_header,
    session_title,
    subagent_label,
)
from actors.store._cache_rows import CachedSession, Rejection
from actors.store._projection_cache import ProjectionCache

__all__ = [
    "IndexProgress",
    "IndexSummary",
    "IndexingError",
    "ProgressBar",
    "detect_compression",
    "has_session_logs",
    "header_row",
    "index_sessions",
    "no_sessions_message",
    "render_summary",
    "row_for",
]

_BATCH = 500
"""Rows per cache transaction while indexing."""


class IndexingError(RuntimeError):
    """The sessions directory itself cannot be indexed (missing, not a directory)."""


@attrs.frozen(kw_only=True)
class IndexProgress:
    """Where an index run is."""

    done: int
    """Transcripts handled so far."""
    total: int
    """Transcripts found."""
    path: str | None = None
    """The transcript just handled."""


@attrs.frozen(kw_only=True)
class IndexSummary:
    """The outcome of one index run."""

    root: str
    compression: Compression
    found: int
    """Transcripts found."""
    indexed: int
    """Transcripts read in this run and listed (a row written), whether or not their body
    loaded."""
    unchanged: int
    """Transcripts skipped because size and mtime matched (indexed or rejected before)."""
    removed: int
    """Cache rows dropped because their transcript is gone."""
    rejected: tuple[Rejection, ...]
    """Every transcript of the root that does not load, with the reason (old and new); those
    whose header is listed all the same say so (`Rejection.listed`)."""
    seconds: float


def _opposite(compression: Compression) -> Compression:
    return "none" if compression == "zstd" else "zstd"


def detect_compression(root: str | Path, default: Compression = "zstd") -> Compression:
    """The encoding of a DSH root, from the first transcript found (§2.1: "a root holds one
    encoding"); ``default`` for a root without transcripts."""
    first = _first_transcript(Path(root))
    return default if first is None else first


def has_session_logs(root: str | Path) -> bool:
    """Whether ``root`` holds at least one transcript where a DSH sessions root keeps them
    (``<root>/<project>/<session>/session.jsonl[.zstd]``, §2.1)."""
    return _first_transcript(Path(root)) is not None


def _first_transcript(root: Path) -> Compression | None:
    names: dict[str, Compression] = {"session.jsonl.zstd": "zstd", "session.jsonl": "none"}
    for project in _sorted_dirs(root):
        for session in _sorted_dirs(project):
            for name, compression in names.items():
                if (session / name).is_file():
                    return compression
    return None


def no_sessions_message(root: str | Path) -> list[str]:
    """What to tell someone whose ``root`` holds no transcript in the DSH layout (§2.1, §2.2):
    lines naming the folder and the layout expected in it, with an example path, and pointing
    at ``<root>/sessions`` when that is a sessions root (``$DSH_HOME`` given for
    ``$DSH_HOME/sessions``)."""
    folder = Path(root).resolve()
    example = log_path(folder, _EXAMPLE_CWD, _EXAMPLE_ID)
    no_cwd = log_path(folder, None, _EXAMPLE_ID).parents[1].name
    lines = [
        f"no DSH session logs found in {folder}",
        f"  expected: {folder}/--<project key>--/<session id>/session.jsonl.zstd "
        "(or session.jsonl), one directory per cwd and one per session",
        f"  e.g. {example} for a session whose cwd is {_EXAMPLE_CWD} ({no_cwd} when the "
        "header has no cwd)",
    ]
    if has_session_logs(folder / "sessions"):
        lines.append(f"  {folder / 'sessions'} holds DSH session logs: did you mean it?")
    return lines


_EXAMPLE_CWD = "/home/me/app"
_EXAMPLE_ID = "0e7c5f2a-9b1d-4c3e-8f6a-2d4b7c9e1f3a"


def _sorted_dirs(path: Path) -> list[Path]:
    try:
        with os.scandir(path) as entries:
            return sorted(Path(e.path) for e in entries if e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _walk(root: Path, compression: Compression) -> tuple[list[Path], list[Rejection]]:
    name = f"session{log_suffix(compression)}"
    other = f"session{log_suffix(_opposite(compression))}"
    transcripts: list[Path] = []
    rejections: list[Rejection] = []
    for project in _sorted_dirs(root):
        with os.scandir(project) as scan:
            entries = sorted(scan, key=lambda e: e.name)
        for entry in entries:
            if entry.is_file() and compression_of(entry.name) is not None:
                rejections.append(
                    Rejection(
                        path=entry.path,
                        reason="session log uses the retired flat layout (a transcript "
                        "directly inside a project directory)",
                    )
                )
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            path = Path(entry.path) / name
            wrong = Path(entry.path) / other
            if wrong.is_file():
                rejections.append(
                    Rejection(
                        path=str(wrong),
                        reason=f"session log {wrong.name} uses {log_suffix(_opposite(compression))}"
                        f", but this root is configured for compression {compression!r}",
                    )
                )
                continue
            if path.is_file():
                transcripts.append(path)
    return transcripts, rejections


def _identity_problem(
    root: Path, path: Path, session_id: str, cwd: str | None, compression: Compression
) -> str | None:
    # §2.3: recomputing the path from the header's id and cwd must yield the file read.
    try:
        expected = log_path(root, cwd, session_id, compression)
    except ValueError as error:
        return f"session header cannot name a log path: {error}"
    if expected != path and os.path.realpath(expected) != os.path.realpath(path):
        return f'session log does not sit where its header says (expected "{expected}")'
    return None


def index_sessions(
    sessions_dir: str | Path,
    cache: ProjectionCache,
    *,
    compression: Compression | None = None,
    progress: Callable[[IndexProgress], None] | None = None,
) -> IndexSummary:
    """Build or refresh the cache rows of one DSH sessions directory, incrementally.

    Args:
        sessions_dir: the DSH root (``$DSH_HOME/sessions``).
        cache: the projection cache to fill.
        compression: the root's encoding; detected from its first transcript when None.
        progress: called after each transcript (and once before the first).

    Returns:
        Counts and every rejected transcript with its reason.

    Raises:
        IndexingError: ``sessions_dir`` is not a directory.
        ProjectionCacheError: the cache cannot be written.
    """
    started = time.monotonic()
    root = Path(sessions_dir).resolve()
    if not root.is_dir():
        why = "not a directory" if root.exists() else "no such directory"
        raise IndexingError(f"{root}: not a sessions directory ({why})")
    compression = compression or detect_compression(root)
    root_id = cache.root_id(root, compression)
    transcripts, rejections = _walk(root, compression)
    known = cache.file_states(root_id)
    known_rejected = cache.rejected_of_root(root_id)
    known_failed = cache.load_errors(root_id)
    total = len(transcripts)
    if progress is not None:
        progress(IndexProgress(done=0, total=total))
    seen: dict[str, str] = {}
    batch: list[CachedSession] = []
    indexed = unchanged = 0
    for done, path in enumerate(transcripts, start=1):
        key = str(path)
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            continue
        size, mtime = stat.st_size, stat.st_mtime_ns
        row = known.get(key)
        old_rejection = known_rejected.get(key)
        if row is not None and row[1:] == (size, mtime) and row[0] not in seen:
            seen[row[0]] = key
            unchanged += 1
            if key in known_failed:
                rejections.append(Rejection(path=key, reason=known_failed[key], listed=True))
        elif old_rejection is not None and old_rejection[:2] == (size, mtime):
            rejections.append(Rejection(path=key, reason=old_rejection[2]))
            unchanged += 1
        else:
            outcome = _read_one(root, path, compression, root_id, size, mtime, seen, cache)
            if isinstance(outcome, Rejection):
                rejections.append(outcome)
                cache.reject(
                    root_id, key, file_size=size, file_mtime_ns=mtime, reason=outcome.reason
                )
            else:
                seen[outcome.session_id] = key
                batch.append(outcome)
                indexed += 1
                if outcome.load_error is not None:
                    rejections.append(Rejection(path=key, reason=outcome.load_error, listed=True))
                if len(batch) >= _BATCH:
                    cache.upsert(batch)
                    batch.clear()
        if progress is not None:
            progress(IndexProgress(done=done, total=total, path=key))
    cache.upsert(batch)
    present = {str(path) for path in transcripts}
    # A row whose file is gone is dropped, unless its id now lives at another path.
    gone = [entry[0] for path, entry in known.items() if path not in present]
    gone = [session_id for session_id in gone if session_id not in seen]
    cache.remove(gone)
    cache.forget_rejections(path for path in known_rejected if path not in present)
    return IndexSummary(
        root=str(root),
        compression=compression,
        found=total,
        indexed=indexed,
        unchanged=unchanged,
        removed=len(gone),
        rejected=tuple(sorted(rejections, key=lambda r: r.path)),
        seconds=round(time.monotonic() - started, 3),
    )


def _read_one(
    root: Path,
    path: Path,
    compression: Compression,
    root_id: int,
    size: int,
    mtime: int,
    seen: dict[str, str],
    cache: ProjectionCache,
) -> CachedSession | Rejection:
    loaded: LoadedSession | None = None
    failure: str | None = None
    try:
        loaded = load_session(path)
        header = loaded.header
    except LogReadError as error:
        # Listed all the same when the header alone passes the listing's check (§2.4):
        # upstream lists a version-1 header, or a log whose body its loader rejects, and
        # fails only when the session is read.
        failure = error.reason
        try:
            listed = read_header(path)
        except LogReadError:
            listed = None
        if listed is None:
            return Rejection(path=str(path), reason=failure)
        header = listed
    problem = _identity_problem(root, path, header.id, header.cwd, compression)
    if problem is None and header.id in seen:
        problem = f'duplicate session id "{header.id}" (also at {seen[header.id]})'
    if problem is None:
        other = cache.get(header.id)
        if other is not None and other.root_id != root_id and os.path.exists(other.path):
            problem = f'duplicate session id "{header.id}" (already indexed at {other.path})'
    if problem is not None:
        return Rejection(path=str(path), reason=problem)
    if loaded is None:
        return header_row(header, str(path), root_id, size, mtime, load_error=failure)
    return row_for(loaded, root_id, size, mtime)


def row_for(loaded: LoadedSession, root_id: int, size: int, mtime_ns: int) -> CachedSession:
    """The cache row of a loaded session whose transcript had ``size`` and ``mtime_ns``."""
    header = loaded.header
    title = session_title(loaded.events)
    return CachedSession(
        session_id=header.id,
        root_id=root_id,
        path=str(loaded.path),
        cwd=header.cwd,
        created_at=header.created_at,
        parent_session=header.parent_session,
        origin=header.origin,
        title=title.title if title is not None else None,
        subagent_label=subagent_label(loaded.events),
        last_seq=loaded.captured_through_seq,
        file_size=size,
        file_mtime_ns=mtime_ns,
    )


def header_row(
    header: SessionHeader,
    path: str,
    root_id: int,
    size: int,
    mtime_ns: int,
    *,
    load_error: str | None = None,
) -> CachedSession:
    """The cache row of a session known by its header alone (nothing projected)."""
    return CachedSession(
        session_id=header.id,
        root_id=root_id,
        path=path,
        cwd=header.cwd,
        created_at=header.created_at,
        parent_session=header.parent_session,
        origin=header.origin,
        file_size=size,
        file_mtime_ns=mtime_ns,
        load_error=load_error,
    )


def render_summary(summary: IndexSummary) -> str:
    """The summary as a few lines of text (what the CLI prints).

    A transcript whose header is listed though its body is rejected is marked ``(listed by
    header)``: it is a reference candidate, and reading it fails with the reason shown.
    """
    listed = sum(rejection.listed for rejection in summary.rejected)
    rejected = f"{len(summary.rejected)} rejected"
    if listed:
        rejected += f" ({listed} listed by header)"
    lines = [
        f"indexed {summary.root} ({summary.compression}): {summary.found} transcripts, "
        f"{summary.indexed} read, {summary.unchanged} unchanged, {rejected}, "
        f"{summary.removed} removed, in {summary.seconds:.2f} s"
    ]
    for rejection in summary.rejected:
        mark = " (listed by header)" if rejection.listed else ""
        lines.append(f"  rejected{mark} {rejection.path}: {rejection.reason}")
    return "\n".join(lines)


class ProgressBar:
    """A progress callback drawing ``[#####.....] done/total`` on a terminal (stderr by
    default), at most every ``interval`` seconds; silent when the stream is not a TTY."""

    def __init__(
        self, stream: TextIO | None = None, *, width: int = 30, interval: float = 0.1
    ) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._width = width
        self._interval = interval
        self._last = 0.0
        self._enabled = self._stream.isatty()

    def __call__(self, progress: IndexProgress) -> None:
        if not self._enabled:
            return
        now = time.monotonic()
        final = progress.done >= progress.total
        if not final and now - self._last < self._interval:
            return
        self._last = now
        filled = self._width * progress.done // progress.total if progress.total else self._width
        bar = "#" * filled + "." * (self._width - filled)
        end = "\n" if final else ""
        self._stream.write(f"\r[{bar}] {progress.done}/{progress.total}{end}")
        self._stream.flush()
