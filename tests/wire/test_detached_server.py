"""Detached calls over real sockets: ended from a callback without a handler task, cancelled
(the holder is told why and answers with what happened), given up by the server's timer,
resumed onto a task."""

from __future__ import annotations

import gc
from typing import Any

import msgpack
import pytest
import trio

from tests.wire._detached_support import RawPeer, settle, start, wait_for
from wire import (
    CallCancelledError,
    CancelReason,
    DetachedCall,
    InternalError,
    UnavailableError,
    WireError,
    open_client,
)
from wire._detached import ANSWER_GRACE
from wire._errors import ErrorCode


async def test_detached_call_ends_from_another_task_without_a_handler_task(
    nursery: trio.Nursery, inproc_or_ipc: str
) -> None:
    """A detached call spends no handler task while in flight and returns the value given to
    succeed by another task."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, inproc_or_ipc)
        async with open_client(bound) as client:
            results: list[Any] = []

            async def caller() -> None:
                results.append(await client.call("d/hold"))

            async with trio.open_nursery() as calls:
                calls.start_soon(caller)
                await relay.begun.wait()
                stats = server.statistics()
                assert stats.handler_tasks == 0
                assert stats.calls["running"] == 1
                assert not relay.calls[0].ended
                relay.calls[0].succeed({"answer": [42]})
                assert relay.calls[0].ended
            assert results == [{"answer": [42]}]
            assert relay.cancels == []
            stats = server.statistics()
            assert stats.calls["running"] == 0 and stats.cancelled_total == 0
            assert client.statistics().pending_calls == 0
        await server.aclose()


async def test_an_encoded_value_reaches_the_caller_decoded(nursery: trio.Nursery, ipc: str) -> None:
    """succeed_encoded answers with msgpack bytes passed on as they are: the caller reads the
    value they encode."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        async with open_client(bound) as client:
            results: list[Any] = []

            async def caller() -> None:
                results.append(await client.call("d/hold"))

            async with trio.open_nursery() as calls:
                calls.start_soon(caller)
                await relay.begun.wait()
                relay.calls[0].succeed_encoded(msgpack.packb({"answer": [42, "x"]}))
            assert results == [{"answer": [42, "x"]}]
        await server.aclose()


async def test_begin_may_answer_at_once(nursery: trio.Nursery, ipc: str) -> None:
    """A begin that answers before returning ends the call with that value, once, deadline or
    not, and the server's deadline timer leaves it alone afterwards."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        peer = RawPeer(bound)
        try:
            await peer.greet()
            peer.send({"type": "call", "id": 1, "endpoint": "d/now", "args": {"value": "a"}})
            peer.send(
                {
                    "type": "call",
                    "id": 2,
                    "endpoint": "d/now",
                    "args": {"value": "b"},
                    "deadlineMs": 150,
                }
            )
            assert await peer.receive_until(lambda m: m.get("id") == 1) == {
                "type": "result",
                "id": 1,
                "value": "a",
            }
            assert await peer.receive_until(lambda m: m.get("id") == 2) == {
                "type": "result",
                "id": 2,
                "value": "b",
            }
            await trio.sleep(0.35)  # past call 2's deadline, and a few timer ticks
            await peer.round_trip(3)
            assert len(peer.frames_for(1)) == len(peer.frames_for(2)) == 1
            assert relay.cancels == []
            stats = server.statistics()
            assert stats.handler_tasks == 0 and stats.cancelled_total == 0
        finally:
            peer.close()
        await server.aclose()


async def test_a_callers_cancel_is_passed_on_and_the_holder_answers(
    nursery: trio.Nursery, inproc_or_ipc: str
) -> None:
    """A caller's cancel reaches the holder's on_cancel as CALLER and leaves the call in
    flight until the holder answers; its answer ends it (counted as a cancel) and a later one
    changes nothing."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, inproc_or_ipc)
        async with open_client(bound) as client:
            # An explicit cancel, not move_on_after: a caller's deadline travels with the call,
            # and a cancel once it passed is passed on as DEADLINE.
            async with trio.open_nursery() as calls:
                scope = trio.CancelScope()

                async def caller() -> None:
                    with scope:
                        await client.call("d/hold")

                calls.start_soon(caller)
                await relay.begun.wait()
                scope.cancel()
            assert scope.cancelled_caught
            await wait_for(lambda: relay.cancels != [], "on_cancel")
            assert relay.cancels == [CancelReason.CALLER]
            assert not relay.calls[0].ended and relay.calls[0].cancelling
            assert server.statistics().calls["cancelling-running"] == 1
            relay.calls[0].cancelled("queued")
            assert relay.calls[0].ended
            assert server.statistics().cancelled_total == 1
            relay.calls[0].succeed("late")
            assert await client.call("t/echo", {"value": "after"}) == "after"
            assert server.statistics().cancelled_total == 1
            assert client.statistics().pending_calls == 0
            assert sum(server.statistics().calls.values()) == 0
        await server.aclose()


