"""The session store and the state it hands to agent actors: create, load, append, snapshot,
single writer, durability modes, projection-cache upkeep (issue 3, items 3 to 5)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actors._store_services import SessionServices, build_session_services
from actors.session_log._header import SessionHeader
from actors.session_log._layout import log_path
from actors.session_log._reader import load_session
from actors.session_log._zstd import scan_frames
from actors.store._events import AppendRejectedError, EventInput, title_event
from actors.store._projection_cache import ProjectionCacheError, RecordedModelRoute
from actors.store._session_store import SessionStore
from actors.store._state import SessionState
from wire import (
    AgentBusyError,
    ArgumentsInvalidError,
    InternalError,
    UnauthorizedError,
    UnavailableError,
)

FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "dsh-sessions"
MODEL = {"kind": "model", "provider": "p", "model": "m"}


def turn(number: int) -> list[EventInput]:
    """One complete turn of ten events: a prompt, four text chunks, an answer."""
    prompt = {
        "id": f"u{number}",
        "role": "user",
        "content": [{"type": "text", "text": f"question {number}"}],
        "source": {"kind": "user"},
    }
    answer = {
        "turn": number,
        "step": 1,
        "message": {
            "id": f"a{number}",
            "role": "assistant",
            "content": [{"type": "text", "text": f"answer {number}"}],
            "source": MODEL,
        },
    }
    chunks = [
        EventInput(
            type="assistant/chunk",
            data={
                "turn": number,
                "step": 1,
                "chunk": {"type": "text-delta", "index": 0, "text": f"part {k}"},
            },
        )
        for k in range(4)
    ]
    return [
        EventInput(type="turn/start", data={"turn": number}),
        EventInput(type="step/start", data={"turn": number, "step": 1}),
        EventInput(type="user/message", data=prompt, surface_op="append"),
        *chunks,
        EventInput(type="assistant/message", data=answer, surface_op="append"),
        EventInput(type="step/end", data={"turn": number, "step": 1}),
        EventInput(type="turn/end", data={"turn": number, "reason": {"kind": "completed"}}),
    ]


def header(
    session_id: str = "s1", cwd: str | None = "/projects/demo", **more: Any
) -> SessionHeader:
    """A header with a fixed creation time."""
    return SessionHeader(id=session_id, created_at=1_767_225_600_000, cwd=cwd, **more)


async def open_services(data: Path, **options: Any) -> SessionServices:
    """Services over ``data`` without the start-up re-index (tests index explicitly)."""
    options.setdefault("index_on_start", False)
    return build_session_services(data, **options)


@pytest.fixture
def store(services: SessionServices) -> SessionStore:
    return services.directory


async def new_session(store: SessionStore, session_id: str = "s1", **more: Any) -> SessionState:
    """Create a session and activate it."""
    await store.create(header(session_id, **more))
    state = await store.load(session_id)
    assert state is not None
    return state


def header_record(path: Path) -> dict[str, Any]:
    """The first line of a raw transcript, parsed."""
    with path.open("rb") as file:
        record: dict[str, Any] = json.loads(file.readline())
    return record


def realize_fixtures(root: Path) -> dict[str, Path]:
    """Lay the real DSH fixtures out as a DSH sessions root (raw encoding) under ``root``;
    returns each fixture's new path by its file name."""
    if not FIXTURES.is_dir():
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    placed = {}
    for source in sorted(FIXTURES.iterdir()):
        record = header_record(source)
        target = log_path(root, record.get("cwd"), record["id"], "none")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        placed[source.name] = target
    return placed


# --- create and load ---


async def test_create_publishes_a_header_only_log_that_loads(store: SessionStore) -> None:
    """A created session is a one-frame zstd log at its DSH path that the reader loads as an
    empty session, and the cache lists it at once."""
    row = await store.create(header("s1", agent_preset="coder"))
    path = Path(row.path)
    assert path == log_path(store.roots[0].path, "/projects/demo", "s1")
    assert len(scan_frames(await trio.Path(path).read_bytes()).frames) == 1
    loaded = load_session(path, expected_id="s1")
    assert loaded.header == header("s1", agent_preset="coder")
    assert (len(loaded.events), loaded.captured_through_seq) == (0, None)
    assert [r.session_id for r in store.list_page(limit=10)] == ["s1"]


