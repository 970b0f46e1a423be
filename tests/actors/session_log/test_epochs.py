"""Fencing epochs in session logs: epoch-open records, per-batch markers, the reader's filter
and the store's ack guard (issue 8)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from actors._config import Config
from actors._serve import call_local, open_runtime
from actors._store_services import SessionServices, build_session_services
from actors.session_log._epochs import EPOCH_MARK_TYPE, EPOCH_OPEN_TYPE, StaleEpochError
from actors.session_log._header import SessionHeader
from actors.session_log._json import dumps_line
from actors.session_log._layout import Compression
from actors.session_log._reader import load_session
from actors.session_log._writer import SessionLogWriter
from actors.store._events import AppendRejectedError, EventInput, title_event
from actors.store._state import SessionState
from wire import UnavailableError

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "dsh-sessions"
HEADER = SessionHeader(id="fenced", created_at=1767225600000, cwd="/projects/demo")
SUFFIX = {"zstd": "session.jsonl.zstd", "none": "session.jsonl"}
FENCE = (EPOCH_OPEN_TYPE, EPOCH_MARK_TYPE)


def user_data(message_id: str, text: str) -> dict[str, Any]:
    """A current-shape user message payload."""
    return {
        "id": message_id,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


def say(writer: SessionLogWriter, text: str) -> int:
    """Append one user message and flush it as one batch; return its seq."""
    event = writer.append("user/message", user_data(text, text), surface_op="append")
    writer.flush()
    return int(event["seq"])


def texts(path: Path) -> list[str]:
    """The user texts of the loaded log, in seq order."""
    return [
        event["data"]["content"][0]["text"]
        for event in load_session(path).events
        if event["type"] == "user/message"
    ]


def types(path: Path) -> list[str]:
    """The event types of the loaded log, in seq order."""
    return [event["type"] for event in load_session(path).events]


@pytest.fixture(params=["zstd", "none"])
def compression(request: pytest.FixtureRequest) -> Compression:
    """Both physical encodings."""
    value: Compression = request.param
    return value


@pytest.fixture
def log(tmp_path: Path, compression: Compression) -> Path:
    """Where the test's session log goes."""
    return tmp_path / SUFFIX[compression]


class TestWriter:
    def test_first_batch_opens_the_epoch(self, log: Path) -> None:
        """A writer under an epoch writes an epoch-open record ahead of its first append."""
        with SessionLogWriter.create(log, HEADER, epoch=5) as writer:
            assert say(writer, "a") == 1
        events = load_session(log).events
        assert events[0]["type"] == EPOCH_OPEN_TYPE
        assert events[0]["data"] == {"epoch": 5}
        assert events[0]["ignorable"] is True
        assert load_session(log).epoch == 5

    def test_every_later_batch_carries_the_epoch(self, log: Path) -> None:
        """Each later batch starts with an epoch marker; events of one batch share it."""
        with SessionLogWriter.create(log, HEADER, epoch=5) as writer:
            say(writer, "a")
            writer.append("user/message", user_data("b", "b"), surface_op="append")
            writer.append("user/message", user_data("c", "c"), surface_op="append")
            writer.flush()
        assert types(log) == [
            EPOCH_OPEN_TYPE,
            "user/message",
            EPOCH_MARK_TYPE,
            "user/message",
            "user/message",
        ]

    def test_plain_writer_writes_no_markers(self, log: Path) -> None:
        """Without an epoch the log stays plain."""
        with SessionLogWriter.create(log, HEADER) as writer:
            say(writer, "a")
            say(writer, "b")
        assert types(log) == ["user/message", "user/message"]
        assert load_session(log).epoch is None

    def test_reopen_under_higher_epoch_writes_new_open(self, log: Path) -> None:
        """A session reopened under a new, higher epoch writes a new epoch-open."""
        with SessionLogWriter.create(log, HEADER, epoch=5) as writer:
            say(writer, "a")
        with SessionLogWriter.open(log, epoch=7) as writer:
            say(writer, "b")
        opens = [e["data"]["epoch"] for e in load_session(log).events if e["type"] in FENCE]
        assert opens == [5, 7]
        assert types(log)[2] == EPOCH_OPEN_TYPE
        assert load_session(log).epoch == 7

    def test_set_epoch_opens_a_higher_epoch_and_refuses_a_lower(self, log: Path) -> None:
        """A live writer moved to a higher epoch writes a new open; a lower one is refused."""
        with SessionLogWriter.create(log, HEADER, epoch=5) as writer:
            say(writer, "a")
            writer.set_epoch(7)
            say(writer, "b")
            with pytest.raises(StaleEpochError, match=r"under epoch 6 after epoch 7$"):
                writer.set_epoch(6)
        assert types(log) == [EPOCH_OPEN_TYPE, "user/message", EPOCH_OPEN_TYPE, "user/message"]
        assert load_session(log).epoch == 7

    def test_stale_epoch_cannot_open(self, log: Path) -> None:
        """A writer whose epoch is below the log's highest epoch-open is refused."""
        with SessionLogWriter.create(log, HEADER, epoch=7) as writer:
            say(writer, "a")
        with pytest.raises(
            StaleEpochError, match=r"epoch 5: the log is already fenced at epoch 7$"
        ):
            SessionLogWriter.open(log, epoch=5)

    def test_plain_writer_continues_a_fenced_log_under_its_epoch(self, log: Path) -> None:
        """A writer without an epoch continues a fenced log under the log's epoch."""
        with SessionLogWriter.create(log, HEADER, epoch=7) as writer:
            say(writer, "a")
        with SessionLogWriter.open(log) as writer:
            assert writer.epoch == 7
            say(writer, "b")
        assert types(log)[-2:] == [EPOCH_MARK_TYPE, "user/message"]
        assert texts(log) == ["a", "b"]


