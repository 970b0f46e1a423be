"""``prepare``: normalization, budget, reads, retention, spills, errors and cancellation."""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import actors.session_references._prepare as prepare_module
from actors.session_references._budget import ModelAdapterMissingError, ModelRoute
from actors.session_references._config import SessionReferenceConfig
from actors.session_references._errors import SessionReferenceError, SessionReferenceErrorCode
from actors.session_references._inputs import SessionReferenceInput
from actors.session_references._prepare import PreparedMessage, discard_spills, prepare
from actors.session_references._projection import SourceSnapshot
from actors.session_references._spill import (
    LocalSpillStore,
    SaveTextSpill,
    SpillRef,
    render_transcript,
)
from actors.session_references._uri import MentionReference

Code = SessionReferenceErrorCode
HINT = "Use read with offset/limit, or grep this path to search within it."


@attrs.frozen
class Agent:
    """The requesting agent."""

    session_id: str = "target"
    cwd: str | None = "/projects/demo"


def user_event(text: str, kind: str = "user") -> dict[str, Any]:
    """A projected user message."""
    return {
        "type": "user/message",
        "data": {"content": [{"type": "text", "text": text}], "source": {"kind": kind}},
        "surfaceOp": "append",
    }


def source(
    session_id: str, *texts: str, cwd: str | None = None, version: int = 0
) -> SourceSnapshot:
    """A snapshot whose surface holds one user message per text."""
    header: dict[str, Any] = {"type": "session", "version": version, "id": session_id}
    if cwd is not None:
        header["cwd"] = cwd
    events = [user_event(text) for text in texts]
    return SourceSnapshot(
        header=header, captured_through_seq=len(events) - 1 if events else None, events=events
    )


class Sources:
    """An in-memory reader that counts reads and can block or fail per id."""

    def __init__(self, *snapshots: SourceSnapshot) -> None:
        self.snapshots = {s.session_id: s for s in snapshots}
        self.reads: list[str] = []
        self.gates: dict[str, trio.Event] = {}
        self.failures: dict[str, BaseException] = {}

    async def read(self, session_id: str) -> SourceSnapshot:
        self.reads.append(session_id)
        if session_id in self.gates:
            await self.gates[session_id].wait()
        else:
            await trio.lowlevel.checkpoint()
        if session_id in self.failures:
            raise self.failures[session_id]
        if session_id not in self.snapshots:
            raise LookupError(f"session {json.dumps(session_id)} not found")
        return self.snapshots[session_id]


class MemoryStore:
    """A spill store that records requests; saves may block or fail."""

    def __init__(self, *, fail: bool = False) -> None:
        self.requests: list[SaveTextSpill] = []
        self.discarded: list[SpillRef] = []
        self.fail = fail
        self.gates: dict[str, trio.Event] = {}
        self.after_save: Callable[[], None] | None = None

    async def save(self, request: SaveTextSpill) -> SpillRef:
        self.requests.append(request)
        gate = self.gates.get(request.source_session_id)
        if gate is not None:
            await gate.wait()
        await trio.lowlevel.checkpoint()
        if self.fail:
            raise OSError("disk full")
        if self.after_save is not None:
            self.after_save()
        return SpillRef(
            locator=f"/spill/{request.source_session_id}/{request.suggested_name}",
            bytes=len(request.content.encode("utf-8")),
            retrieval_hint=HINT,
        )

    async def discard(self, ref: SpillRef) -> None:
        self.discarded.append(ref)


def config(**values: Any) -> SessionReferenceConfig:
    """A validated config (defaults otherwise)."""
    return SessionReferenceConfig.create(**values)


async def run(
    references: list[Any],
    sources: Sources,
    *,
    agent: Agent | None = None,
    content: Any = None,
    cfg: SessionReferenceConfig | None = None,
    store: Any = None,
    lookup: Callable[[], Awaitable[Any]] | None = None,
) -> PreparedMessage:
    """Call prepare with test defaults."""
    return await prepare(
        agent or Agent(),
        [{"type": "text", "text": "hi"}] if content is None else content,
        references,
        read_snapshot=sources.read,
        config=cfg or config(),
        spill_store=store,
        lookup_model_route=lookup,
        new_message_id=lambda: "msg-1",
    )


