"""Bringing loose DSH session logs into a sessions root: what ``agent-actors sessions import``
runs.

Each file is loaded completely, exactly as a read would load it (`load_session`); one that
does not load is refused with the loader's reason, and so is one whose header cannot name a
log path. A loaded log goes where the store looks for it, ``log_path(root, header.cwd,
header.id)`` (`session-log-format` §2.1, §2.2), in the root's encoding, zstd: a zstd log is
copied byte for byte, a plain one is framed as a writer frames it (§9: frame 1 the header line,
then its committed lines as one batch frame; a torn tail, which a read ignores, is left out).
The copy is written to a temp file beside its final path, synced, loaded again and checked to
read as the original, then published with a hard link, which never replaces a file (§2.1).

Nothing is overwritten: an id the root already holds is skipped ("already imported" when the
file there holds exactly what the import would write, "already present" otherwise), and so is
an id the projection cache lists from another root. Afterwards the root is indexed
(`index_sessions`), so a server started on it lists the new sessions at once.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

import attrs

from actors.session_log import (
    MAX_SEGMENT_BYTES,
    LoadedSession,
    LogReadError,
    compress_frame,
    compression_of,
    find_session_log,
    fits_one_segment,
    fsync_dir,
    load_session,
    log_path,
)
from actors.store._indexing import IndexProgress, IndexSummary, index_sessions
from actors.store._projection_cache import ProjectionCache, ProjectionCacheError

__all__ = [
    "ImportOutcome",
    "ImportStatus",
    "ImportSummary",
    "find_session_logs",
    "import_session_logs",
    "render_import_summary",
]

ImportStatus = Literal["imported", "skipped", "refused"]

_IMPORTED_BEFORE = "already imported"
"""Why a file is skipped whose copy is already there, byte for byte."""


@attrs.frozen(kw_only=True)
class ImportOutcome:
    """What became of one file."""

    source: str
    status: ImportStatus
    reason: str | None = None
    """Why it was skipped or refused; for an imported file, what was left out, if anything."""
    target: str | None = None
    """Where the session's log is now (imported, or the one already there)."""


@attrs.frozen(kw_only=True)
class ImportSummary:
    """The outcome of one import run."""

    root: str
    outcomes: tuple[ImportOutcome, ...]
    index: IndexSummary | None
    """The index run that followed (None when the cache refused it: see `index_error`)."""
    index_error: str | None
    seconds: float

    def count(self, status: ImportStatus) -> int:
        """How many files ended with ``status``."""
        return sum(outcome.status == status for outcome in self.outcomes)