async def test_create_refuses_duplicates_and_invalid_headers(store: SessionStore) -> None:
    """An existing id (even under another cwd) and a relative cwd are argument errors."""
    await store.create(header("s1"))
    with pytest.raises(ArgumentsInvalidError, match=r'^session "s1" already exists$'):
        await store.create(header("s1", cwd="/elsewhere"))
    with pytest.raises(ArgumentsInvalidError, match="cwd must be an absolute path"):
        await store.create(header("s2", cwd="relative/dir"))
    with pytest.raises(ArgumentsInvalidError, match="must not be empty"):
        await store.create(header(""))


async def test_load_of_an_unknown_id_is_none(store: SessionStore) -> None:
    """No transcript anywhere: the directory answers None (the runtime's session-not-found)."""
    assert await store.load("nope") is None
    assert await store.load("") is None


async def test_one_live_state_per_id(store: SessionStore) -> None:
    """Concurrent loads share one state; after it closes, the next load builds a new one."""
    await store.create(header("s1"))
    states: list[SessionState | None] = []
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(lambda: _load_into(store, states))
    assert len({id(s) for s in states}) == 1
    first = states[0]
    assert first is not None
    await first.aclose()
    again = await store.load("s1")
    assert again is not None and again is not first
    assert store.live_states() == [again]


async def _load_into(store: SessionStore, out: list[SessionState | None]) -> None:
    out.append(await store.load("s1"))