async def expect_error(code: Code, message: str, coro: Awaitable[Any]) -> SessionReferenceError:
    """Await ``coro`` and check it raises the given session-reference error."""
    with pytest.raises(SessionReferenceError) as caught:
        await coro
    assert caught.value.code is code
    assert caught.value.message == message
    return caught.value


def prompt_of(prepared: PreparedMessage) -> str:
    """The context message text."""
    assert prepared.additional_context is not None
    return prepared.additional_context.text


def conversation_of(prepared: PreparedMessage) -> list[dict[str, Any]]:
    """The parsed JSON array of previews."""
    text = prompt_of(prepared)
    body = text.split("<referenced-sessions>\n", 1)[1].split("\n</referenced-sessions>", 1)[0]
    return json.loads(body)  # type: ignore[no-any-return]


# -- result shape --------------------------------------------------------------------------


async def test_happy_path_shapes_the_result() -> None:
    """Content is deep-copied and one context message aggregates the sources in order."""
    content = [{"type": "text", "text": "look at @a and @b", "nested": {"k": [1]}}]
    sources = Sources(source("a", "alpha"), source("b", "beta", cwd="/b"))
    prepared = await run(
        [{"sessionId": "a", "label": "A"}, {"sessionId": "b"}, {"sessionId": "a", "label": "x"}],
        sources,
        content=content,
    )
    assert prepared.content == content
    assert prepared.content is not content
    assert prepared.content[0]["nested"] is not content[0]["nested"]
    wire = prepared.to_wire()
    assert list(wire) == ["content", "additionalContext"]
    message = wire["additionalContext"]
    assert (message["role"], message["id"]) == ("user", "msg-1")
    assert [r["sessionId"] for r in message["source"]["references"]] == ["a", "b"]
    assert [r["label"] for r in message["source"]["references"]] == ["A", "b"]
    assert [r["inputIndex"] for r in message["source"]["references"]] == [0, 1]
    assert conversation_of(prepared) == [
        {"sessionId": "a", "label": "A", "cwd": None, "capturedThroughSeq": 0,
         "conversation": [{"role": "user", "text": "alpha"}]},
        {"sessionId": "b", "label": "b", "cwd": "/b", "capturedThroughSeq": 0,
         "conversation": [{"role": "user", "text": "beta"}]},
    ]  # fmt: skip
    assert sorted(sources.reads) == ["a", "b"]
    assert "## Reference omissions" not in prompt_of(prepared)


async def test_no_references_returns_content_only() -> None:
    """An empty list yields a deep copy and no additionalContext key at all."""
    content = [{"type": "text", "text": "plain"}]
    prepared = await run([], Sources(), content=content)
    assert prepared.to_wire() == {"content": content}
    assert prepared.content is not content
    assert prepared.additional_context is None


async def test_reference_objects_are_accepted() -> None:
    """Structured inputs and parsed mentions work like wire maps."""
    sources = Sources(source("a", "x"), source("b", "y"))
    prepared = await run(
        [SessionReferenceInput(session_id="a"), MentionReference(session_id="b", label="")],
        sources,
    )
    assert [item["label"] for item in conversation_of(prepared)] == ["a", ""]


# -- normalization and precedence -------------------------------------------------------------


@pytest.mark.parametrize("element", [1, "a", None, True, 2.5])
async def test_non_object_reference(element: object) -> None:
    """Numbers, strings, booleans and null are not objects."""
    await expect_error(
        Code.INVALID_REFERENCE, "session reference must be an object", run([element], Sources())
    )


@pytest.mark.parametrize(
    "element",
    [
        {},
        {"sessionId": 5},
        {"sessionId": None},
        {"sessionId": "a", "label": None},
        {"sessionId": "a", "label": 3},
        ["a"],
    ],
)
async def test_badly_typed_reference(element: object) -> None:
    """A non-string sessionId, a present non-string label (null too) or an array fails."""
    await expect_error(
        Code.INVALID_REFERENCE,
        "session reference must contain a string sessionId and optional string label",
        run([element], Sources()),
    )


