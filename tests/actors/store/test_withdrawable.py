"""A cancel that comes before a worker thread starts an append's write withdraws it: nothing is
written and the caller's cancel stands; once the write has started, it finishes and counts.
(Appends go to a worker thread on a slow disk or with a large batch: `WritePlacement`.)"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import trio
import trio.testing

from actors._store_services import SessionServices
from actors.session_log._reader import load_session
from actors.store._idempotency import keyed_request
from actors.store._withdrawable import write_withdrawable
from actors.store._write_placement import WritePlacement
from tests.actors.store._writing import prompt, writing_session


@contextmanager
def worker_threads_busy() -> Iterator[trio.CapacityLimiter]:
    """Every worker thread trio may start is taken (as on a host whose threads all wait for a
    slow disk): `trio.to_thread` waits until the test lets one go."""
    limiter = trio.to_thread.current_default_thread_limiter()
    total = limiter.total_tokens
    limiter.total_tokens = 1
    limiter.acquire_nowait()
    try:
        yield limiter
    finally:
        if limiter.borrowed_tokens:  # pragma: no cover - the test failed before releasing
            limiter.release()
        limiter.total_tokens = total


async def test_a_cancel_before_the_thread_starts_withdraws_the_write() -> None:
    ran: list[str] = []
    with worker_threads_busy() as limiter:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(write_withdrawable, lambda: ran.append("write"))
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
                limiter.release()  # a thread is free the moment the cancel is delivered
    await trio.to_thread.run_sync(lambda: None)  # a thread could start now: none was asked to
    assert scope.cancelled_caught and ran == []


async def test_a_write_already_started_finishes_and_returns_its_result() -> None:
    started, release = threading.Event(), threading.Event()
    results: list[str] = []

    def write() -> str:
        started.set()
        release.wait(10)
        return "written"

    scope = trio.CancelScope()

    async def call() -> None:
        with scope:
            results.append(await write_withdrawable(write))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        assert await trio.to_thread.run_sync(started.wait, 10)
        scope.cancel()
        await trio.sleep(0.05)
        assert results == []  # still waiting for the write, shielded
        release.set()
    assert results == ["written"]


async def test_a_withdrawn_append_leaves_the_session_as_it_was(services: SessionServices) -> None:
    """The cancelled append is not in the log, nor in memory, nor its key: the next append
    takes its seq, and a retry with the same key is applied (once)."""
    services.directory.placement = WritePlacement(inline_bytes=-1)  # every write in a thread
    state = await writing_session(services)
    keyed = keyed_request("sessions/append", "k1", {"events": ["second"]})
    with worker_threads_busy() as limiter:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: state.append(prompt("second"), keyed=keyed))
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
                limiter.release()  # a thread is free the moment the cancel is delivered
    assert scope.cancelled_caught
    assert state.captured_through_seq == 0
    assert load_session(state.path).captured_through_seq == 0
    retried = await state.append(prompt("second"), keyed=keyed)
    again = await state.append(prompt("second"), keyed=keyed)
    assert retried.seqs == again.seqs == (2,)  # seq 1 is the key's record
    texts = [
        event["data"]["id"]
        for event in load_session(state.path).events
        if event["type"] == "user/message"
    ]
    assert texts == ["first", "second"]