async def test_a_cancelled_detached_call_is_answered_with_what_the_holder_learns(
    nursery: trio.Nursery, ipc: str
) -> None:
    """A cancel frame gets no answer of its own: the call's one terminal frame is the holder's
    answer, a result when the call had finished first, cancelled (with the state the holder
    reports) when it was stopped."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        peer = RawPeer(bound)
        try:
            await peer.greet()
            peer.send({"type": "call", "id": 1, "endpoint": "d/hold", "args": {}})
            await relay.begun.wait()
            peer.send({"type": "cancel", "id": 1, "reason": "caller"})
            await wait_for(lambda: relay.cancels != [], "on_cancel")
            await peer.round_trip(2)
            assert peer.frames_for(1) == []  # no answer until the holder knows
            relay.calls[0].succeed("applied")
            reply = await peer.receive_until(lambda m: m.get("id") == 1)
            assert reply == {"type": "result", "id": 1, "value": "applied"}

            peer.send({"type": "call", "id": 3, "endpoint": "d/hold", "args": {}})
            await wait_for(lambda: len(relay.calls) == 2, "the second call")
            peer.send({"type": "cancel", "id": 3, "reason": "superseded"})
            await wait_for(lambda: len(relay.cancels) == 2, "the second on_cancel")
            relay.calls[1].cancelled("queued")
            stopped = await peer.receive_until(lambda m: m.get("id") == 3)
            assert stopped["code"] == "cancelled"
            assert stopped["details"] == {"state": "queued", "reason": "superseded"}
            assert relay.cancels == [CancelReason.CALLER, CancelReason.SUPERSEDED]

            for held in relay.calls:
                held.succeed("late")
                held.fail(UnavailableError("late"))
            await peer.round_trip(4)
            assert peer.frames_for(1) == [reply]
            assert peer.frames_for(3) == [stopped]
        finally:
            peer.close()
        await server.aclose()


async def test_a_detached_call_past_its_deadline_and_grace_is_answered_unavailable(
    nursery: trio.Nursery, ipc: str
) -> None:
    """A call handed on whose holder never answers gets one unavailable frame (outcome
    unknown) ANSWER_GRACE after its deadline, never deadline-exceeded, and the holder is told
    to give it up; one answered in time is left alone."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        peer = RawPeer(bound)
        try:
            await peer.greet()
            sent = trio.current_time()
            peer.send(
                {"type": "call", "id": 1, "endpoint": "d/hold", "args": {}, "deadlineMs": 300}
            )
            with trio.fail_after(5):
                reply = await peer.receive_until(lambda m: m.get("id") == 1)
            elapsed = trio.current_time() - sent
            assert reply["type"] == "error" and reply["code"] == "unavailable"
            assert reply["details"] == {"outcome": "unknown"}
            assert "may have taken effect" in reply["message"]
            assert elapsed >= 0.25 + ANSWER_GRACE, f"gave up {elapsed:.3f} s after sending"
            assert relay.cancels == [CancelReason.DEADLINE]
            relay.calls[0].succeed("late")

            # Answered before its deadline: the timer must not expire it afterwards.
            peer.send(
                {"type": "call", "id": 3, "endpoint": "d/hold", "args": {}, "deadlineMs": 200}
            )
            await wait_for(lambda: len(relay.calls) == 2, "the second call")
            relay.calls[1].succeed("in time")
            assert await peer.receive_until(lambda m: m.get("id") == 3) == {
                "type": "result",
                "id": 3,
                "value": "in time",
            }
            await trio.sleep(0.4)
            await peer.round_trip(2)
            assert peer.frames_for(1) == [reply]
            assert len(peer.frames_for(3)) == 1
            assert relay.cancels == [CancelReason.DEADLINE]
            assert server.statistics().handler_tasks == 0
        finally:
            peer.close()
        await server.aclose()