async def test_self_reference_precedes_dedup_and_order_decides() -> None:
    """A self reference fails even when repeated; errors come in element order."""
    await expect_error(
        Code.SELF_REFERENCE,
        'session "target" cannot reference itself',
        run([{"sessionId": "a"}, {"sessionId": "target"}, {"sessionId": "target"}], Sources()),
    )
    await expect_error(
        Code.INVALID_REFERENCE,
        "session reference must be an object",
        run([None, {"sessionId": "target"}], Sources()),
    )


async def test_too_many_is_checked_after_validation_and_before_reads() -> None:
    """Four distinct ids fail TOO_MANY (not READ_FAILED), after every element validated."""
    sources = Sources()
    refs = [{"sessionId": s} for s in ("missing", "b", "c", "d")]
    await expect_error(
        Code.TOO_MANY, "a message may reference at most 3 sessions", run(refs, sources)
    )
    assert sources.reads == []
    await expect_error(
        Code.SELF_REFERENCE,
        'session "target" cannot reference itself',
        run([*refs, {"sessionId": "target"}], sources),
    )
    await expect_error(
        Code.TOO_MANY,
        "a message may reference at most 1 sessions",
        run([{"sessionId": "a"}, {"sessionId": "b"}], sources, cfg=config(max_references=1)),
    )


async def test_duplicates_do_not_count_towards_the_limit() -> None:
    """Repeated ids collapse to one before the count."""
    sources = Sources(source("a", "x"))
    prepared = await run([{"sessionId": "a"}] * 5, sources, cfg=config(max_references=1))
    assert len(conversation_of(prepared)) == 1
    assert sources.reads == ["a"]


async def test_references_must_be_a_list() -> None:
    """A mapping is not a reference list (a TypeError, as upstream)."""
    with pytest.raises(TypeError):
        await run({"sessionId": "a"}, Sources())  # type: ignore[arg-type]


async def test_empty_id_fails_at_read_time() -> None:
    """The empty string is a valid id; it fails later as READ_FAILED."""
    await expect_error(
        Code.READ_FAILED,
        'failed to read referenced session: session "" not found',
        run([{"sessionId": ""}], Sources()),
    )


# -- reads -----------------------------------------------------------------------------------


async def test_reads_run_concurrently_once_per_source() -> None:
    """Every read starts before any finishes, and each distinct source is read once."""
    sources = Sources(source("a", "x"), source("b", "y"), source("c", "z"))
    for sid in "abc":
        sources.gates[sid] = trio.Event()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            results: list[PreparedMessage] = []

            async def call() -> None:
                results.append(await run([{"sessionId": s} for s in "abcab"], sources))

            nursery.start_soon(call)
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(sources.reads) == ["a", "b", "c"]
            for gate in sources.gates.values():
                gate.set()
    assert [item["sessionId"] for item in conversation_of(results[0])] == ["a", "b", "c"]


async def test_first_read_failure_wins_and_stops_other_reads() -> None:
    """A failing read rejects at once with its message; pending reads are abandoned."""
    sources = Sources(source("slow", "x"))
    sources.gates["slow"] = trio.Event()
    with trio.fail_after(5):
        error = await expect_error(
            Code.READ_FAILED,
            'failed to read referenced session: session "missing" not found',
            run([{"sessionId": "slow"}, {"sessionId": "missing"}], sources),
        )
    assert isinstance(error.__cause__, LookupError)


async def test_read_failure_message_uses_the_inner_message() -> None:
    """The inner message comes from the error, whatever its type."""
    sources = Sources()
    sources.failures["x"] = RuntimeError('stored session "x" is corrupt: bad seq')
    await expect_error(
        Code.READ_FAILED,
        'failed to read referenced session: stored session "x" is corrupt: bad seq',
        run([{"sessionId": "x"}], sources),
    )