def find_session_logs(paths: Iterable[str | Path]) -> list[Path]:
    """The files to import: each file given, and under each directory given every file whose
    name declares a transcript (``*.jsonl``, ``*.jsonl.zstd``), in sorted order, each once.

    Symbolic links to directories are not followed while walking.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    found: dict[Path, None] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for directory, subdirectories, files in os.walk(path):
                subdirectories.sort()
                for name in sorted(files):
                    if compression_of(name) is not None:
                        found.setdefault(Path(directory, name).resolve())
        elif path.exists():
            found.setdefault(path.resolve())
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")
    return list(found)


def import_session_logs(
    sources: Iterable[str | Path],
    root: str | Path,
    cache: ProjectionCache,
    *,
    progress: Callable[[IndexProgress], None] | None = None,
) -> ImportSummary:
    """Import DSH session logs into the zstd sessions root ``root``, then index it.

    Args:
        sources: the log files (see `find_session_logs`).
        root: the sessions root (a server's ``<data dir>/sessions``); created if missing.
        cache: the projection cache of the server that serves ``root``.
        progress: called after each file (and once before the first).

    Returns:
        One outcome per file, in order, and the index run's summary.

    Raises:
        ProjectionCacheError: the cache cannot be read.
    """
    started = time.monotonic()
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    base = base.resolve()
    root_id = cache.root_id(base, "zstd")
    files = [Path(source) for source in sources]
    if progress is not None:
        progress(IndexProgress(done=0, total=len(files)))
    outcomes = []
    for done, source in enumerate(files, start=1):
        outcomes.append(_import_one(source, base, root_id, cache))
        if progress is not None:
            progress(IndexProgress(done=done, total=len(files), path=str(source)))
    index: IndexSummary | None = None
    index_error: str | None = None
    try:
        index = index_sessions(base, cache, compression="zstd")
    except (OSError, ProjectionCacheError) as error:
        index_error = str(error)
    return ImportSummary(
        root=str(base),
        outcomes=tuple(outcomes),
        index=index,
        index_error=index_error,
        seconds=round(time.monotonic() - started, 3),
    )


def _import_one(source: Path, root: Path, root_id: int, cache: ProjectionCache) -> ImportOutcome:
    def refused(reason: str) -> ImportOutcome:
        return ImportOutcome(source=str(source), status="refused", reason=reason)

    try:
        loaded = load_session(source)
        content, note = _content(source, loaded)
    except LogReadError as error:
        return refused(error.reason)
    except OSError as error:
        return refused(f"cannot read it: {error.strerror or error}")
    header = loaded.header
    try:
        target = log_path(root, header.cwd, header.id, "zstd")
    except ValueError as error:
        return refused(f"session header cannot name a log path: {error}")
    if not fits_one_segment(header.id):
        return refused(
            f"session id is too long to name a session directory (over {MAX_SEGMENT_BYTES} "
            "bytes once encoded)"
        )
    try:
        present = find_session_log(root, header.id, "zstd")
        if present is not None:
            same = present.stat().st_size == len(content) and present.read_bytes() == content
            reason = _IMPORTED_BEFORE if same else "already present"
            return ImportOutcome(
                source=str(source), status="skipped", reason=reason, target=str(present)
            )
    except LogReadError as error:
        return refused(f"the sessions root is in the way: {error}")
    except OSError as error:
        return refused(f"cannot read the sessions root: {error.strerror or error}")
    row = cache.get(header.id)
    if row is not None and row.root_id != root_id and os.path.exists(row.path):
        # Indexing would refuse a second log of the id (`_indexing`: "duplicate session id").
        return ImportOutcome(
            source=str(source), status="skipped", reason="already present", target=row.path
        )
    try:
        problem = _publish(target, content, loaded)
    except OSError as error:
        return refused(f"cannot write {target}: {error.strerror or error}")
    if problem == _EXISTS:
        return ImportOutcome(
            source=str(source), status="skipped", reason="already present", target=str(target)
        )
    if problem is not None:
        return refused(problem)
    return ImportOutcome(source=str(source), status="imported", reason=note, target=str(target))


def _content(source: Path, loaded: LoadedSession) -> tuple[bytes, str | None]:
    """The bytes of the zstd log of ``loaded``, and what of the file they leave out."""
    data = source.read_bytes()
    if loaded.compression == "zstd":
        return data, None
    # §9: "frame 1 decodes to exactly the header line including its \n; every later frame
    # is one durable append batch (one or more complete \n-terminated lines)".
    header_end = data.index(b"\n") + 1
    end = loaded.torn.truncate_to if loaded.torn is not None else len(data)
    body = data[header_end:end]
    content = compress_frame(data[:header_end]) + (compress_frame(body) if body else b"")
    left = len(data) - end
    note = f"left out a torn tail of {left} bytes (an interrupted write)" if left else None
    return content, note


_EXISTS = "exists"


def _publish(target: Path, content: bytes, original: LoadedSession) -> str | None:
    """Write ``content`` at ``target`` unless a file is there: temp file, fsync, check that
    it reads as ``original``, hard link, fsync of the directory.

    Returns:
        None when published; `_EXISTS` when ``target`` exists; else why the copy is refused.

    Raises:
        OSError: a write failed (nothing is left behind but empty directories).
    """
    created = _make_dirs(target.parent)
    tmp = target.with_name(f"{target.name}.{secrets.token_hex(6)}.tmp")
    published = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        problem = _differs(tmp, original)
        if problem is not None:
            return f"the copy does not read as the original ({problem})"
        try:
            # link(), not rename(): link fails if the final path exists (§2.1).
            os.link(tmp, target)
        except FileExistsError:
            return _EXISTS
        published = True
        fsync_dir(target.parent)
        return None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if not published:
            for directory in reversed(created):
                with contextlib.suppress(OSError):
                    directory.rmdir()


def _differs(copy: Path, original: LoadedSession) -> str | None:
    try:
        loaded = load_session(copy)
    except LogReadError as error:
        return error.reason
    if loaded.header != original.header:
        return "another header"
    if (loaded.stored_count, loaded.captured_through_seq) != (
        original.stored_count,
        original.captured_through_seq,
    ):
        return f"{loaded.stored_count} stored events, not {original.stored_count}"
    return None


def _make_dirs(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents, durably; returns those created."""
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    created: list[Path] = []
    for path in reversed(missing):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile (another import, or a server)
            continue
        created.append(path)
        fsync_dir(path.parent)
    return created


def render_import_summary(summary: ImportSummary) -> str:
    """The summary as a few lines of text (what the CLI prints): the counts, then one line per
    file refused or skipped (with the reason; not for files whose copy is already there, which
    are only counted) and per file imported with something left out, and any imported log the
    index run did not list."""
    skipped = summary.count("skipped")
    again = sum(outcome.reason == _IMPORTED_BEFORE for outcome in summary.outcomes)
    lines = [
        f"imported {summary.count('imported')}, skipped {skipped} (already present"
        + (f"; {again} of them {_IMPORTED_BEFORE}" if again else "")
        + f"), refused {summary.count('refused')} into {summary.root} in "
        f"{summary.seconds:.2f} s"
    ]
    for outcome in summary.outcomes:
        if outcome.reason is None or outcome.reason == _IMPORTED_BEFORE:
            continue
        where = f" ({outcome.target})" if outcome.status == "skipped" else ""
        lines.append(f"  {outcome.status} {outcome.source}: {outcome.reason}{where}")
    if summary.index_error is not None:
        lines.append(f"  the projection cache was not refreshed: {summary.index_error}")
    elif summary.index is not None:
        targets = {o.target for o in summary.outcomes if o.status == "imported"}
        for rejection in summary.index.rejected:
            if rejection.path in targets:
                lines.append(f"  not listed {rejection.path}: {rejection.reason}")
    return "\n".join(lines)