def zombie_scenario(log: Path) -> tuple[SessionLogWriter, SessionLogWriter]:
    """Epoch 5 writes a and b; epoch 7 opens the same log and writes c; the epoch-5 writer
    (still open: a paused owner) is returned alive, as is the epoch-7 writer."""
    old = SessionLogWriter.create(log, HEADER, epoch=5)
    say(old, "a")
    say(old, "b")
    new = SessionLogWriter.open(log, epoch=7)
    say(new, "c")
    return old, new


class TestReaderFilter:
    def test_late_lower_epoch_append_is_ignored(self, log: Path) -> None:
        """Epoch-5 records before the epoch-7 open stay; a late epoch-5 append is dropped."""
        old, new = zombie_scenario(log)
        say(old, "late")
        old.close()
        assert texts(log) == ["a", "b", "c"]
        loaded = load_session(log)
        assert loaded.epoch == 7
        assert loaded.torn is None
        assert [event["seq"] for event in loaded.events] == list(range(len(loaded.events)))
        new.close()

    def test_new_owner_continues_after_zombie_batch(self, log: Path) -> None:
        """The current owner's batches after a dropped zombie batch are read again."""
        old, new = zombie_scenario(log)
        say(old, "late-1")
        say(old, "late-2")
        say(new, "d")
        old.close()
        new.close()
        assert texts(log) == ["a", "b", "c", "d"]

    def test_zombie_batch_between_read_and_open_is_rolled_back(self, log: Path) -> None:
        """Lower-epoch batches at seqs a new epoch-open claims are rolled back."""
        old = SessionLogWriter.create(log, HEADER, epoch=5)
        say(old, "a")
        new = SessionLogWriter.open(log, epoch=7)  # reads the log now ...
        say(old, "late")  # ... the zombie lands a batch ...
        say(new, "c")  # ... and the new open claims the seqs after "a".
        old.close()
        new.close()
        assert texts(log) == ["a", "c"]
        assert load_session(log).epoch == 7

    def test_writer_reopening_after_zombie_tail_is_read(self, log: Path) -> None:
        """A writer reopening a log that ends in a dropped zombie batch is read again."""
        old, new = zombie_scenario(log)
        new.close()
        say(old, "late")
        old.close()
        with SessionLogWriter.open(log) as writer:
            say(writer, "d")
        assert texts(log) == ["a", "b", "c", "d"]

    def test_repair_of_fenced_log_is_read(self, log: Path) -> None:
        """Crash closers written by a fenced writer follow its own epoch record."""
        old, new = zombie_scenario(log)
        new.append("turn/start", {"turn": 1})
        new.flush()
        new.close()
        say(old, "late")
        old.close()
        with SessionLogWriter.open(log, epoch=9) as writer:
            assert writer.next_seq == len(load_session(log).events)
        loaded = load_session(log)
        assert [event["type"] for event in loaded.events][-3:] == [
            "turn/start",
            EPOCH_OPEN_TYPE,
            "turn/end",
        ]
        assert loaded.closers == ()
        assert loaded.epoch == 9

    def test_same_epoch_reopen_keeps_records(self, log: Path) -> None:
        """A writer reopening under the same epoch is not fenced off."""
        with SessionLogWriter.create(log, HEADER, epoch=5) as writer:
            say(writer, "a")
        with SessionLogWriter.open(log, epoch=5) as writer:
            say(writer, "b")
        assert texts(log) == ["a", "b"]

    def test_malformed_marker_reads_as_plain_ignorable_event(self, tmp_path: Path) -> None:
        """A fence-typed record without a valid epoch is an ordinary ignorable event."""
        path = tmp_path / SUFFIX["none"]
        lines = [
            HEADER.to_record(),
            {"type": EPOCH_OPEN_TYPE, "seq": 0, "time": 1, "data": {}, "ignorable": True},
            {"type": "session/end-seed", "seq": 1, "time": 1, "data": {}},
        ]
        path.write_bytes(b"".join(dumps_line(line) + b"\n" for line in lines))
        loaded = load_session(path)
        assert loaded.epoch is None
        assert len(loaded.events) == 2


