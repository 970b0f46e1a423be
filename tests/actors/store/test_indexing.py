"""``index --sessions DIR``: building and refreshing the projection cache from a DSH sessions
directory, incrementally, with rejections and their reasons (issue 3, item 4)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actors.store._indexing as indexing
from actors.session_log._header import SessionHeader
from actors.session_log._layout import log_path
from actors.session_log._reader import load_session
from actors.session_log._writer import SessionLogWriter
from actors.store._indexing import (
    IndexingError,
    IndexProgress,
    ProgressBar,
    detect_compression,
    header_row,
    index_sessions,
    render_summary,
    row_for,
)
from actors.store._projection_cache import ProjectionCache
from tests.actors.store.test_session_store import header_record, realize_fixtures

_SUPPORT = "packages__test-support__acp-snapshot__tests__fixtures__"
# The ten fixtures upstream's own loader rejects (session-log-format.md §13).
ROOT = Path(__file__).resolve().parents[3]
UPSTREAM_REJECTS = {
    "apps__web__tests__snapshots__cordis-tool-round__session.jsonl",
    *(
        _SUPPORT + name
        for name in (
            "record-suite__rec-child__session.1.jsonl",
            "record-suite__rec-child__session.jsonl",
            "record-suite__rec-pin__session.1.jsonl",
            "record-suite__rec-pin__session.jsonl",
            "suite__authored-error__session.jsonl",
            "suite__pin-turn__session.jsonl",
            "suite__plain-turn__session.1.jsonl",
            "suite__plain-turn__session.jsonl",
            "suite__shared-pin__session.jsonl",
        )
    ),
}


@pytest.fixture
def dsh_root(tmp_path: Path) -> dict[str, Path]:
    """The real fixtures laid out as a DSH sessions root; fixture name to its new path."""
    return realize_fixtures(tmp_path / "dsh")


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[ProjectionCache]:
    opened = ProjectionCache.open(tmp_path / "cache.sqlite3")
    yield opened
    opened.close()


def root_of(placed: dict[str, Path]) -> Path:
    return next(iter(placed.values())).parents[2]


class CountingLoad:
    """Counts the transcripts the indexer reads."""

    def __init__(self) -> None:
        self.paths: list[Path] = []

    def __call__(self, path: Path, **options: Any) -> Any:
        self.paths.append(Path(path))
        return load_session(path, **options)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> CountingLoad:
    counter = CountingLoad()
    monkeypatch.setattr(indexing, "load_session", counter)
    return counter


def test_real_fixtures_index_with_upstreams_rejections(
    dsh_root: dict[str, Path], cache: ProjectionCache
) -> None:
    """159 fixtures are indexed exactly as a full load sees them; the ten upstream rejects are
    rejected with the loader's reason and their path, and listed by their header all the same
    (a row with the header's facts, nothing projected, and the reason)."""
    summary = index_sessions(root_of(dsh_root), cache)
    assert (summary.found, summary.indexed, summary.unchanged) == (169, 169, 0)
    assert summary.compression == "none"
    by_path = {rejection.path: rejection.reason for rejection in summary.rejected}
    assert set(by_path) == {str(dsh_root[name]) for name in UPSTREAM_REJECTS}
    assert all(rejection.listed for rejection in summary.rejected)
    assert all("failed validation" in reason for reason in by_path.values())
    cordis = by_path[str(dsh_root["apps__web__tests__snapshots__cordis-tool-round__session.jsonl"])]
    assert "sourceEventSeqs must reference earlier events" in cordis
    root_id = cache.root_id(root_of(dsh_root), "none")
    for name, path in dsh_root.items():
        stat = path.stat()
        if name in UPSTREAM_REJECTS:
            header = SessionHeader.from_record(header_record(path))
            assert cache.get(header.id) == header_row(
                header, str(path), root_id, stat.st_size, stat.st_mtime_ns,
                load_error=by_path[str(path)],
            )  # fmt: skip
            continue
        loaded = load_session(path)
        assert cache.get(loaded.header.id) == row_for(
            loaded, root_id, stat.st_size, stat.st_mtime_ns
        )
    rows = cache.list_page([root_id], limit=1000)
    assert [r.created_at for r in rows] == sorted((r.created_at for r in rows), reverse=True)


def test_a_second_run_reads_nothing(
    dsh_root: dict[str, Path], cache: ProjectionCache, reads: CountingLoad
) -> None:
    """Unchanged files (indexed or rejected) are recognized by size and mtime and not read."""
    root = root_of(dsh_root)
    index_sessions(root, cache)
    assert len(reads.paths) == 169
    again = index_sessions(root, cache)
    assert len(reads.paths) == 169
    assert (again.indexed, again.unchanged, len(again.rejected)) == (0, 169, 10)
    assert all(rejection.listed for rejection in again.rejected)


def test_only_changed_files_are_read_again(
    dsh_root: dict[str, Path], cache: ProjectionCache, reads: CountingLoad
) -> None:
    """An appended-to file is re-read (its new title lands in the cache); a deleted file's row
    and a deleted reject's record are dropped."""
    root = root_of(dsh_root)
    index_sessions(root, cache)
    changed = dsh_root["examples__acp-agent__tests__snapshots__text-turn__session.jsonl"]
    with SessionLogWriter.open(changed) as writer:
        writer.set_title("Renamed by hand")
    gone = dsh_root["examples__acp-agent__tests__snapshots__cancel__session.jsonl"]
    gone_id = header_record(gone)["id"]
    gone.unlink()
    rejected_gone = dsh_root[next(iter(sorted(UPSTREAM_REJECTS)))]
    rejected_gone_id = header_record(rejected_gone)["id"]
    rejected_gone.unlink()
    reads.paths.clear()
    summary = index_sessions(root, cache)
    assert reads.paths == [changed]
    assert (summary.found, summary.indexed, summary.unchanged, summary.removed) == (167, 1, 166, 2)
    assert len(summary.rejected) == 9
    row = cache.get(header_record(changed)["id"])
    assert row is not None and row.title == "Renamed by hand"
    assert cache.get(gone_id) is None
    assert cache.get(rejected_gone_id) is None
    assert str(rejected_gone) not in cache.load_errors(cache.root_id(root, "none"))


def _write_log(path: Path, session_id: str, cwd: str | None) -> None:
    with SessionLogWriter.create(path, SessionHeader(id=session_id, created_at=1, cwd=cwd)) as w:
        w.set_title(f"title of {session_id}")


def test_layout_problems_reject_single_files(tmp_path: Path, cache: ProjectionCache) -> None:
    """A flat-layout file, a transcript of the other encoding, a header naming another
    directory and a duplicate id are each rejected with a reason; the rest is indexed."""
    root = tmp_path / "root"
    _write_log(log_path(root, "/w", "good"), "good", "/w")
    _write_log(log_path(root, "/w", "dup"), "dup", "/w")
    misplaced = root / "--w--" / "elsewhere" / "session.jsonl.zstd"
    _write_log(misplaced, "dup", "/w")  # same id, and not where its header says
    other = log_path(root, "/other", "moved")
    _write_log(other, "moved", "/somewhere-else")
    flat = root / "--w--" / "flat.jsonl.zstd"
    flat.write_bytes(b"")
    raw = root / "--w--" / "raw" / "session.jsonl"
    raw.parent.mkdir()
    raw.write_bytes(b"")
    summary = index_sessions(root, cache, compression="zstd")
    reasons = {Path(r.path).relative_to(root).as_posix(): r.reason for r in summary.rejected}
    assert set(reasons) == {
        "--w--/flat.jsonl.zstd",
        "--w--/raw/session.jsonl",
        "--w--/elsewhere/session.jsonl.zstd",
        "--other--/moved/session.jsonl.zstd",
    }
    assert "retired flat layout" in reasons["--w--/flat.jsonl.zstd"]
    assert "configured for compression 'zstd'" in reasons["--w--/raw/session.jsonl"]
    assert "does not sit where its header says" in reasons["--w--/elsewhere/session.jsonl.zstd"]
    assert "does not sit where its header says" in reasons["--other--/moved/session.jsonl.zstd"]
    assert sorted(r.session_id for r in cache.list_page([1], limit=10)) == ["dup", "good"]


def test_duplicate_ids_across_roots_are_rejected(tmp_path: Path, cache: ProjectionCache) -> None:
    """An id already indexed from another root (whose file exists) is not taken over."""
    first, second = tmp_path / "one", tmp_path / "two"
    _write_log(log_path(first, "/w", "same"), "same", "/w")
    _write_log(log_path(second, "/w", "same"), "same", "/w")
    index_sessions(first, cache)
    summary = index_sessions(second, cache)
    where = log_path(first.resolve(), "/w", "same")
    assert [r.reason for r in summary.rejected] == [
        f'duplicate session id "same" (already indexed at {where})'
    ]


def test_progress_is_reported_per_transcript(tmp_path: Path, cache: ProjectionCache) -> None:
    """The callback sees 0 of N first, then every transcript once, ending at N of N."""
    root = tmp_path / "root"
    for n in range(5):
        _write_log(log_path(root, "/w", f"s{n}"), f"s{n}", "/w")
    seen: list[IndexProgress] = []
    index_sessions(root, cache, progress=seen.append)
    assert [(p.done, p.total) for p in seen] == [(n, 5) for n in range(6)]
    assert seen[0].path is None and all(p.path for p in seen[1:])


def test_detect_compression(tmp_path: Path) -> None:
    """The first transcript decides; an empty root defaults to zstd."""
    assert detect_compression(tmp_path) == "zstd"
    _write_log(log_path(tmp_path, None, "x", "none"), "x", None)
    assert detect_compression(tmp_path) == "none"


def test_a_missing_root_is_an_error(tmp_path: Path, cache: ProjectionCache) -> None:
    """Indexing something that is not a directory fails clearly, naming it."""
    with pytest.raises(IndexingError, match="nope: not a sessions directory"):
        index_sessions(tmp_path / "nope", cache)


def test_summary_text_and_progress_bar(tmp_path: Path, cache: ProjectionCache) -> None:
    """The summary lists counts and each rejection; the bar draws only on a terminal."""
    root = tmp_path / "root"
    _write_log(log_path(root, "/w", "ok"), "ok", "/w")
    (root / "--w--" / "flat.jsonl.zstd").write_bytes(b"")
    text = render_summary(index_sessions(root, cache))
    assert text.startswith(f"indexed {root.resolve()} (zstd): 1 transcripts, 1 read")
    assert "1 rejected" in text and "rejected " + str(root / "--w--" / "flat.jsonl.zstd") in text
    quiet = io.StringIO()
    ProgressBar(quiet)(IndexProgress(done=1, total=1))
    assert quiet.getvalue() == ""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    bar = ProgressBar(terminal, width=10)
    bar(IndexProgress(done=1, total=2))
    bar(IndexProgress(done=2, total=2))
    assert terminal.getvalue().endswith("\r[##########] 2/2\n")


def test_indexing_survives_a_file_vanishing_midway(
    tmp_path: Path, cache: ProjectionCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transcript deleted between the walk and its read is skipped, not fatal."""
    root = tmp_path / "root"
    for n in range(3):
        _write_log(log_path(root, "/w", f"s{n}"), f"s{n}", "/w")
    victim = log_path(root, "/w", "s1")
    real_walk = indexing._walk

    def walk_then_delete(*args: Any) -> Any:
        found = real_walk(*args)
        victim.unlink()
        return found

    monkeypatch.setattr(indexing, "_walk", walk_then_delete)
    summary = index_sessions(root, cache)
    assert (summary.found, summary.indexed) == (3, 2)


def test_index_command_builds_then_refreshes_incrementally(
    tmp_path: Path, dsh_root: dict[str, Path]
) -> None:
    """``agent-actors index --sessions DIR`` indexes every fixture, prints the summary with
    each rejection and its reason, and a second run re-reads nothing."""
    root = tmp_path / "dsh"
    argv = [sys.executable, "-m", "actors", "index", "--sessions", str(root)]
    argv += ["--data", str(tmp_path / "data")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run() -> str:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    total = len(dsh_root)
    first = run()
    assert f": {total} transcripts, {total} read, 0 unchanged, 10 rejected (10 listed by " in first
    for name in UPSTREAM_REJECTS:
        assert f"  rejected (listed by header) {dsh_root[name]}: " in first
    assert "failed validation: Error: seed request/header at index 0 lacks provider/model" in first
    second = run()
    # Rejected files that did not change are not re-read either; their reasons are kept.
    assert f": {total} transcripts, 0 read, {total} unchanged, 10 rejected (10 listed" in second
    assert second.count("  rejected (listed by header) ") == 10
    cache = ProjectionCache.open(tmp_path / "data" / "sessions.sqlite3")
    try:
        assert cache.count() == total
    finally:
        cache.close()
