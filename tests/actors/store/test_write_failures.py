"""The store on a disk that refuses writes: ``unavailable`` with the reason, nothing written
then or later, reads served, writes back once the disk is (issue 19, item 3).

Real faults: the data directory on a 4 MiB tmpfs that is filled up; each test skips with a
message where it cannot mount.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from actors._store_services import SessionServices
from actors.session_log._reader import load_session
from actors.store._events import EventInput, check_batch, title_event
from actors.store._fencing import batch_prefix
from actors.store._projection_cache import RecordedModelRoute
from actors.store._session_store import SessionStore
from actors.store._state import SessionState
from tests._disks import fill, free, tmpfs
from tests.actors.store.test_session_store import header, open_services
from wire import UnavailableError


@pytest.fixture
async def disk(tmp_path: Path) -> AsyncIterator[Path]:
    """A 4 MiB tmpfs, unmounted afterwards."""
    with tmpfs(tmp_path / "disk") as directory:
        yield directory


def message(text: str) -> EventInput:
    """One user message."""
    data = {
        "id": text[-12:],
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    return EventInput(type="user/message", data=data, surface_op="append")


def bulky(seed: int) -> str:
    """16 KiB of incompressible text: a batch holding it needs fresh blocks on any disk."""
    return base64.b64encode(os.urandom(12 * 1024)).decode() + f"/{seed}"


def logged_texts(path: Path) -> list[str]:
    """The user messages the log holds (and a reader sees)."""
    loaded = load_session(path)
    assert loaded.torn is None
    events: list[Any] = list(loaded.events)
    return [e["data"]["content"][0]["text"] for e in events if e["type"] == "user/message"]


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warning lines logged, after checking that none carries a traceback."""
    assert all(record.exc_info is None for record in caplog.records)
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_refused_appends_are_unavailable_and_never_written(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """On a full disk an append and a rename answer ``unavailable`` (no-space, ENOSPC, naming
    the session and the log), reads show only the durable events and title, and after space
    is freed the next append takes the next seq while the refused events never appear."""
    services = await open_services(disk / "data")
    try:
        store = services.directory
        await store.create(header("s1"))
        state = await store.load("s1")
        assert state is not None
        durable = await state.append([message("first"), title_event("kept")])
        fill(disk)
        with pytest.raises(UnavailableError) as refused:
            await state.append([message(bulky(1))])
        details = refused.value.details
        assert details["reason"] == "no-space" and details["errno"] == "ENOSPC"
        assert details["sessionId"] == "s1" and details["path"] == str(state.path)
        assert "s1" in refused.value.message and str(state.path) in refused.value.message
        with pytest.raises(UnavailableError):
            await state.append([title_event("lost " + bulky(2)[:60]), message(bulky(3))])
        assert state.captured_through_seq == durable.seqs[-1]
        assert state.title == "kept"
        snapshot = await state.snapshot()
        assert [e["seq"] for e in snapshot.events] == [durable.seqs[0]]
        free(disk)
        after = await state.append([message("after")])
        assert after.seqs == (durable.seqs[-1] + 1,)
        snapshot = await state.snapshot()
        assert [e["data"]["id"] for e in snapshot.events] == ["first", "after"]
    finally:
        await services.aclose()
    assert logged_texts(state.path) == ["first", "after"]
    warnings = no_tracebacks(caplog)
    assert len(warnings) == 2 and all("no-space" in w and "s1" in w for w in warnings)


async def test_create_on_a_full_disk_is_unavailable_and_leaves_nothing(disk: Path) -> None:
    """Creating a session on a full disk answers ``unavailable`` (no-space) and leaves no log;
    once space is freed the same id is created."""
    services = await open_services(disk / "data")
    try:
        store = services.directory
        fill(disk)
        with pytest.raises(UnavailableError) as refused:
            await store.create(header("s2"))
        assert refused.value.details["reason"] == "no-space"
        assert await store.load("s2") is None
        free(disk)
        await store.create(header("s2"))
        assert await store.load("s2") is not None
    finally:
        await services.aclose()


async def test_write_behind_keeps_a_refused_batch_and_writes_it_once(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Under write-behind an append is answered before its write, so a batch the disk refuses
    stays pending: the timer retries it (one warning per outage, no traceback) and writes it
    exactly once when space returns."""
    services = await open_services(disk / "data", durability="write-behind", batch_delay=0.0)
    try:
        store = services.directory
        await store.create(header("s3"))
        state = await store.load("s3")
        assert state is not None
        await state.append([message("first")])
        assert await store.flush_due(float("inf")) == 1
        fill(disk)
        text = bulky(4)
        outcome = await state.append([message(text)])
        assert outcome.persisted == "pending"
        for _ in range(3):
            assert await store.flush_due(float("inf")) == 0
        assert state.captured_through_seq == outcome.seqs[0]
        free(disk)
        assert await store.flush_due(float("inf")) == 1
    finally:
        await services.aclose()
    assert logged_texts(state.path) == ["first", text]
    warnings = no_tracebacks(caplog)
    assert len(warnings) == 1 and "no-space" in warnings[0]


async def test_a_full_cache_disk_fails_no_durable_write(
    tmp_path: Path, disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With the projection cache on a full disk and the logs elsewhere, appends still succeed
    (one warning each, no traceback), a model route answers ``unavailable`` (no-space), loads
    still serve, and the cache catches up with the first write after space is freed."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    services: SessionServices = await open_services(
        disk / "data", sessions_dir=sessions, writable=True
    )
    try:
        store: SessionStore = services.directory
        await store.create(header("s4"))
        state = await store.load("s4")
        assert state is not None
        await state.append([message("first")])
        fill(disk)
        appended = await state.append([message(bulky(5)), title_event("renamed")])
        with pytest.raises(UnavailableError) as refused:
            await state.set_model_route(RecordedModelRoute(provider="p", model="m"))
        assert refused.value.details["reason"] == "no-space"
        assert refused.value.details["path"] == str(services.cache.path)
        assert state.recorded_route is None
        await state.aclose()
        reloaded = await store.load("s4")  # its cache row is stale: a refresh is refused
        assert reloaded is not None and reloaded.title == "renamed"
        free(disk)
        await reloaded.append([message("after")])
        row = services.cache.get("s4")
        assert row is not None and row.title == "renamed"
        assert row.last_seq == appended.seqs[-1] + 1
    finally:
        await services.aclose()
    warnings = no_tracebacks(caplog)
    assert any("projection cache not updated" in w for w in warnings)
    assert all("projection cache not updated" in w or "no-space" in w for w in warnings)


@pytest.mark.parametrize("durability", ["fsync", "write-behind"])
async def test_readers_see_a_batch_once_it_is_written(tmp_path: Path, durability: str) -> None:
    """While an accepted batch is being written, readers of a store that answers after the
    write see only the durable log (so a write that fails showed them nothing), readers of a
    write-behind store, which answers first, see the batch; a discarded batch is gone for both
    and its seq is taken by the next append."""
    services = await open_services(tmp_path / "data", durability=durability)
    try:
        state = await _session(services.directory, "s5")
        await state.append([message("first"), title_event("kept")])
        await services.directory.flush_due(float("inf"))
        side = state._side  # the writer's memory as an append leaves it before the write
        assert side is not None
        prefix = batch_prefix(side.writer)
        folder, recorded = check_batch(
            [message("next"), title_event("new")], side.folder, "s5", 0, prefix=prefix
        )
        side.accept(recorded, folder)
        snapshot = await state.snapshot()
        shown = [e["data"]["id"] for e in snapshot.events]
        if durability == "fsync":
            assert (shown, state.title, snapshot.captured_through_seq) == (["first"], "kept", 1)
        else:
            assert (shown, state.title, snapshot.captured_through_seq) == (
                ["first", "next"],
                "new",
                3,
            )
        side.discard()
        snapshot = await state.snapshot()
        assert [e["data"]["id"] for e in snapshot.events] == ["first"]
        assert (state.title, state.captured_through_seq) == ("kept", 1)
        assert (await state.append([message("after")])).seqs == (2,)
        snapshot = await state.snapshot()
        assert [e["data"]["id"] for e in snapshot.events] == ["first", "after"]
    finally:
        await services.aclose()
    assert logged_texts(state.path) == ["first", "after"]


async def _session(store: SessionStore, session_id: str) -> SessionState:
    await store.create(header(session_id))
    state = await store.load(session_id)
    assert state is not None
    return state
