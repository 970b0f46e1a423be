"""The SQLite projection cache: rows, newest-first listing and paging, roots, rejections,
model routes, schema upgrades (issue 3, item 4)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.store._cache_rows import CachedSession, ListCursor
from actors.store._cache_schema import SCHEMA_VERSION
from actors.store._projection_cache import (
    ProjectionCache,
    ProjectionCacheError,
    RecordedModelRoute,
)


def row(session_id: str, created_at: int, root_id: int = 1, **more: Any) -> CachedSession:
    """A cache row whose transcript path does not exist (listing must never need it)."""
    return CachedSession(
        session_id=session_id,
        root_id=root_id,
        path=f"/nonexistent/{session_id}/session.jsonl.zstd",
        created_at=created_at,
        **more,
    )


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[ProjectionCache]:
    opened = ProjectionCache.open(tmp_path / "cache.sqlite3")
    yield opened
    opened.close()


def ids(rows: list[CachedSession]) -> list[str]:
    return [r.session_id for r in rows]


def test_rows_round_trip(cache: ProjectionCache) -> None:
    """Every column comes back as written; upsert replaces by id."""
    full = row(
        "a",
        5,
        cwd="/w",
        parent_session="p",
        origin="subagent",
        title="T",
        subagent_label="L",
        last_seq=41,
        file_size=1234,
        file_mtime_ns=99,
        load_error="failed validation",
    )
    cache.upsert([full])
    assert cache.get("a") == full
    cache.upsert([row("a", 6)])
    assert cache.get("a") == row("a", 6)
    assert cache.get("missing") is None


def test_listing_is_newest_first_with_ties_by_id(cache: ProjectionCache) -> None:
    """``createdAt`` descending, then id ascending, as upstream's query layer sorts."""
    cache.upsert([row("b", 10), row("a", 10), row("c", 30), row("d", 20), row("e", 10)])
    assert ids(cache.list_page([1], limit=10)) == ["c", "d", "a", "b", "e"]