@pytest.mark.parametrize("seed", range(12))
def test_random_takeovers_keep_exactly_what_each_successor_saw(log: Path, seed: int) -> None:
    """Under random schedules of three owners (epochs 5, 7, 9; each new owner opens with a
    batch at once) and their late writes, readers see exactly each owner's records from
    before its successor opened, in order."""
    rng = random.Random(seed)
    writers = [SessionLogWriter.create(log, HEADER, epoch=5)]
    written: list[list[str]] = [[]]
    cut: list[int | None] = [None]  # how many of its texts each owner wrote before the next
    for step in range(rng.randint(8, 20)):
        if step and len(writers) < 3 and rng.random() < 0.2:
            cut[-1] = len(written[-1])
            writers.append(SessionLogWriter.open(log, epoch=(5, 7, 9)[len(writers)]))
            written.append([])
            cut.append(None)
            owner = len(writers) - 1
        else:
            owner = rng.randrange(len(writers))
        for item in range(rng.randint(1, 3)):
            text = f"w{owner}-{step}-{item}"
            writers[owner].append("user/message", user_data(text, text), surface_op="append")
            written[owner].append(text)
        writers[owner].flush()
    for writer in writers:
        writer.close()
    expected = [text for texts_, end in zip(written, cut, strict=True) for text in texts_[:end]]
    assert texts(log) == expected
    loaded = load_session(log)
    assert [event["seq"] for event in loaded.events] == list(range(len(loaded.events)))
    assert loaded.epoch == (5, 7, 9)[len(writers) - 1]


def _expanded_lines(path: Path) -> list[str]:
    """Every loaded event of a transcript, serialized."""
    return [json.dumps(event, sort_keys=True) for event in load_session(path).events]


class TestPlainLogsUnchanged:
    def test_fixtures_load_identically_with_a_fenced_tail(self, tmp_path: Path) -> None:
        """Every real fixture that loads has no epoch; appending a fenced batch to a copy
        leaves all its earlier events byte-identical."""
        if not FIXTURES.is_dir():
            pytest.skip(f"DSH fixtures not found at {FIXTURES}")
        checked = 0
        for fixture in sorted(FIXTURES.rglob("*.jsonl")):
            try:
                before = _expanded_lines(fixture)
            except Exception:  # rejected fixtures are covered by test_log_fixtures
                continue
            assert load_session(fixture).epoch is None
            copy = tmp_path / f"{checked}.jsonl"
            shutil.copyfile(fixture, copy)
            loaded = load_session(copy)
            if loaded.needs_repair:
                continue
            marker = {
                "type": EPOCH_OPEN_TYPE,
                "seq": len(loaded.events),
                "time": 0,
                "data": {"epoch": 3},
                "ignorable": True,
            }
            with copy.open("ab") as file:
                file.write(dumps_line(marker) + b"\n")
            after = _expanded_lines(copy)
            assert after[:-1] == before, fixture.name
            assert load_session(copy).epoch == 3
            checked += 1
        assert checked > 100

    def test_plain_writer_on_plain_log_adds_only_its_events(self, tmp_path: Path) -> None:
        """A plain writer appending to a plain log writes no fence record."""
        path = tmp_path / SUFFIX["none"]
        with SessionLogWriter.create(path, HEADER) as writer:
            say(writer, "a")
        before = path.read_bytes()
        with SessionLogWriter.open(path) as writer:
            say(writer, "b")
        after = path.read_bytes()
        assert after.startswith(before)
        assert b"fence/" not in after


# --- the store: epoch_of and ack_guard ---


def message(text: str) -> EventInput:
    """A user message to append through the store."""
    return EventInput(type="user/message", data=user_data(text, text), surface_op="append")


async def open_store(data: Path, **options: Any) -> SessionServices:
    """Store services over ``data`` without the start-up re-index."""
    return build_session_services(data, index_on_start=False, **options)