async def test_reader_returning_garbage_is_a_read_failure() -> None:
    """A reader that returns something other than a snapshot fails as READ_FAILED."""

    async def read(session_id: str) -> Any:
        return {"not": "a snapshot"}

    with pytest.raises(SessionReferenceError, match=r"^failed to read referenced session: "):
        await prepare(Agent(), [], [{"sessionId": "a"}], read_snapshot=read, config=config())


async def test_budget_exceeded_when_fixed_fields_do_not_fit() -> None:
    """A source that cannot fit the explicit budget fails the whole call."""
    sources = Sources(source("a", "x"), source("b" * 300, "y"))
    await expect_error(
        Code.BUDGET_EXCEEDED,
        "referenced session snapshot cannot fit the configured byte budget",
        run(
            [{"sessionId": "a"}, {"sessionId": "b" * 300}],
            sources,
            cfg=config(max_reference_bytes=200),
        ),
    )


async def test_read_failure_precedes_budget_failure() -> None:
    """READ_FAILED wins over BUDGET_EXCEEDED because retention runs after all reads."""
    sources = Sources(source("b" * 300, "y"))
    await expect_error(
        Code.READ_FAILED,
        'failed to read referenced session: session "missing" not found',
        run(
            [{"sessionId": "b" * 300}, {"sessionId": "missing"}],
            sources,
            cfg=config(max_reference_bytes=200),
        ),
    )


# -- budget ----------------------------------------------------------------------------------


def big_source(size: int) -> SourceSnapshot:
    """A source with one user message of ``size`` ASCII bytes."""
    return source("big", "x" * size)


async def _budget_seen(lookup: Callable[[], Awaitable[Any]] | None, **cfg: Any) -> int:
    """Infer the budget prepare used from how much of a 300 000-byte text survives."""
    prepared = await run(
        [{"sessionId": "big"}], Sources(big_source(300_000)), lookup=lookup, cfg=config(**cfg)
    )
    data = conversation_of(prepared)[0]
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())


async def _route(route: Any) -> Any:
    await trio.lowlevel.checkpoint()
    return route


async def test_automatic_budget_from_context_window() -> None:
    """max(65536, floor(window * 4 * fraction)): 200 001 at 0.2 -> 160 000, at 0.1 -> 80 000."""
    route = ModelRoute(provider="p", model="m", context_window=200_001)
    assert await _budget_seen(lambda: _route(route)) == 160_000
    assert await _budget_seen(lambda: _route(route), reference_context_fraction=0.1) == 80_000
    assert await _budget_seen(lambda: _route(route), reference_context_fraction=0) == 65_536
    small = {"provider": "p", "model": "m", "contextWindow": 8000}
    assert await _budget_seen(lambda: _route(small)) == 65_536


@pytest.mark.parametrize(
    "route",
    [
        None,
        ModelRoute(provider=None, model="m", context_window=10**6),
        ModelRoute(provider="p", model=None, context_window=10**6),
        ModelRoute(provider="p", model="m", context_window=None),
        {"provider": "p", "model": "m"},
    ],
)
async def test_unknown_capacity_uses_64_kib(route: Any) -> None:
    """No route, no provider or model, or no context window: 65 536 bytes."""
    assert await _budget_seen(lambda: _route(route)) == 65_536


async def test_no_adapter_uses_64_kib_and_no_lookup_uses_64_kib() -> None:
    """NO_ADAPTER (typed or any error with that code) and a missing lookup give 65 536."""

    async def no_adapter() -> Any:
        raise ModelAdapterMissingError("no adapter for p/m")

    class LlmError(Exception):
        code = "NO_ADAPTER"

    async def duck() -> Any:
        raise LlmError("x")

    assert await _budget_seen(no_adapter) == 65_536
    assert await _budget_seen(duck) == 65_536
    assert await _budget_seen(None) == 65_536


async def test_explicit_budget_skips_the_lookup() -> None:
    """A configured maxReferenceBytes is used exactly and the route is never looked up."""
    calls: list[int] = []

    async def lookup() -> Any:
        calls.append(1)
        return ModelRoute(provider="p", model="m", context_window=10**6)

    assert await _budget_seen(lookup, max_reference_bytes=1000) <= 1000
    assert calls == []