async def test_a_cancelled_call_whose_holder_never_answers_is_answered_unavailable(
    nursery: trio.Nursery, ipc: str
) -> None:
    """A cancel passed on with no answer within ANSWER_GRACE ends the call unavailable
    (outcome unknown), not cancelled: the server cannot know it had no effect."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        peer = RawPeer(bound)
        try:
            await peer.greet()
            peer.send({"type": "call", "id": 1, "endpoint": "d/hold", "args": {}})
            await relay.begun.wait()
            cancelled_at = trio.current_time()
            peer.send({"type": "cancel", "id": 1, "reason": "caller"})
            reply = await peer.receive_until(lambda m: m.get("id") == 1)
            assert trio.current_time() - cancelled_at >= ANSWER_GRACE - 0.05
            assert reply["code"] == "unavailable" and reply["details"] == {"outcome": "unknown"}
            assert relay.cancels == [
                CancelReason.CALLER,
                CancelReason.CALLER,
            ]  # told, then given up
        finally:
            peer.close()
        await server.aclose()


async def test_a_holder_that_hands_nothing_on_gets_deadline_exceeded_at_the_deadline(
    nursery: trio.Nursery, ipc: str
) -> None:
    """A detached call with no on_cancel is answered deadline-exceeded at its deadline, as a
    handler task would be: nothing was handed on, so nothing else can answer for it."""
    with trio.fail_after(10):
        server, _, bound = await start(nursery, ipc)
        peer = RawPeer(bound)
        try:
            await peer.greet()
            sent = trio.current_time()
            peer.send(
                {"type": "call", "id": 1, "endpoint": "d/hold-bare", "args": {}, "deadlineMs": 300}
            )
            reply = await peer.receive_until(lambda m: m.get("id") == 1)
            elapsed = trio.current_time() - sent
            assert reply["code"] == "deadline-exceeded"
            assert reply["details"] == {"state": "running", "reason": "deadline"}
            assert 0.25 <= elapsed < 0.25 + ANSWER_GRACE, f"answered after {elapsed:.3f} s"
        finally:
            peer.close()
        await server.aclose()


async def test_resume_answers_with_the_handlers_value(nursery: trio.Nursery, ipc: str) -> None:
    """A detached call resumed onto a handler answers with that handler's value."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        async with open_client(bound) as client:
            assert await client.call("d/resume", {"value": ["x", 1]}) == ["x", 1]
            assert relay.resumed == ["value"]
            assert relay.cancels == []
            await settle(server)
            assert server.statistics().cancelled_total == 0
        await server.aclose()


async def test_cancel_reaches_a_resumed_handler(nursery: trio.Nursery, ipc: str) -> None:
    """A caller's cancel while a resumed handler runs cancels that handler's task and ends the
    call cancelled; the detached on_cancel is no longer told."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        async with open_client(bound) as client:
            async with trio.open_nursery() as calls:
                scope = trio.CancelScope()

                async def caller() -> None:
                    with scope:
                        await client.call("d/resume-slow", {"seconds": 30})

                calls.start_soon(caller)
                await relay.resumed_running.wait()
                assert server.statistics().handler_tasks == 1
                scope.cancel()
            assert scope.cancelled_caught
            await settle(server)
            assert relay.resumed == ["cancelled"]
            assert relay.cancels == []
            assert server.statistics().cancelled_total == 1
            assert client.statistics().pending_calls == 0
        await server.aclose()


async def test_resumed_handler_runs_under_the_calls_deadline(
    nursery: trio.Nursery, ipc: str
) -> None:
    """A resumed handler's scope carries the call's deadline: it is cancelled and the caller
    gets one deadline-exceeded frame."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        peer = RawPeer(bound)
        try:
            await peer.greet()
            peer.send(
                {
                    "type": "call",
                    "id": 1,
                    "endpoint": "d/resume-slow",
                    "args": {"seconds": 30},
                    "deadlineMs": 200,
                }
            )
            reply = await peer.receive_until(lambda m: m.get("id") == 1)
            assert reply["code"] == "deadline-exceeded"
            assert reply["details"] == {"state": "running", "reason": "deadline"}
            await settle(server)
            assert relay.resumed == ["cancelled"]
            assert relay.cancels == []
            await peer.round_trip(2)
            assert peer.frames_for(1) == [reply]
        finally:
            peer.close()
        await server.aclose()