async def create(services: SessionServices, session_id: str = "s1") -> SessionState:
    """Create and activate a session."""
    store = services.directory
    await store.create(SessionHeader(id=session_id, created_at=1, cwd="/projects/demo"))
    state = await store.load(session_id)
    assert state is not None
    return state


class TestStore:
    async def test_append_under_epoch_writes_open_and_returns_host_seqs(
        self, tmp_path: Path
    ) -> None:
        """The store writes the epoch-open first; the seqs it returns are the host's events'."""
        services = await open_store(tmp_path / "data", epoch_of=lambda sid: 5)
        try:
            state = await create(services)
            first = await state.append([message("a"), message("b")])
            second = await state.append([message("c")])
            path = state.path
        finally:
            await services.aclose()
        assert first.seqs == (1, 2)
        assert second.seqs == (4,)
        assert types(path) == [
            EPOCH_OPEN_TYPE,
            "user/message",
            "user/message",
            EPOCH_MARK_TYPE,
            "user/message",
        ]
        assert texts(path) == ["a", "b", "c"]

    async def test_write_behind_batch_carries_one_marker(self, tmp_path: Path) -> None:
        """Appends that join a pending write-behind batch share its epoch record."""
        guarded: list[str] = []
        services = await open_store(
            tmp_path / "data",
            epoch_of=lambda sid: 5,
            ack_guard=guarded.append,
            durability="write-behind",
        )
        try:
            state = await create(services)
            first = await state.append([message("a")])
            second = await state.append([message("b")])
            await state.flush()
            third = await state.append([message("c")])
            path = state.path
        finally:
            await services.aclose()
        assert (first.seqs, second.seqs, third.seqs) == ((1,), (2,), (4,))
        assert guarded == ["s1", "s1", "s1"]
        assert types(path) == [
            EPOCH_OPEN_TYPE,
            "user/message",
            "user/message",
            EPOCH_MARK_TYPE,
            "user/message",
        ]

    async def test_claim_moving_to_higher_epoch_writes_new_open(self, tmp_path: Path) -> None:
        """A live writer whose claim's epoch rises writes a new epoch-open."""
        epochs = {"s1": 5}
        services = await open_store(tmp_path / "data", epoch_of=epochs.get)
        try:
            state = await create(services)
            await state.append([message("a")])
            epochs["s1"] = 7
            await state.append([message("b")])
            path = state.path
        finally:
            await services.aclose()
        opens = [e["data"] for e in load_session(path).events if e["type"] == EPOCH_OPEN_TYPE]
        assert opens == [{"epoch": 5}, {"epoch": 7}]
        assert texts(path) == ["a", "b"]

    async def test_stale_epoch_is_unavailable(self, tmp_path: Path) -> None:
        """An owner whose epoch is below the log's highest epoch-open may not write."""
        data = tmp_path / "data"
        services = await open_store(data, epoch_of=lambda sid: 7)
        try:
            await (await create(services)).append([message("a")])
        finally:
            await services.aclose()
        services = await open_store(data, epoch_of=lambda sid: 5)
        try:
            state = await services.directory.load("s1")
            assert state is not None
            with pytest.raises(UnavailableError, match=r"epoch 5 is fenced off"):
                await state.append([message("late")])
            path = state.path
        finally:
            await services.aclose()
        assert texts(path) == ["a"]

    async def test_lost_claim_is_unavailable(self, tmp_path: Path) -> None:
        """A writer whose claim is gone (epoch_of now None) may not write."""
        epochs: dict[str, int] = {"s1": 5}
        services = await open_store(tmp_path / "data", epoch_of=epochs.get)
        try:
            state = await create(services)
            await state.append([message("a")])
            del epochs["s1"]
            with pytest.raises(UnavailableError, match=r"no longer holds the claim"):
                await state.append([message("b")])
            path = state.path
        finally:
            await services.aclose()
        assert texts(path) == ["a"]

    async def test_hosts_cannot_append_fence_records(self, tmp_path: Path) -> None:
        """The fencing types are reserved for the store."""
        services = await open_store(tmp_path / "data")
        try:
            state = await create(services)
            forged = EventInput(type=EPOCH_OPEN_TYPE, data={"epoch": 99}, ignorable=True)
            with pytest.raises(AppendRejectedError, match=r"reserved for the store's fencing"):
                await state.append([forged])
        finally:
            await services.aclose()

    @pytest.mark.parametrize("durability", ["fsync", "flush"])
    async def test_ack_guard_runs_after_durable_and_fails_the_append(
        self, tmp_path: Path, durability: str
    ) -> None:
        """The guard sees the batch on disk; when it raises, the append fails with its
        UnavailableError and no seqs are acknowledged."""
        seen: list[list[str]] = []
        refuse = {"now": False}
        paths: dict[str, Path] = {}

        def guard(session_id: str) -> None:
            seen.append(texts(paths[session_id]))
            if refuse["now"]:
                raise UnavailableError("lease deadline passed")

        services = await open_store(
            tmp_path / "data", epoch_of=lambda sid: 3, ack_guard=guard, durability=durability
        )
        acked: list[tuple[int, ...]] = []
        try:
            state = await create(services)
            paths["s1"] = state.path
            acked.append((await state.append([message("a")])).seqs)
            refuse["now"] = True
            with pytest.raises(UnavailableError, match=r"^lease deadline passed$"):
                acked.append((await state.append([message("b")])).seqs)
        finally:
            await services.aclose()
        assert acked == [(1,)]
        assert seen == [["a"], ["a", "b"]]  # written before the guard ran, never acked

    async def test_no_hooks_write_plain_logs(self, tmp_path: Path) -> None:
        """Without epoch_of and ack_guard the store writes plain logs, seqs from 0."""
        services = await open_store(tmp_path / "data")
        try:
            state = await create(services)
            outcome = await state.append([message("a"), message("b")])
            path = state.path
        finally:
            await services.aclose()
        assert outcome.seqs == (0, 1)
        assert types(path) == ["user/message", "user/message"]

    async def test_store_load_snapshot_and_listing_ignore_zombie_writes(
        self, tmp_path: Path
    ) -> None:
        """After epoch 7 opens, a late epoch-5 batch (here a title) shows in no reader: not
        the loaded surface, nor the title, nor the re-indexed listing."""
        data = tmp_path / "data"
        services = await open_store(data, epoch_of=lambda sid: 5)
        try:
            state = await create(services)
            await state.append([message("a"), title_event("old owner")])
            path = state.path
        finally:
            await services.aclose()
        zombie = SessionLogWriter.open(path, epoch=5)
        with SessionLogWriter.open(path, epoch=7) as owner:
            say(owner, "c")
        zombie.set_title("zombie title")
        zombie.append("user/message", user_data("late", "late"), surface_op="append")
        zombie.close()
        services = await open_store(data)
        try:
            await services.directory.refresh_index()
            state = await services.directory.load("s1")
            assert state is not None
            snapshot = await state.snapshot()
            listed = services.directory.list_page(limit=10)
        finally:
            await services.aclose()
        assert [event["data"]["id"] for event in snapshot.events] == ["a", "c"]
        assert state.title == "old owner"
        assert [(row.session_id, row.title, row.last_seq) for row in listed] == [
            ("s1", "old owner", snapshot.captured_through_seq)
        ]