async def test_other_lookup_failures_propagate_unchanged_before_reads() -> None:
    """Any other lookup error escapes as the same object and no source is read."""
    failure = ValueError("INVALID_MODEL_CONTEXT")

    async def lookup() -> Any:
        raise failure

    sources = Sources(source("a", "x"))
    with pytest.raises(ValueError, match=r"^INVALID_MODEL_CONTEXT$") as caught:
        await run([{"sessionId": "a"}], sources, lookup=lookup)
    assert caught.value is failure
    assert sources.reads == []


# -- omissions and spills ------------------------------------------------------------------------


async def test_unavailable_notice_without_store_matches_derived_example() -> None:
    """One user message 界x500, budget 180, no store: the spec's exact preview and tail."""
    prepared = await run(
        [{"sessionId": "source"}],
        Sources(source("source", "界" * 500)),
        cfg=config(max_reference_bytes=180),
    )
    text = prompt_of(prepared)
    assert conversation_of(prepared)[0]["conversation"][0]["text"] == (
        "界" * 9 + "\n[… omitted 1473 UTF-8 bytes …]"
    )
    assert text.endswith(
        "\n</referenced-sessions>\n\n## Reference omissions\n\n"
        "The previews above omit projected conversation text. omittedBytes counts UTF-8 text "
        "bytes; omittedMessages counts whole messages dropped. Full snapshots remain untrusted "
        "background information.\n"
        '[{"sessionId":"source","capturedThroughSeq":0,"omittedMessages":0,"omittedBytes":1473,'
        '"fullSnapshot":{"status":"unavailable","reason":"storage-not-configured"}}]'
    )


async def test_saved_notices_for_truncated_sources_only() -> None:
    """Truncated sources are saved (name by inputIndex + 1, owner = agent); intact ones not."""
    store = MemoryStore()
    sources = Sources(
        source("a", "short"), source("b", "old " * 100, "new"), source("c", "z" * 900)
    )
    prepared = await run(
        [{"sessionId": s} for s in "abc"], sources, store=store, cfg=config(max_reference_bytes=300)
    )
    assert sorted(r.suggested_name for r in store.requests) == [
        "session-reference-2.txt",
        "session-reference-3.txt",
    ]
    assert {r.owner_session_id for r in store.requests} == {"target"}
    notices = json.loads(prompt_of(prepared).rsplit("\n", 1)[1])
    assert [n["sessionId"] for n in notices] == ["b", "c"]
    assert notices[0]["fullSnapshot"] == {
        "status": "saved",
        "locator": "/spill/b/session-reference-2.txt",
        "bytes": notices[0]["fullSnapshot"]["bytes"],
        "retrievalHint": HINT,
    }
    request_b = next(r for r in store.requests if r.source_session_id == "b")
    assert request_b.content.count("### Message") == 2
    assert {ref.locator for ref in prepared.spilled} == {
        "/spill/b/session-reference-2.txt",
        "/spill/c/session-reference-3.txt",
    }


async def test_failed_save_becomes_a_save_failed_notice() -> None:
    """A rejecting store never fails the call; the notice says save-failed."""
    prepared = await run(
        [{"sessionId": "a"}],
        Sources(source("a", "x" * 900)),
        store=MemoryStore(fail=True),
        cfg=config(max_reference_bytes=300),
    )
    assert prompt_of(prepared).endswith(
        '"fullSnapshot":{"status":"unavailable","reason":"save-failed"}}]'
    )
    assert prepared.spilled == ()


