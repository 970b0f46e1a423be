"""Idempotency keys over the store with real files: a retry returns the first outcome and
writes nothing, a reused key is refused, the window and capacity bound the keys, and keys survive
reopening the store (issue 19, item 2)."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from actors._builtin_services import Agents
from actors._serve import call_local
from actors._session_service import Sessions
from actors._system import ActorSystem
from actors.session_log import IDEMPOTENCY_KEY_TYPE, KeyRecord
from actors.session_log._reader import load_session
from actors.session_log._zstd import decode_torn_prefix, scan_frames
from actors.store import (
    KEY_REUSED,
    AppendRejectedError,
    EventInput,
    IdempotencyPolicy,
    KeyedRequest,
    ProjectionCache,
    RecordedModelRoute,
    SessionRoot,
    SessionStore,
    StoreOptions,
    event_args,
    keyed_request,
    session_id_for_key,
)
from actors.store._idempotency import KeyIndex
from actors.store._state import SessionState
from tests.actors.store.test_session_store import header
from wire import ArgumentsInvalidError


def message(text: str) -> EventInput:
    """One user message."""
    data = {
        "id": text,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    return EventInput(type="user/message", data=data, surface_op="append")


def keyed(key: str, events: list[EventInput]) -> KeyedRequest:
    """The keyed request ``sessions/append`` makes of ``events``."""
    request = keyed_request("sessions/append", key, {"events": event_args(events)})
    assert request is not None
    return request


class Clock:
    """A settable epoch-ms clock for the store."""

    def __init__(self) -> None:
        self.now = 1_767_225_600_000

    def __call__(self) -> int:
        return self.now


def open_store(data: Path, **options: Any) -> SessionStore:
    """A store over ``<data>/sessions`` (zstd) with ``options``."""
    root = data / "sessions"
    root.mkdir(parents=True, exist_ok=True)
    cache = ProjectionCache.open(data / "sessions.sqlite3")
    roots = [
        SessionRoot(
            path=root.resolve(),
            compression="zstd",
            writable=True,
            root_id=cache.root_id(root, "zstd"),
        )
    ]
    return SessionStore(cache, roots, StoreOptions(**options))


async def close_store(store: SessionStore) -> None:
    await store.aclose()
    store.cache.close()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SessionStore]:
    opened = open_store(tmp_path / "data")
    try:
        yield opened
    finally:
        await close_store(opened)


async def loaded(store: SessionStore, session_id: str = "s1") -> SessionState:
    state = await store.load(session_id)
    assert state is not None
    return state


def logged(path: Path, event_type: str = "user/message") -> list[Any]:
    """The ``data.id`` (messages) or ``data`` (other types) of a type's events in a log."""
    events = load_session(path).events
    found = [e for e in events if e["type"] == event_type]
    return [e["data"].get("id", e["data"]) for e in found]


async def test_a_retried_append_returns_its_first_seqs_and_writes_nothing(
    store: SessionStore,
) -> None:
    """An append retried with its key answers the first call's seqs and the log holds the
    events once, behind one key record that upstream reads as an ignorable event."""
    with trio.fail_after(20):
        await store.create(header("s1"))
        state = await loaded(store)
        await state.append([message("a")], keyed=keyed("k1", [message("a")]))
        events = [message("b"), message("c")]
        first = await state.append(events, keyed=keyed("k2", events))
        again = await state.append(events, keyed=keyed("k2", events))
        assert again.seqs == first.seqs == (3, 4)
        later = await state.append([message("d")])
        assert later.seqs == (5,)
    records = load_session(state.path).events
    assert [e["type"] for e in records] == [
        IDEMPOTENCY_KEY_TYPE,
        "user/message",
        IDEMPOTENCY_KEY_TYPE,
        "user/message",
        "user/message",
        "user/message",
    ]
    assert records[2]["ignorable"] is True
    assert records[2]["data"] == {"key": "k2", "request": keyed("k2", events).request, "count": 2}
    assert logged(state.path) == ["a", "b", "c", "d"]