async def test_begin_raising_answers_the_call_and_the_server_serves_on(
    nursery: trio.Nursery, ipc: str
) -> None:
    """A WireError raised by begin answers with its code and details, anything else with
    internal, and the server keeps serving."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        async with open_client(bound) as client:
            with pytest.raises(UnavailableError, match=r"^relay target is down$") as wire:
                await client.call("d/fail-wire")
            assert wire.value.code is ErrorCode.UNAVAILABLE
            assert dict(wire.value.details) == {"worker": "w9"}
            with pytest.raises(InternalError, match=r"^relay broke$") as bug:
                await client.call("d/fail-bug")
            assert bug.value.code is ErrorCode.INTERNAL
            assert relay.cancels == []
            assert await client.call("t/echo", {"value": "still here"}) == "still here"
            assert sum(server.statistics().calls.values()) == 0
        await server.aclose()


async def test_shutdown_passes_the_cancel_on_and_drains_with_the_answers(
    nursery: trio.Nursery, ipc: str
) -> None:
    """aclose with detached calls in flight tells each holder SHUTDOWN and waits for their
    answers: one answered cancelled reaches its caller as a shutdown cancel, one never
    answered gets unavailable (outcome unknown) after the grace, and aclose then returns."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        async with open_client(bound) as client:
            caught: list[WireError] = []

            async def waiting() -> None:
                try:
                    await client.call("d/hold")
                except WireError as exc:
                    caught.append(exc)

            async def answer_the_first() -> None:
                await wait_for(lambda: len(relay.cancels) == 2, "both on_cancels")
                relay.calls[0].cancelled("running")

            async with trio.open_nursery() as calls:
                calls.start_soon(waiting)
                await relay.begun.wait()
                calls.start_soon(waiting)
                await wait_for(lambda: len(relay.calls) == 2, "the second call")
                calls.start_soon(answer_the_first)
                began = trio.current_time()
                await server.aclose()
                took = trio.current_time() - began
            assert took < ANSWER_GRACE + 1.0, f"aclose took {took:.2f} s"
            assert relay.cancels[:2] == [CancelReason.SHUTDOWN, CancelReason.SHUTDOWN]
            assert sorted(type(exc).__name__ for exc in caught) == [
                "CallCancelledError",
                "UnavailableError",
            ]
            stopped = next(e for e in caught if isinstance(e, CallCancelledError))
            assert stopped.reason is CancelReason.SHUTDOWN and stopped.state == "running"
            unknown = next(e for e in caught if isinstance(e, UnavailableError))
            assert dict(unknown.details) == {"outcome": "unknown"}


async def test_a_lost_peer_cancels_its_detached_calls(nursery: trio.Nursery, ipc: str) -> None:
    """A peer that says bye with a detached call in flight has the call given up at once
    (PEER_LOST passed on) and nothing is left in flight."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        peer = RawPeer(bound)
        try:
            await peer.greet()
            peer.send({"type": "call", "id": 1, "endpoint": "d/hold", "args": {}})
            await relay.begun.wait()
            peer.send({"type": "bye"})
            await wait_for(lambda: relay.cancels != [], "on_cancel")
            assert relay.cancels == [CancelReason.PEER_LOST]
            assert relay.calls[0].ended
            relay.calls[0].succeed("nobody listens")
            assert server.statistics().peers == 0
            assert sum(server.statistics().calls.values()) == 0
        finally:
            peer.close()
        await server.aclose()


# -- Client.start_call ------------------------------------------------------------------------


async def test_an_ended_detached_call_is_freed_without_the_cycle_collector(
    nursery: trio.Nursery, ipc: str
) -> None:
    """A detached call and its record are freed when the call ends, answered, cancelled or
    resumed: a relay ends millions, and as cyclic garbage they made the collector a fifth of
    its CPU and its full passes stalled every call in flight."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        gc.collect()
        gc.disable()
        try:
            async with open_client(bound) as client:
                for _ in range(3):
                    assert await client.call("d/now", {"value": 1}) == 1
                    assert await client.call("d/resume", {"value": 2}) == 2
                    relay.calls.clear()  # what a relay forgets once it answered
                    async with trio.open_nursery() as calls:
                        calls.start_soon(client.call, "d/hold")
                        await wait_for(lambda: len(relay.calls) == 1, "the held call")
                        relay.calls[0].succeed(3)
                    relay.calls.clear()
                    with trio.move_on_after(5) as scope:
                        async with trio.open_nursery() as calls:
                            calls.start_soon(client.call, "d/hold")
                            await wait_for(lambda: len(relay.calls) == 1, "the held call")
                            calls.cancel_scope.cancel()
                    assert not scope.cancelled_caught
                    await wait_for(lambda: relay.cancels != [], "on_cancel")
                    relay.calls[0].cancelled()
                    relay.calls.clear()
                    relay.cancels.clear()
                await settle(server)
                left = [o for o in gc.get_objects() if isinstance(o, DetachedCall)]
                assert left == [], f"{len(left)} ended detached calls wait for the collector"
        finally:
            gc.enable()
        await server.aclose()