async def test_local_store_end_to_end(tmp_path: Path) -> None:
    """The saved file holds the full transcript and its size is the notice's byte count."""
    store = LocalSpillStore(tmp_path)
    snapshot = source("a", "first " * 50, "second")
    prepared = await run(
        [{"sessionId": "a", "label": "A"}],
        Sources(snapshot),
        store=store,
        cfg=config(max_reference_bytes=200),
    )
    (ref,) = prepared.spilled
    from actors.session_references._retention import retain_referenced_session

    retained = retain_referenced_session(snapshot, "A", 200)
    assert retained is not None
    expected = render_transcript(retained.full_data, 0)
    assert await trio.Path(ref.locator).read_text("utf-8") == expected
    assert ref.bytes == len(expected.encode())
    assert ref.locator in prompt_of(prepared)
    await discard_spills(store, prepared.spilled)
    assert not await trio.Path(ref.locator).exists()


# -- cancellation ------------------------------------------------------------------------------


async def test_empty_fast_path_ignores_cancellation() -> None:
    """With zero references an already-cancelled scope still gets the content back."""
    with trio.CancelScope() as scope:
        scope.cancel()
        prepared = await run([], Sources())
    assert prepared.additional_context is None


async def test_normalization_errors_beat_cancellation() -> None:
    """A malformed reference reports INVALID_REFERENCE even when already cancelled."""
    with trio.CancelScope() as scope:
        scope.cancel()
        await expect_error(
            Code.INVALID_REFERENCE, "session reference must be an object", run([1], Sources())
        )


async def test_cancelled_before_reads() -> None:
    """An already-cancelled caller gets CANCELLED and no source is read."""
    sources = Sources(source("a", "x"))
    with trio.CancelScope() as scope:
        scope.cancel()
        error = await expect_error(
            Code.CANCELLED,
            "session reference preparation was cancelled",
            run([{"sessionId": "a"}], sources),
        )
    assert sources.reads == []
    assert isinstance(error.__cause__, BaseException)