async def test_a_key_reused_with_other_arguments_is_refused(store: SessionStore) -> None:
    """The same key with other events is arguments-invalid (reason idempotency-key-reused) and
    writes nothing; the first call's retry still answers its seqs."""
    with trio.fail_after(20):
        await store.create(header("s1"))
        state = await loaded(store)
        first = await state.append([message("a")], keyed=keyed("k", [message("a")]))
        with pytest.raises(ArgumentsInvalidError, match=r"^idempotency key 'k' was already used"):
            await state.append([message("b")], keyed=keyed("k", [message("b")]))
        with pytest.raises(ArgumentsInvalidError) as refused:
            await state.append([message("b")], keyed=keyed("k", [message("b")]))
        assert refused.value.details["reason"] == KEY_REUSED
        again = await state.append([message("a")], keyed=keyed("k", [message("a")]))
        assert again.seqs == first.seqs
    assert logged(state.path) == ["a"]


async def test_keys_survive_reopening_the_store(tmp_path: Path) -> None:
    """After the store is closed and opened again (a server restart), a retry finds its key in
    the log: same seqs, nothing appended."""
    data = tmp_path / "data"
    with trio.fail_after(20):
        first_store = open_store(data)
        await first_store.create(header("s1"))
        state = await loaded(first_store)
        first = await state.append([message("a")], keyed=keyed("k", [message("a")]))
        await close_store(first_store)
        second_store = open_store(data)
        try:
            state = await loaded(second_store)
            again = await state.append([message("a")], keyed=keyed("k", [message("a")]))
            fresh = await state.append([message("b")], keyed=keyed("k2", [message("b")]))
        finally:
            await close_store(second_store)
    assert again.seqs == first.seqs == (1,)
    assert fresh.seqs == (3,)
    assert logged(state.path) == ["a", "b"]


async def test_capacity_forgets_the_oldest_keys_live_and_after_reopening(tmp_path: Path) -> None:
    """With room for two keys, the oldest of three is forgotten (its retry appends again),
    live and when the index is rebuilt from the log; the newer two still answer."""
    data = tmp_path / "data"
    policy = IdempotencyPolicy(capacity=2)
    with trio.fail_after(20):
        store = open_store(data, idempotency=policy)
        await store.create(header("s1"))
        state = await loaded(store)
        seqs = {}
        for key in ("k1", "k2", "k3"):
            seqs[key] = (await state.append([message(key)], keyed=keyed(key, [message(key)]))).seqs
        again = await state.append([message("k2")], keyed=keyed("k2", [message("k2")]))
        assert again.seqs == seqs["k2"]
        await close_store(store)
        store = open_store(data, idempotency=policy)
        try:
            state = await loaded(store)
            for key in ("k2", "k3"):
                answer = await state.append([message(key)], keyed=keyed(key, [message(key)]))
                assert answer.seqs == seqs[key]
            answer = await state.append([message("k1")], keyed=keyed("k1", [message("k1")]))
            assert answer.seqs != seqs["k1"]
        finally:
            await close_store(store)
    assert logged(state.path) == ["k1", "k2", "k3", "k1"]


async def test_the_window_forgets_keys_older_than_it(tmp_path: Path) -> None:
    """A key is answered until it is older than the window, then forgotten: its retry appends
    again (live, and in an index rebuilt from the log)."""
    clock = Clock()
    policy = IdempotencyPolicy(window_ms=60_000)
    with trio.fail_after(20):
        store = open_store(tmp_path / "data", idempotency=policy, clock=clock)
        try:
            await store.create(header("s1"))
            state = await loaded(store)
            first = await state.append([message("a")], keyed=keyed("k", [message("a")]))
            clock.now += 60_000
            assert (await state.append([message("a")], keyed=keyed("k", [message("a")]))).seqs == (
                first.seqs
            )
            other = await state.append([message("b")], keyed=keyed("k2", [message("b")]))
            clock.now += 1
            late = await state.append([message("a")], keyed=keyed("k", [message("a")]))
            assert late.seqs != first.seqs
            await state.aclose()
            clock.now += 59_999  # k2 is now exactly 60 s old: still remembered
            state = await loaded(store)
            answer = await state.append([message("b")], keyed=keyed("k2", [message("b")]))
            assert answer.seqs == other.seqs
        finally:
            await close_store(store)
    assert logged(state.path) == ["a", "b", "a"]