def test_pages_continue_exactly_after_the_cursor(cache: ProjectionCache) -> None:
    """Walking pages of every size visits each row once, in order, including across ties."""
    rows = [row(f"s{i:03d}", created_at=i // 7) for i in range(100)]
    cache.upsert(rows)
    whole = ids(cache.list_page([1], limit=1000))
    assert whole == [
        r.session_id for r in sorted(rows, key=lambda r: (-r.created_at, r.session_id))
    ]
    for size in (1, 3, 7, 50):
        walked: list[str] = []
        cursor = None
        while True:
            page = cache.list_page([1], limit=size, after=cursor)
            if not page:
                break
            walked += ids(page)
            cursor = ListCursor(page[-1].created_at, page[-1].session_id)
        assert walked == whole


def test_listing_only_shows_served_roots(cache: ProjectionCache, tmp_path: Path) -> None:
    """Rows of roots not being served are skipped; roots get stable ids per path."""
    first = cache.root_id(tmp_path / "a", "zstd")
    second = cache.root_id(tmp_path / "b", "none")
    assert cache.root_id(tmp_path / "a", "zstd") == first != second
    with pytest.raises(ProjectionCacheError, match="indexed as compression 'zstd'"):
        cache.root_id(tmp_path / "a", "none")
    cache.upsert([row("x", 1, root_id=first), row("y", 2, root_id=second)])
    assert ids(cache.list_page([first], limit=5)) == ["x"]
    assert ids(cache.list_page([first, second], limit=5)) == ["y", "x"]
    assert cache.list_page([], limit=5) == []
    assert cache.count([second]) == 1


def test_listing_uses_the_index_without_sorting(cache: ProjectionCache) -> None:
    """The query plan walks ``sessions_newest``; no temporary B-tree sorts the rows."""
    db = sqlite3.connect(cache.path)
    try:
        plan = db.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM sessions INDEXED BY sessions_newest "
            "WHERE root_id IN (1, 2) AND created_at <= 5 AND (created_at < 5 OR id > 'x') "
            "ORDER BY created_at DESC, id ASC LIMIT 100"
        ).fetchall()
    finally:
        db.close()
    text = " ".join(str(step[-1]) for step in plan)
    assert "sessions_newest" in text
    assert "TEMP B-TREE" not in text


def test_listing_100000_sessions_is_fast_and_needs_no_log(cache: ProjectionCache) -> None:
    """With 100,000 rows (no transcript exists) a page comes back in well under 5 ms."""
    cache.upsert(row(f"s{i:06d}", created_at=i % 5000) for i in range(100_000))
    cursor = ListCursor(2500, "s050000")
    samples = []
    for _ in range(50):
        started = time.perf_counter()
        page = cache.list_page([1], limit=100, after=cursor)
        samples.append(time.perf_counter() - started)
    assert len(page) == 100
    assert sorted(samples)[len(samples) // 2] < 0.005


def test_update_progress_touches_only_its_fields(cache: ProjectionCache) -> None:
    """The owning actor's update changes title, label, last seq, size and mtime only."""
    cache.upsert([row("a", 5, cwd="/w")])
    before = cache.revision()
    cache.update_progress(
        "a", title="T", subagent_label=None, last_seq=3, file_size=10, file_mtime_ns=11
    )
    assert cache.get("a") == row(
        "a", 5, cwd="/w", title="T", last_seq=3, file_size=10, file_mtime_ns=11
    )
    assert cache.revision() == before + 1


def test_noted_progress_is_committed_at_once_while_the_writer_is_free(
    cache: ProjectionCache,
) -> None:
    """An append that changed no title or label notes its progress: committed by the caller
    when nobody else writes, without bumping the listing revision."""
    cache.upsert([row("a", 5, cwd="/w", title="T")])
    before = cache.revision()
    cache.note_progress("a", last_seq=3, file_size=10, file_mtime_ns=11)
    assert cache.get("a") == row(
        "a", 5, cwd="/w", title="T", last_seq=3, file_size=10, file_mtime_ns=11
    )
    assert cache.revision() == before


def test_progress_noted_during_another_write_is_committed_by_that_writer(
    cache: ProjectionCache,
) -> None:
    """Group commit: while another thread's transaction holds the writer, noting progress
    returns at once (it does not queue for a transaction of its own), and the holder commits
    it once its own transaction is done; the last note of a session wins."""
    cache.upsert([row("a", 5), row("b", 6)])
    holding, release = threading.Event(), threading.Event()

    def other_write() -> None:
        with cache._write(listing_changed=False) as db:
            db.execute("UPDATE sessions SET file_size = 1 WHERE id = 'b'")
            holding.set()
            release.wait(10)

    writer = threading.Thread(target=other_write)
    writer.start()
    try:
        assert holding.wait(10)
        noter = threading.Thread(
            target=lambda: [
                cache.note_progress("a", last_seq=n, file_size=10 * n, file_mtime_ns=n)
                for n in (1, 2)
            ]
        )
        noter.start()
        noter.join(5)
        assert not noter.is_alive(), "noting progress waited for the other write"
        assert cache.get("a") == row("a", 5)  # not committed yet
    finally:
        release.set()
        writer.join(10)
    assert cache.get("a") == row("a", 5, last_seq=2, file_size=20, file_mtime_ns=2)
    assert cache.get("b") == row("b", 6, file_size=1)


def test_close_commits_the_progress_still_noted(tmp_path: Path) -> None:
    cache = ProjectionCache.open(tmp_path / "cache.sqlite3")
    cache.upsert([row("a", 5)])
    with cache._write_lock:  # a writer in the middle of its transaction
        cache.note_progress("a", last_seq=7, file_size=70, file_mtime_ns=7)
    cache.close()
    reopened = ProjectionCache.open(tmp_path / "cache.sqlite3")
    try:
        assert reopened.get("a") == row("a", 5, last_seq=7, file_size=70, file_mtime_ns=7)
    finally:
        reopened.close()


def test_summaries_feed_session_reference_discovery(cache: ProjectionCache) -> None:
    """Summaries carry title as label and the subagent label as display title, newest first."""
    cache.upsert([row("a", 1, title="Old"), row("b", 2, cwd="/w", subagent_label="Child")])
    summaries = cache.summaries([1])
    assert [(s.session_id, s.label, s.display_title, s.cwd) for s in summaries] == [
        ("b", None, "Child", "/w"),
        ("a", "Old", None, None),
    ]


def test_rejections_are_remembered_and_replaced_by_a_row(cache: ProjectionCache) -> None:
    """A rejected path keeps its reason until it is indexed or forgotten; rejecting an indexed
    path drops its row."""
    cache.upsert([row("a", 1)])
    path = row("a", 1).path
    cache.reject(1, path, file_size=1, file_mtime_ns=2, reason="corrupt")
    assert cache.get("a") is None
    assert cache.rejected_of_root(1) == {path: (1, 2, "corrupt")}
    cache.upsert([row("a", 1)])
    assert cache.rejected_of_root(1) == {}
    cache.reject(1, "/gone", file_size=1, file_mtime_ns=2, reason="bad")
    cache.forget_rejections(["/gone"])
    assert cache.rejected_of_root(1) == {}


def test_load_errors_name_the_listed_rows_whose_body_failed(cache: ProjectionCache) -> None:
    """Rows listed by their header alone are found per root with their reason; a later row
    for the same id that loads clears it."""
    cache.upsert([row("ok", 1), row("bad", 2, load_error="corrupt"), row("x", 3, root_id=2)])
    assert cache.load_errors(1) == {row("bad", 2).path: "corrupt"}
    assert ids(cache.list_page([1], limit=10)) == ["bad", "ok"]
    cache.upsert([row("bad", 2, title="Loads now")])
    assert cache.load_errors(1) == {}


def test_model_routes_are_kept(cache: ProjectionCache) -> None:
    """A route is stored with its recording time and replaced by the next one."""
    assert cache.model_route("a") is None
    first = cache.set_model_route("a", RecordedModelRoute(provider="p", model="m"))
    assert first.updated_at > 0 and cache.model_route("a") == first
    second = cache.set_model_route(
        "a", RecordedModelRoute(provider="p", model="n", context_window=8000)
    )
    assert cache.model_route("a") == second


def test_another_schema_version_rebuilds_derived_tables_but_keeps_routes(tmp_path: Path) -> None:
    """A cache written by another layout is dropped and rebuilt; recorded routes survive."""
    path = tmp_path / "cache.sqlite3"
    cache = ProjectionCache.open(path)
    cache.upsert([row("a", 1)])
    cache.set_model_route("a", RecordedModelRoute(provider="p", model="m"))
    cache.close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    reopened = ProjectionCache.open(path)
    try:
        assert reopened.get("a") is None
        route = reopened.model_route("a")
        assert route is not None and route.model == "m"
    finally:
        reopened.close()


def test_a_version_1_cache_is_rebuilt_with_load_errors(tmp_path: Path) -> None:
    """A cache of the first layout (no ``load_error`` column) is dropped and rebuilt, so rows
    listed by their header alone can be written to it."""
    path = tmp_path / "cache.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, root_id INTEGER NOT NULL, path TEXT NOT "
        "NULL, cwd TEXT, created_at INTEGER NOT NULL, parent_session TEXT, origin TEXT, title "
        "TEXT, subagent_label TEXT, last_seq INTEGER, file_size INTEGER NOT NULL, file_mtime_ns "
        "INTEGER NOT NULL) STRICT; PRAGMA user_version = 1;"
    )
    db.close()
    cache = ProjectionCache.open(path)
    try:
        cache.upsert([row("bad", 2, load_error="corrupt")])
        assert cache.get("bad") == row("bad", 2, load_error="corrupt")
    finally:
        cache.close()


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    """Opening garbage names the file."""
    path = tmp_path / "cache.sqlite3"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ProjectionCacheError, match=r"cache\.sqlite3: cannot open projection cache"):
        ProjectionCache.open(path)


def _open_at(path: str, start_at: float) -> str:
    """Child process: wait for the common start time, open the cache, report."""
    while time.time() < start_at:
        pass
    try:
        ProjectionCache.open(path).close()
    except ProjectionCacheError as exc:
        return str(exc)
    return "ok"


def test_processes_opening_one_new_cache_at_once_all_succeed(tmp_path: Path) -> None:
    """Workers starting together open one new file at once: SQLite answers some of them
    "database is locked" without waiting (the WAL switch, the schema); each still opens."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    failures = []
    with context.Pool(6) as pool:
        for round_ in range(10):
            path = str(tmp_path / f"round{round_}" / "sessions.sqlite3")
            start_at = time.time() + 1.0
            results = pool.starmap(_open_at, [(path, start_at)] * 6)
            failures += [r for r in results if r != "ok"]
    assert failures == []