class TestRuntime:
    async def test_open_runtime_without_hooks_behaves_as_before(self, tmp_path: Path) -> None:
        """open_runtime with both hooks None serves plain logs and acks appends."""
        async with open_runtime(Config(), tmp_path / "data") as runtime:
            system = runtime.system
            with trio.fail_after(30):
                await call_local(system, "sessions/create", {"sessionId": "s1"})
                result = await call_local(
                    system,
                    "sessions/append",
                    {"agentId": "s1", "events": [{"type": "session/end-seed", "data": {}}]},
                )
            state = await runtime.sessions.directory.load("s1")
            assert state is not None
            path = state.path
        assert list(result.seqs) == [0]
        assert types(path) == ["session/end-seed"]

    async def test_open_runtime_passes_the_hooks_to_the_store(self, tmp_path: Path) -> None:
        """open_runtime's epoch_of fences the log and its ack_guard can fail an append."""
        refuse = {"now": False}

        def guard(session_id: str) -> None:
            if refuse["now"]:
                raise UnavailableError(f"{session_id}: past the lease deadline")

        async with open_runtime(
            Config(), tmp_path / "data", epoch_of=lambda sid: 11, ack_guard=guard
        ) as runtime:
            system = runtime.system
            events = [{"type": "session/end-seed", "data": {}}]
            with trio.fail_after(30):
                await call_local(system, "sessions/create", {"sessionId": "s1"})
                result = await call_local(
                    system, "sessions/append", {"agentId": "s1", "events": events}
                )
                refuse["now"] = True
                with pytest.raises(UnavailableError, match=r"^s1: past the lease deadline$"):
                    await call_local(system, "sessions/append", {"agentId": "s1", "events": events})
            state = await runtime.sessions.directory.load("s1")
            assert state is not None
            path = state.path
        assert list(result.seqs) == [1]
        assert load_session(path).epoch == 11