async def test_a_keyed_batch_torn_inside_its_frame_is_dropped_whole(tmp_path: Path) -> None:
    """A crash that tears the frame of a keyed batch leaves no part of it: at every cut the log
    reads with all of the batch (key and events) or none, though the torn frame's decodable
    prefix holds some of its lines, and the retry then writes it once."""
    data = tmp_path / "data"
    # Over zstd's 128 KiB block: a cut between blocks decodes part of the batch.
    events = [message(f"m{k}-" + os.urandom(400).hex()) for k in range(300)]
    ids = [e.data["id"] for e in events]
    with trio.fail_after(60):
        store = open_store(data)
        await store.create(header("s1"))
        state = await loaded(store)
        await state.append([message("before")])
        await state.append(events, keyed=keyed("k", events))
        path = state.path
        await close_store(store)
        whole = path.read_bytes()
        start, end = scan_frames(whole).frames[-1]
        partial = 0
        for cut in range(start + 1, end, max(1, (end - start) // 40)):
            path.write_bytes(whole[:cut])
            kept = logged(path)
            assert kept in (["before"], ["before", *ids]), cut
            assert len(logged(path, IDEMPOTENCY_KEY_TYPE)) == (len(kept) > 1)
            lines = decode_torn_prefix(whole[start:cut]).count(b"\n")
            partial += 1 < lines < len(events) + 1
        assert partial  # the cuts did recover part of the batch, which the reader dropped
        path.write_bytes(whole[: (start + end) // 2])
        store = open_store(data)
        try:
            state = await loaded(store)
            retried = await state.append(events, keyed=keyed("k", events))
            again = await state.append(events, keyed=keyed("k", events))
        finally:
            await close_store(store)
    assert retried.seqs == again.seqs
    assert logged(path) == ["before", *ids]


async def test_under_a_fencing_epoch_the_key_follows_the_epoch_record(tmp_path: Path) -> None:
    """A clustered writer's keyed batch opens with its epoch record, then the key record; a
    retry answers from the index rebuilt from that log."""
    data = tmp_path / "data"
    with trio.fail_after(20):
        store = open_store(data, epoch_of=lambda session_id: 7)
        await store.create(header("s1"))
        state = await loaded(store)
        first = await state.append([message("a")], keyed=keyed("k", [message("a")]))
        await close_store(store)
        store = open_store(data, epoch_of=lambda session_id: 7)
        try:
            state = await loaded(store)
            again = await state.append([message("a")], keyed=keyed("k", [message("a")]))
        finally:
            await close_store(store)
    types = [e["type"] for e in load_session(state.path).events]
    assert types == ["fence/epoch-open", IDEMPOTENCY_KEY_TYPE, "user/message"]
    assert again.seqs == first.seqs == (2,)


async def test_hosts_may_not_append_key_records(store: SessionStore) -> None:
    """A host's event of the key record's type is rejected, so no host can forge a key."""
    with trio.fail_after(20):
        await store.create(header("s1"))
        state = await loaded(store)
        forged = EventInput(
            type=IDEMPOTENCY_KEY_TYPE,
            data={"key": "k", "request": "r", "count": 0},
            ignorable=True,
        )
        with pytest.raises(AppendRejectedError, match=r"reserved for idempotency keys"):
            await state.append([forged])


async def test_a_keyed_model_route_is_recorded_once_and_survives_reopening(
    tmp_path: Path,
) -> None:
    """A keyed setModelRoute retried returns the first recording (same updatedAt), also after
    reopening the store; the same key with another route is refused."""
    data = tmp_path / "data"
    route = RecordedModelRoute(provider="p", model="m", context_window=8)
    args = {"provider": "p", "model": "m", "contextWindow": 8}
    request = keyed_request("sessions/setModelRoute", "r1", args)
    with trio.fail_after(20):
        store = open_store(data)
        await store.create(header("s1"))
        state = await loaded(store)
        first = await state.set_model_route(route, keyed=request)
        await trio.sleep(0.01)
        assert await state.set_model_route(route, keyed=request) == first
        await close_store(store)
        store = open_store(data)
        try:
            state = await loaded(store)
            await trio.sleep(0.01)
            assert await state.set_model_route(route, keyed=request) == first
            other = keyed_request("sessions/setModelRoute", "r1", {**args, "model": "n"})
            with pytest.raises(ArgumentsInvalidError) as refused:
                await state.set_model_route(
                    RecordedModelRoute(provider="p", model="n"), keyed=other
                )
            assert refused.value.details["reason"] == KEY_REUSED
            assert store.cache.model_route("s1") == first
        finally:
            await close_store(store)


async def test_model_route_keys_are_bounded_per_session(tmp_path: Path) -> None:
    """Past the capacity, the oldest model-route key is forgotten: its retry records again."""
    store = open_store(tmp_path / "data", idempotency=IdempotencyPolicy(capacity=2))
    try:
        with trio.fail_after(20):
            await store.create(header("s1"))
            state = await loaded(store)
            stamps = []
            for k in range(3):
                route = RecordedModelRoute(provider="p", model=f"m{k}")
                args = {"provider": "p", "model": f"m{k}", "contextWindow": None}
                request = keyed_request("sessions/setModelRoute", f"r{k}", args)
                stamps.append((route, request, await state.set_model_route(route, keyed=request)))
                await trio.sleep(0.002)
            route, request, first = stamps[2]
            assert await state.set_model_route(route, keyed=request) == first
            route, request, first = stamps[0]
            await trio.sleep(0.002)
            assert (await state.set_model_route(route, keyed=request)).updated_at > first.updated_at
    finally:
        await close_store(store)


def test_the_default_policy_keeps_ten_thousand_keys_for_a_day() -> None:
    """By default a session remembers its 10,000 most recent keys for 24 h: the 10,001st key
    pushes out the first, and a day-old key is still answered, one a millisecond older not."""
    index = KeyIndex(IdempotencyPolicy())
    start = 1_767_225_600_000
    for n in range(10_001):
        index.add(KeyRecord(key=f"k{n}", request="r", seq=2 * n, count=1, time=start + n))
    now = start + 10_000
    assert len(index) == 10_000
    assert index.find(KeyedRequest(key="k0", request="r"), now) is None
    assert index.find(KeyedRequest(key="k1", request="r"), now) == (3,)
    day = 24 * 60 * 60 * 1000
    assert index.find(KeyedRequest(key="k2", request="r"), start + 2 + day) == (5,)
    assert index.find(KeyedRequest(key="k2", request="r"), start + 3 + day) is None


def test_forgetting_a_discarded_batch_forgets_its_key_only() -> None:
    """Keys recorded at or after a discarded batch's first seq are forgotten; earlier ones
    stay."""
    index = KeyIndex(IdempotencyPolicy())
    for n in range(3):
        index.add(KeyRecord(key=f"k{n}", request="r", seq=3 * n, count=2, time=0))
    index.forget_from(3)
    assert index.find(KeyedRequest(key="k0", request="r"), 0) == (1, 2)
    assert index.find(KeyedRequest(key="k1", request="r"), 0) is None
    assert index.find(KeyedRequest(key="k2", request="r"), 0) is None


# --- through the endpoints (in-process, as a remote caller would call them) ---


@pytest.fixture
async def system(store: SessionStore) -> ActorSystem:
    built = ActorSystem(store, [Sessions(store)])
    built.add_service(Agents(functools.partial(call_local, built)))
    return built


def caller(system: ActorSystem) -> Callable[..., Any]:
    return functools.partial(call_local, system)


async def test_create_with_a_key_twice_gives_one_session(system: ActorSystem) -> None:
    """sessions/create with a key and no sessionId makes the session the key names; the retry
    answers that session (same id, createdAt and path), and no second session exists."""
    call = caller(system)
    with trio.fail_after(20):
        first = await call("sessions/create", {"cwd": "/w", "idempotencyKey": "c1"})
        again = await call("sessions/create", {"cwd": "/w", "idempotencyKey": "c1"})
        listed = await call("sessions/list", {})
    assert first == again
    assert first.session_id == session_id_for_key("c1")
    assert [row.session_id for row in listed.sessions] == [first.session_id]
    # The key rides in the header, which upstream reads with the extension dropped (§4.1).
    on_disk = load_session(first.path)
    assert on_disk.header.idempotency is not None
    assert on_disk.header.idempotency.key == "c1"
    assert on_disk.header.to_record()["idempotency"]["key"] == "c1"
    assert on_disk.captured_through_seq is None


async def test_create_key_reuse_and_foreign_ids_are_refused(system: ActorSystem) -> None:
    """A create key sent again with another cwd is refused as reused; a keyed create of an id
    that exists without that key is 'already exists'."""
    call = caller(system)
    with trio.fail_after(20):
        await call("sessions/create", {"cwd": "/w", "idempotencyKey": "c1"})
        with pytest.raises(ArgumentsInvalidError) as reused:
            await call("sessions/create", {"cwd": "/v", "idempotencyKey": "c1"})
        assert reused.value.details["reason"] == KEY_REUSED
        await call("sessions/create", {"sessionId": "plain"})
        with pytest.raises(ArgumentsInvalidError, match=r'^session "plain" already exists$'):
            await call("sessions/create", {"sessionId": "plain", "idempotencyKey": "c2"})
        created = await call("sessions/create", {"sessionId": "mine", "idempotencyKey": "c2"})
        again = await call("sessions/create", {"sessionId": "mine", "idempotencyKey": "c2"})
    assert created == again


async def test_keyed_title_and_append_through_the_endpoints(system: ActorSystem) -> None:
    """setTitle and append answer their first result to a keyed retry, and a key is checked
    across the session's endpoints (the same key on append after setTitle is reused)."""
    call = caller(system)
    with trio.fail_after(20):
        await call("sessions/create", {"sessionId": "s1"})
        title = await call(
            "sessions/setTitle", {"agentId": "s1", "title": " T ", "idempotencyKey": "t"}
        )
        again = await call(
            "sessions/setTitle", {"agentId": "s1", "title": " T ", "idempotencyKey": "t"}
        )
        assert title == again
        wire = {"type": "user/message", "data": message("a").data, "surfaceOp": "append"}
        args = {"agentId": "s1", "events": [wire], "idempotencyKey": "a"}
        appended = await call("sessions/append", args)
        spelled = {**args, "events": [{**wire, "ignorable": False, "sourceEventSeqs": None}]}
        assert await call("sessions/append", spelled) == appended
        with pytest.raises(ArgumentsInvalidError) as reused:
            await call("sessions/append", {**args, "idempotencyKey": "t"})
        assert reused.value.details["reason"] == KEY_REUSED
        info = await call("sessions/info", {"agentId": "s1"})
    assert info.title == "T"
    assert info.last_seq == appended.seqs[-1]


@pytest.mark.parametrize("key", ["", "k" * 129, 7])
async def test_a_malformed_key_is_arguments_invalid(system: ActorSystem, key: object) -> None:
    """An empty key, one over 128 characters or one that is not a string is refused before
    anything is written."""
    call = caller(system)
    with trio.fail_after(20):
        with pytest.raises(ArgumentsInvalidError):
            await call("sessions/create", {"sessionId": "s1", "idempotencyKey": key})
        listed = await call("sessions/list", {})
    assert listed.sessions == []


async def test_agents_create_with_a_key_retried_gives_one_titled_agent(
    system: ActorSystem, store: SessionStore
) -> None:
    """agents/create retried with its key answers the same agent, the session exists once and
    holds one title event; a retry with another title is refused as reused."""
    call = caller(system)
    with trio.fail_after(20):
        args = {"cwd": "/w", "title": "hello", "idempotencyKey": "a1"}
        first = await call("agents/create", args)
        again = await call("agents/create", args)
        with pytest.raises(ArgumentsInvalidError) as reused:
            await call("agents/create", {**args, "title": "other"})
        listed = await call("sessions/list", {})
    assert first == again
    assert reused.value.details["reason"] == KEY_REUSED
    assert [row.session_id for row in listed.sessions] == [first.agent_id]
    state = await loaded(store, first.agent_id)
    titles = logged(state.path, "session/title")
    assert [t["title"] for t in titles] == ["hello"]