async def test_cancelled_while_budget_lookup_is_pending() -> None:
    """Cancellation during the route lookup is CANCELLED; no read starts."""
    sources = Sources(source("a", "x"))
    never = trio.Event()

    async def lookup() -> Any:
        await never.wait()

    async with trio.open_nursery() as nursery:
        outcome: list[BaseException] = []

        async def call(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
            with trio.CancelScope() as scope:
                task_status.started(scope)
                try:
                    await run([{"sessionId": "a"}], sources, lookup=lookup)
                except SessionReferenceError as exc:
                    outcome.append(exc)

        scope = await nursery.start(call)
        await trio.testing.wait_all_tasks_blocked()
        scope.cancel()
    assert [e.code for e in outcome if isinstance(e, SessionReferenceError)] == [Code.CANCELLED]
    assert sources.reads == []


async def _cancel_when_blocked(
    work: Callable[[], Awaitable[Any]], ready: Callable[[], bool] = lambda: True
) -> BaseException | None:
    """Run ``work`` in its own scope, cancel it once everything blocks and ``ready()`` holds
    (a task waiting for a worker thread counts as blocked), return its error."""
    outcome: list[BaseException] = []
    async with trio.open_nursery() as nursery:

        async def call(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
            with trio.CancelScope() as scope:
                task_status.started(scope)
                try:
                    await work()
                except SessionReferenceError as exc:
                    outcome.append(exc)

        scope = await nursery.start(call)
        await trio.testing.wait_all_tasks_blocked()
        while not ready():
            await trio.sleep(0.001)
            await trio.testing.wait_all_tasks_blocked()
        scope.cancel()
    return outcome[0] if outcome else None


async def test_cancelled_during_reads() -> None:
    """Cancelling while reads are pending rejects with CANCELLED at once."""
    sources = Sources(source("a", "x"), source("b", "y"))
    sources.gates["a"] = trio.Event()
    with trio.fail_after(5):
        error = await _cancel_when_blocked(
            lambda: run([{"sessionId": "a"}, {"sessionId": "b"}], sources)
        )
    assert isinstance(error, SessionReferenceError)
    assert error.code is Code.CANCELLED


async def test_cancellation_wins_over_a_read_failure() -> None:
    """A read that fails after the caller cancelled yields CANCELLED, not READ_FAILED."""
    with trio.CancelScope() as scope:

        async def failing(session_id: str) -> SourceSnapshot:
            scope.cancel()
            raise LookupError("boom")

        with pytest.raises(SessionReferenceError) as caught:
            await prepare(Agent(), [], [{"sessionId": "a"}], read_snapshot=failing, config=config())
    assert caught.value.code is Code.CANCELLED


async def test_cancelled_during_spill_save_discards_completed_saves() -> None:
    """A cancel while one save is pending removes the save that already completed."""
    store = MemoryStore()
    store.gates["b"] = trio.Event()
    sources = Sources(source("a", "x" * 900), source("b", "y" * 900))
    with trio.fail_after(5):
        error = await _cancel_when_blocked(
            lambda: run(
                [{"sessionId": "a"}, {"sessionId": "b"}],
                sources,
                store=store,
                cfg=config(max_reference_bytes=300),
            ),
            ready=lambda: len(store.requests) == 2,
        )
    assert isinstance(error, SessionReferenceError)
    assert error.code is Code.CANCELLED
    assert [ref.locator for ref in store.discarded] == ["/spill/a/session-reference-1.txt"]


async def test_cancelled_right_after_saves_complete(tmp_path: Path) -> None:
    """An abort arriving as the save completes publishes nothing and removes the file."""
    store = LocalSpillStore(tmp_path)
    saved: list[SpillRef] = []

    class CancelAfterSave:
        def __init__(self, scope: trio.CancelScope) -> None:
            self.scope = scope

        async def save(self, request: SaveTextSpill) -> SpillRef:
            ref = await store.save(request)
            saved.append(ref)
            self.scope.cancel()
            return ref

        async def discard(self, ref: SpillRef) -> None:
            await store.discard(ref)

    with trio.CancelScope() as scope:
        with pytest.raises(SessionReferenceError) as caught:
            await run(
                [{"sessionId": "a"}],
                Sources(source("a", "x" * 900)),
                store=CancelAfterSave(scope),
                cfg=config(max_reference_bytes=300),
            )
    assert caught.value.code is Code.CANCELLED
    assert len(saved) == 1
    assert not await trio.Path(saved[0].locator).exists()


async def test_discard_spills_tolerates_failures_and_missing_store() -> None:
    """Discarding is best effort: a failing store or no store never raises."""

    class Broken(MemoryStore):
        async def discard(self, ref: SpillRef) -> None:
            raise OSError("gone")

    ref = SpillRef(locator="/x", bytes=1, retrieval_hint="")
    await discard_spills(Broken(), [ref])
    await discard_spills(None, [ref])


@pytest.mark.parametrize("outcome", ["retained", "budget-exceeded"])
async def test_cancel_while_retention_runs_in_its_thread(
    monkeypatch: pytest.MonkeyPatch, outcome: str
) -> None:
    """Retention runs in a worker thread; a cancel meanwhile is honoured as soon as it returns
    (CANCELLED, no spill attempted), unless retention itself failed with BUDGET_EXCEEDED,
    which upstream (retaining synchronously, where no abort can land) raises first."""
    in_thread, release = threading.Event(), threading.Event()
    real = prepare_module.render_sources

    def held(*args: Any) -> Any:
        in_thread.set()
        release.wait(10)
        if outcome == "budget-exceeded":
            raise SessionReferenceError.budget_exceeded()
        return real(*args)

    monkeypatch.setattr(prepare_module, "render_sources", held)
    store = MemoryStore()
    errors: list[SessionReferenceError] = []
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:

            async def call(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
                with trio.CancelScope() as scope:
                    task_status.started(scope)
                    try:
                        await run(
                            [{"sessionId": "a"}],
                            Sources(source("a", "x" * 900)),
                            store=store,
                            cfg=config(max_reference_bytes=300),
                        )
                    except SessionReferenceError as exc:
                        errors.append(exc)

            scope = await nursery.start(call)
            await trio.to_thread.run_sync(in_thread.wait, 5)
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert errors == []  # still waiting for the thread
            release.set()
    expected = Code.CANCELLED if outcome == "retained" else Code.BUDGET_EXCEEDED
    assert [error.code for error in errors] == [expected]
    assert store.requests == []