async def test_a_load_during_passivation_waits_for_the_lock(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load that arrives while the old state is still closing waits for it, so the new
    state writes at once instead of finding the old lock held."""
    state = await new_session(store)
    await state.append(turn(1))
    real_close = SessionState._close_sync

    def slow_close(self: SessionState, side: Any) -> None:
        time.sleep(0.2)
        real_close(self, side)

    monkeypatch.setattr(SessionState, "_close_sync", slow_close)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(state.aclose)
            await trio.testing.wait_all_tasks_blocked()
            fresh = await store.load("s1")
            assert fresh is not None and fresh is not state and state.closed
            assert (await fresh.append(turn(2))).seqs[0] == 10


async def test_a_session_found_on_disk_but_not_in_the_cache_is_loaded_and_indexed(
    tmp_path: Path,
) -> None:
    """Loading scans the roots when the cache has no row, then records the row."""
    first = await open_services(tmp_path / "data")
    state = await new_session(first.directory)
    await state.append(turn(1))
    await first.aclose()
    (tmp_path / "data" / "sessions.sqlite3").unlink()
    second = await open_services(tmp_path / "data")
    try:
        assert second.cache.get("s1") is None
        state = await second.directory.load("s1")
        assert state is not None and state.captured_through_seq == 9
        row = second.cache.get("s1")
        assert row is not None and row.last_seq == 9
    finally:
        await second.aclose()


async def test_a_corrupt_log_fails_with_upstream_wording(store: SessionStore) -> None:
    """A damaged committed line is reported as upstream's query layer words it, with the file."""
    state = await new_session(store)
    await state.append(turn(1))
    await state.append(turn(2))
    path = state.path
    await state.aclose()
    # Rewrite as a damaged raw log is impossible under zstd; corrupt a complete frame instead.
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(
        InternalError, match=r'^failed to inspect session "s1": .*raw log: '
    ) as caught:
        await store.load("s1")
    assert caught.value.details["path"] == str(path)


# --- appending and reading ---


async def test_appends_round_trip_through_the_log(tmp_path: Path, store: SessionStore) -> None:
    """Appended events get contiguous seqs; the snapshot equals a cold read of the log, also
    from a new store after a restart."""
    state = await new_session(store)
    first = await state.append(turn(1))
    second = await state.append(turn(2))
    assert first.seqs == tuple(range(10)) and second.seqs == tuple(range(10, 20))
    assert first.persisted == "fsync"
    live = await state.snapshot()
    cold = load_session(state.path).surface_snapshot()
    assert live == cold
    assert live.captured_through_seq == 19
    assert [e["seq"] for e in live.events] == [2, 7, 12, 17]
    await store.aclose()
    reopened = await open_services(tmp_path / "data")
    try:
        again = await reopened.directory.load("s1")
        assert again is not None and await again.snapshot() == live
    finally:
        await reopened.aclose()


async def test_a_rejected_batch_leaves_log_and_state_unchanged(store: SessionStore) -> None:
    """A bad event at index 2 rejects the batch: same bytes on disk, same snapshot, and the
    next batch continues at the next seq."""
    state = await new_session(store)
    await state.append(turn(1))
    before_bytes = state.path.read_bytes()
    before = await state.snapshot()
    bad = [*turn(2)[:2], EventInput(type="user/message", data={"no": "shape"}, surface_op="append")]
    with pytest.raises(AppendRejectedError) as caught:
        await state.append(bad)
    assert (caught.value.index, caught.value.seq) == (2, 12)
    assert state.path.read_bytes() == before_bytes
    assert await state.snapshot() == before
    assert (await state.append(turn(2))).seqs[0] == 10


async def test_surface_replacement_is_folded_in_memory(store: SessionStore) -> None:
    """A compaction-style replace shadows its range in the live snapshot as in a cold read."""
    state = await new_session(store)
    await state.append(turn(1))
    checkpoint = {
        "id": "c1",
        "role": "user",
        "content": [{"type": "text", "text": "summary"}],
        "source": {"kind": "plugin", "plugin": "compact"},
    }
    replace = EventInput(
        type="user/message",
        data=checkpoint,
        surface_op={"op": "replace", "start": 2, "end": 7},
        source_event_seqs=[2, 7],
    )
    assert (await state.append([replace])).seqs == (10,)
    live = await state.snapshot()
    assert [e["seq"] for e in live.events] == [10]
    assert live == load_session(state.path).surface_snapshot()


async def test_title_label_and_cache_follow_every_append(store: SessionStore) -> None:
    """Each append updates the cache row: last seq, title, subagent label, file size and mtime."""
    state = await new_session(store, "child", parent_session="s0", origin="subagent")
    descriptor = {"version": 2, "mode": "continuable", "provider": "p", "label": "Recall codeword"}
    await state.append([EventInput(type="subagent/descriptor", data=descriptor)])
    await state.append([title_event("First title")])
    await state.append([title_event("Second title")])
    assert (state.title, state.subagent_label) == ("Second title", "Recall codeword")
    row = store.cache.get("child")
    stat = state.path.stat()
    assert row is not None
    assert (row.title, row.subagent_label, row.last_seq) == ("Second title", "Recall codeword", 2)
    assert (row.file_size, row.file_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    assert (row.parent_session, row.origin) == ("s0", "subagent")


async def test_model_route_persists_across_stores(tmp_path: Path) -> None:
    """A recorded route is kept in the data directory and comes back with the next activation."""
    first = await open_services(tmp_path / "data")
    state = await new_session(first.directory)
    stored = await state.set_model_route(
        RecordedModelRoute(provider="deepseek", model="chat", context_window=131072)
    )
    assert stored.updated_at > 0
    assert state.model_route == {"provider": "deepseek", "model": "chat", "contextWindow": 131072}
    await first.aclose()
    second = await open_services(tmp_path / "data")
    try:
        again = await second.directory.load("s1")
        assert again is not None and again.recorded_route == stored
    finally:
        await second.aclose()


async def test_snapshots_during_appends_see_whole_batches(store: SessionStore) -> None:
    """Snapshots taken while batches are being written (and fsync'd in a thread) always end
    on a batch boundary, and their events are exactly the cold-read surface at that seq."""
    state = await new_session(store)
    seen: list[int | None] = []

    async def writer() -> None:
        for number in range(1, 16):
            await state.append(turn(number))

    async def reader(done: trio.Event) -> None:
        while not done.is_set():
            snapshot = await state.snapshot()
            through = snapshot.captured_through_seq
            seen.append(through)
            assert through is None or (through + 1) % 10 == 0
            assert len(snapshot.events) == 2 * (0 if through is None else (through + 1) // 10)
            await trio.lowlevel.checkpoint()

    done = trio.Event()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader, done)
            await writer()
            done.set()
    assert len(set(seen)) > 3  # the reader really ran between the writes


async def test_a_reader_state_follows_another_writer(tmp_path: Path) -> None:
    """A store that is not the writer reloads the transcript when it changed on disk."""
    writer_side = await open_services(tmp_path / "data")
    reader_side = await open_services(tmp_path / "data")
    try:
        state = await new_session(writer_side.directory)
        await state.append(turn(1))
        observer = await reader_side.directory.load("s1")
        assert observer is not None and not observer.is_writer
        assert (await observer.snapshot()).captured_through_seq == 9
        await state.append(turn(2))
        assert (await observer.snapshot()).captured_through_seq == 19
        assert observer.title is None and not observer.is_writer
    finally:
        await writer_side.aclose()
        await reader_side.aclose()


async def test_second_writer_is_busy_until_the_first_releases(tmp_path: Path) -> None:
    """Two stores on one data directory: the second writer gets agent-busy naming the lock
    and the holder, nothing is written; after the first closes, the second writes on."""
    first = await open_services(tmp_path / "data")
    second = await open_services(tmp_path / "data")
    try:
        owner = await new_session(first.directory)
        await owner.append(turn(1))
        other = await second.directory.load("s1")
        assert other is not None
        before = owner.path.read_bytes()
        with pytest.raises(AgentBusyError, match=r'^session "s1" is being written by process \d+'):
            await other.append(turn(2))
        assert owner.path.read_bytes() == before
        await first.aclose()
        assert (await other.append(turn(2))).seqs[0] == 10
        assert other.is_writer
        assert load_session(owner.path).captured_through_seq == 19
    finally:
        await first.aclose()
        await second.aclose()


async def test_becoming_the_writer_reads_the_log_again_only_if_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader state turning writer reuses the log it loaded when the file is unchanged, and
    reloads it when another writer appended meanwhile (then continues after those events)."""
    import actors.session_log._writer as log_writer
    import actors.store._state as store_state

    reads: list[Path] = []

    def counting(path: Path, **kwargs: Any) -> Any:
        reads.append(path)
        return load_session(path, **kwargs)

    monkeypatch.setattr(store_state, "load_session", counting)
    monkeypatch.setattr(log_writer, "load_session", counting)
    first = await open_services(tmp_path / "data")
    state = await new_session(first.directory)
    await state.append(turn(1))
    await first.aclose()
    second = await open_services(tmp_path / "data")
    third = await open_services(tmp_path / "data")
    try:
        unchanged = await second.directory.load("s1")
        stale = await third.directory.load("s1")
        assert unchanged is not None and stale is not None
        assert (await unchanged.append(turn(2))).seqs[0] == 10
        assert reads == []
        await second.aclose()
        assert (await stale.append([title_event("later")])).seqs == (20,)
        assert reads == [stale.path]
        assert load_session(stale.path).captured_through_seq == 20
    finally:
        await second.aclose()
        await third.aclose()


async def test_resuming_an_open_turn_commits_closers(tmp_path: Path) -> None:
    """A writer that stopped inside a turn leaves an open turn; the next writer commits the
    synthetic closers (spec §6.4) and continues after them."""
    first = await open_services(tmp_path / "data")
    state = await new_session(first.directory)
    await state.append(turn(1)[:3])  # turn/start, step/start, user/message
    await first.aclose()
    second = await open_services(tmp_path / "data")
    try:
        resumed = await second.directory.load("s1")
        assert resumed is not None and resumed.captured_through_seq == 4  # closers in memory
        assert (await resumed.append([title_event("t")])).seqs == (5,)
        events = list(load_session(resumed.path).events)
        assert [e["type"] for e in events[3:]] == ["step/end", "turn/end", "session/title"]
        assert events[4]["data"]["reason"] == {"kind": "interrupted"}
    finally:
        await second.aclose()


async def test_closed_state_refuses_calls(store: SessionStore) -> None:
    """After passivation the state answers no calls; the runtime activates a new one."""
    state = await new_session(store)
    await state.aclose()
    await state.aclose()  # idempotent
    with pytest.raises(UnavailableError, match="passivated"):
        await state.append(turn(1))
    with pytest.raises(UnavailableError):
        await state.snapshot()


async def test_a_cache_failure_does_not_fail_a_written_append(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache is derived: when its update fails, the append (already on disk) still
    succeeds, so a client never retries and duplicates it."""
    state = await new_session(store)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise ProjectionCacheError("database is locked")

    monkeypatch.setattr(store.cache, "update_progress", broken)
    assert (await state.append(turn(1))).seqs[-1] == 9
    assert load_session(state.path).captured_through_seq == 9


# --- durability modes ---


async def test_flush_mode_writes_before_the_reply_without_fsync(tmp_path: Path) -> None:
    """``flush``: the reply says ``written`` and the events are already in the file."""
    services = await open_services(tmp_path / "data", durability="flush")
    try:
        state = await new_session(services.directory)
        assert (await state.append(turn(1))).persisted == "written"
        assert load_session(state.path).captured_through_seq == 9
    finally:
        await services.aclose()


async def test_write_behind_flushes_on_the_timer_and_at_close(tmp_path: Path) -> None:
    """``write-behind``: the reply comes before the write; the timer writes the batch within
    the delay, and close writes whatever is still pending."""
    services = await open_services(tmp_path / "data", durability="write-behind", batch_delay=0.05)
    try:
        state = await new_session(services.directory)
        outcome = await state.append(turn(1))
        assert outcome.persisted == "pending" and state.pending_since is not None
        assert load_session(state.path).captured_through_seq is None
        assert (await state.snapshot()).captured_through_seq == 9  # memory has it
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await nursery.start(services.run)
                while state.pending_since is not None:
                    await trio.sleep(0.01)
                nursery.cancel_scope.cancel()
        assert load_session(state.path).captured_through_seq == 9
        row = services.cache.get("s1")
        assert row is not None and row.last_seq == 9
        await state.append(turn(2))
    finally:
        await services.aclose()
    assert load_session(state.path).captured_through_seq == 19


# --- an existing DSH directory ---


async def test_read_only_dsh_root_serves_snapshots_and_refuses_writes(tmp_path: Path) -> None:
    """Sessions of a DSH directory served read-only load exactly as the reader loads them;
    appends are unauthorized and new sessions go to the embedded root."""
    root = tmp_path / "dsh"
    placed = realize_fixtures(root)
    services = await open_services(tmp_path / "data", sessions_dir=root, index_on_start=True)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(services.run)
            with trio.fail_after(30):
                while services.cache.count() < 159:
                    await trio.sleep(0.02)
            nursery.cancel_scope.cancel()
        store = services.directory
        sample = placed["examples__acp-agent__tests__snapshots__text-turn__session.jsonl"]
        session_id = header_record(sample)["id"]
        state = await store.load(session_id)
        assert state is not None and state.root.path == root.resolve()
        assert await state.snapshot() == load_session(sample).surface_snapshot()
        with pytest.raises(UnauthorizedError, match="served read-only"):
            await state.append([title_event("x")])
        corrupt = placed["apps__web__tests__snapshots__cordis-tool-round__session.jsonl"]
        corrupt_id = header_record(corrupt)["id"]
        with pytest.raises(InternalError, match=rf'^stored session "{corrupt_id}" is corrupt: '):
            await store.load(corrupt_id)
        created = await store.create(header("new-one"))
        assert Path(created.path).is_relative_to(tmp_path / "data" / "sessions")
    finally:
        await services.aclose()


async def test_writable_dsh_root_takes_new_sessions_and_appends(tmp_path: Path) -> None:
    """Served writable, a DSH directory receives new sessions and appends to existing ones."""
    root = tmp_path / "dsh"
    placed = realize_fixtures(root)
    services = await open_services(tmp_path / "data", sessions_dir=root, writable=True)
    try:
        store = services.directory
        created = await store.create(header("new-one"))
        assert Path(created.path).parent.parent.parent == root.resolve()
        assert created.path.endswith("session.jsonl")  # the root's encoding
        fixture = placed["examples__acp-agent__tests__snapshots__text-turn__session.jsonl"]
        state = await store.load(header_record(fixture)["id"])
        assert state is not None
        before = state.captured_through_seq
        assert before is not None
        outcome = await state.append([title_event("Renamed")])
        assert outcome.seqs == (before + 1,)
        assert load_session(fixture).captured_through_seq == before + 1
    finally:
        await services.aclose()
