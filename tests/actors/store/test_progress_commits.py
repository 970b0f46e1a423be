"""The projection cache's progress rows are committed after the appends' replies while the
server's `ProgressCommits` task runs; listings still change before the reply."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import trio

from actors._store_services import SessionServices
from actors.store._cache_rows import CachedSession
from actors.store._events import title_event
from actors.store._session_store import SessionStore
from tests.actors.store._writing import prompt, writing_session


async def committed(store: SessionStore, last_seq: int) -> CachedSession:
    """The session's row once it shows ``last_seq``."""
    with trio.fail_after(30):
        while (row := store.cache.get("s1")) is None or row.last_seq != last_seq:
            await trio.sleep(0.01)
    return row


@contextmanager
def cache_locked_by_another_process(services: SessionServices) -> Iterator[None]:
    """Hold the cache's write lock from another connection (as another worker's transaction,
    or an indexer, would) for the duration."""
    other = sqlite3.connect(services.cache.path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield
        other.execute("COMMIT")
    finally:
        other.close()


async def test_an_append_is_answered_while_another_process_holds_the_cache(
    services: SessionServices,
) -> None:
    """With the committer running, an append is answered once its batch is written: its
    progress row is committed afterwards, so a cache locked elsewhere (SQLite would make the
    commit wait up to its 10 s busy timeout) does not hold the reply; the row catches up
    once the cache is free."""
    store = services.directory
    async with trio.open_nursery() as nursery:
        await nursery.start(services.run)
        state = await writing_session(services)
        await committed(store, 0)
        with cache_locked_by_another_process(services):
            with trio.fail_after(5):
                outcome = await state.append(prompt("second"))
            row = store.cache.get("s1")
            assert row is not None and row.last_seq == outcome.seqs[0] - 1
        row = await committed(store, outcome.seqs[0])
        assert row.file_size == state.path.stat().st_size
        nursery.cancel_scope.cancel()


async def test_a_title_is_listed_before_the_reply(services: SessionServices) -> None:
    """An append that changes what a listing shows commits its row before it is answered,
    committer or not: the listing a host reads next has the new title."""
    store = services.directory
    async with trio.open_nursery() as nursery:
        await nursery.start(services.run)
        state = await writing_session(services)
        await state.append([title_event("Renamed")])
        row = store.cache.get("s1")
        assert row is not None and row.title == "Renamed" and row.last_seq == 1
        nursery.cancel_scope.cancel()


async def test_without_the_committer_an_append_commits_its_row_before_the_reply(
    services: SessionServices,
) -> None:
    """A store used on its own (no `SessionServices.run`) leaves nothing only noted."""
    state = await writing_session(services)
    outcome = await state.append(prompt("second"))
    row = services.cache.get("s1")
    assert row is not None and row.last_seq == outcome.seqs[0]
