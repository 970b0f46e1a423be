"""Superseded calls are shed before they start: the server stages keyed calls and reads ahead.

The unit tests drive :class:`CallStage` with records; the last test is a real server with a
raw DEALER that pipelines 100 keyed calls behind a handler that holds the server's loop, as a
server under overload finds them: only the newest runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import msgpack
import trio
import zmq

from wire import Endpoint, EndpointSpec, Param, Registry, Server, open_client
from wire._messages import Call
from wire._server_events import CallRecord, Interrupted
from wire._staging import STAGED, CallStage
from wire._state import CallState


def record(call_id: int, supersede: str | None = None, deadline: float | None = None) -> CallRecord:
    call = Call(id=call_id, endpoint="t/x", supersede=supersede)
    return CallRecord(peer=b"p", call=call, deadline=deadline)


class Driver:
    def __init__(self, *, behind: bool = True) -> None:
        self.now = 0.0
        self.started: list[int] = []
        self.ended: list[tuple[int, Interrupted]] = []
        self.stage = CallStage(self.start, self.finish, lambda: self.now)
        self.stage.behind = behind

    def start(self, rec: CallRecord) -> None:
        self.started.append(rec.call.id)

    def finish(self, rec: CallRecord, how: Interrupted) -> None:
        self.ended.append((rec.call.id, how))


def test_an_unkeyed_call_starts_at_once_while_nothing_waits() -> None:
    driver = Driver()
    assert not driver.stage.offer(record(1))
    assert not driver.stage.waiting()


def test_a_server_that_keeps_up_starts_keyed_calls_at_once() -> None:
    """Nothing is left unread, so no newer call can be waiting to supersede this one."""
    driver = Driver(behind=False)
    assert not driver.stage.offer(record(1, "k"))
    assert not driver.stage.waiting()


def test_keyed_calls_and_the_calls_after_them_wait_in_arrival_order() -> None:
    driver = Driver()
    stage = driver.stage
    assert stage.offer(record(1, "k"))
    assert stage.offer(record(2))  # behind a staged call: keeps its place
    assert stage.held_in_drain == 2
    assert stage.release(1) == 1 and driver.started == [1]
    assert stage.release(5) == 1 and driver.started == [1, 2]
    assert not stage.waiting()


def test_a_shed_call_ends_unrun_and_is_skipped() -> None:
    driver = Driver()
    stage = driver.stage
    older, newer = record(1, "k"), record(2, "k")
    stage.offer(older)
    stage.offer(newer)
    assert older.handle is STAGED
    assert stage.shed(older)
    assert driver.ended == [(1, Interrupted.CANCELLED)]
    assert not stage.shed(older)  # once
    assert stage.release(5) == 1 and driver.started == [2]


def test_a_call_whose_deadline_passed_while_staged_ends_unrun() -> None:
    driver = Driver()
    stage = driver.stage
    stage.offer(record(1, "k", deadline=1.0))
    stage.offer(record(2, "k", deadline=5.0))
    driver.now = 2.0
    assert stage.release(5) == 1
    assert driver.ended == [(1, Interrupted.DEADLINE)] and driver.started == [2]


def test_a_call_no_longer_queued_is_not_started() -> None:
    driver = Driver()
    rec = record(1, "k")
    driver.stage.offer(rec)
    rec.state = CallState.DONE
    assert driver.stage.release(5) == 0 and driver.started == []


N = Param(name="n", wire_name="n", annotation=int)


class Work:
    def __init__(self) -> None:
        self.ran: list[int] = []

    async def hold(self, ctx: Any, args: dict[str, Any]) -> None:
        # Holds the server's loop without yielding: what an overloaded server looks like.
        time.sleep(0.3)  # noqa: ASYNC251

    async def work(self, ctx: Any, args: dict[str, Any]) -> int:
        self.ran.append(args["n"])
        return int(args["n"])


async def _busy_server(nursery: trio.Nursery, tmp_path: Path) -> tuple[Server, str, Work]:
    """A server with ``t/hold`` (holds its loop) and ``t/work`` (records that it ran)."""
    work = Work()
    registry = Registry(
        [
            Endpoint(spec=EndpointSpec(name="t/hold"), handler=work.hold),
            Endpoint(spec=EndpointSpec(name="t/work", params=(N,)), handler=work.work),
        ]
    )
    server = Server(registry)
    [bound] = await nursery.start(server.run, f"ipc://{tmp_path}/s.sock")
    return server, bound, work


def _burst(bound: str, count: int, *, keyed: range) -> zmq.Socket[bytes]:
    """A raw DEALER that said hello, sent ``t/hold`` (id 1) and then ``count`` ``t/work``
    calls (ids from 2), those whose id is in ``keyed`` with one supersede key."""
    socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(bound)
    socket.send(msgpack.packb({"type": "hello", "versions": [1], "name": "typist"}))
    socket.send(msgpack.packb({"type": "call", "id": 1, "endpoint": "t/hold", "args": {}}))
    for n in range(2, count + 2):
        call = {"type": "call", "id": n, "endpoint": "t/work", "args": {"n": n}}
        socket.send(msgpack.packb({**call, **({"supersede": "completion"} if n in keyed else {})}))
    return socket


async def test_superseded_calls_waiting_to_be_read_are_shed_before_they_start(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """200 calls, then 100 calls with one supersede key, pipelined while the server is busy:
    the newest keyed call returns its result, nearly all the other keyed calls end
    ``cancelled`` in state ``queued`` (their handler never ran), every call gets exactly one
    terminal frame, and every call counts in ``callsTotal``, shed or run."""
    server, bound, work = await _busy_server(nursery, tmp_path)
    socket = _burst(bound, 300, keyed=range(202, 302))
    try:
        terminal: dict[int, list[dict[str, Any]]] = {}
        with trio.fail_after(30):
            while len(terminal) < 301 or 301 not in terminal:
                if not socket.poll(0):
                    await trio.sleep(0.005)
                    continue
                frame = msgpack.unpackb(socket.recv())
                if frame["type"] in ("result", "error") and frame.get("id") is not None:
                    terminal.setdefault(frame["id"], []).append(frame)
        await trio.sleep(0.2)  # a second terminal frame would come by now
        while socket.poll(0):
            frame = msgpack.unpackb(socket.recv())
            if frame.get("id") is not None:
                terminal.setdefault(frame["id"], []).append(frame)
        assert all(len(frames) == 1 for frames in terminal.values())
        assert all(terminal[n][0]["type"] == "result" for n in range(2, 202))
        assert terminal[301][0] == {"type": "result", "id": 301, "value": 301}
        shed = [
            n
            for n, [frame] in terminal.items()
            if frame["type"] == "error"
            and frame["code"] == "cancelled"
            and frame["details"] == {"state": "queued", "reason": "superseded"}
        ]
        assert len(shed) >= 95, terminal
        assert sorted(shed + work.ran) == list(range(2, 302))  # shed or ran, never both
        assert 301 in work.ran
        # Every call was admitted, the shed ones too (protocol §5.3 step 4).
        assert server.statistics().calls_total == 301
        await server.aclose()
    finally:
        socket.close(linger=0)


async def test_a_server_shutting_down_ends_each_staged_call_once(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Shutdown while calls are staged: each call read gets exactly one terminal frame, a
    staged call is answered ``cancelled`` (``queued``, reason ``shutdown``) and never runs, a
    call answered with a result ran, and the peer gets its ``bye``."""
    server, bound, work = await _busy_server(nursery, tmp_path)
    # Unkeyed calls first (they put the server behind), then keyed ones, then unkeyed ones
    # again, which wait behind the staged keyed call.
    socket = _burst(bound, 600, keyed=range(200, 300))
    try:
        with trio.fail_after(30):
            while len(server._stage) < 50:  # calls staged, not merely spawned
                await trio.lowlevel.checkpoint()
        nursery.start_soon(server.aclose)
        terminal: dict[int, list[dict[str, Any]]] = {}
        bye = False
        with trio.fail_after(30):
            while not bye:
                if not socket.poll(0):
                    await trio.sleep(0.005)
                    continue
                frame = msgpack.unpackb(socket.recv())
                if frame["type"] == "bye":
                    bye = True
                elif frame["type"] in ("result", "error") and frame.get("id") is not None:
                    terminal.setdefault(frame["id"], []).append(frame)
        # Calls still unread at the bye get no frame (the client fails them, protocol §4.5):
        # the tail of the burst, none of which ran.
        unread = set(range(1, 602)) - set(terminal)
        assert not unread or min(unread) > max(terminal), sorted(unread)
        assert not unread & set(work.ran)
        assert all(len(frames) == 1 for frames in terminal.values())
        answers = {n: frames[0] for n, frames in terminal.items()}
        results = {n for n, f in answers.items() if f["type"] == "result" and n > 1}
        cancelled = {n for n, f in answers.items() if f.get("code") == "cancelled"}
        shut_while_staged = {
            n
            for n in cancelled
            if answers[n]["details"] == {"state": "queued", "reason": "shutdown"}
        }
        assert shut_while_staged, answers
        assert results == set(work.ran)  # a result ran; nothing else did
        assert not cancelled & set(work.ran)
    finally:
        socket.close(linger=0)


async def test_the_staged_calls_of_a_peer_that_left_end_without_running(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """A peer that sends a burst and goes away while calls of it are staged: once the server
    finds it gone, its staged calls end (no frame: nobody is left to read one) without
    running, nothing stays in flight, and the server goes on serving."""
    server, bound, work = await _busy_server(nursery, tmp_path)
    socket = _burst(bound, 600, keyed=range(200, 300))
    with trio.fail_after(30):
        while len(server._stage) < 50:  # calls staged, not merely spawned
            await trio.lowlevel.checkpoint()
    socket.close(linger=0)  # gone with calls staged (ZeroMQ drops what it had not handed over)
    with trio.fail_after(30):
        while True:
            stats = server.statistics()
            if stats.peers == 0 and not any(stats.calls.values()):
                break
            await trio.sleep(0.05)
    assert len(work.ran) < 600, "every call ran for a peer that was gone"
    assert server.statistics().cancelled_total > 0, "no staged call was ended"
    async with open_client(bound) as other:
        assert await other.call("t/work", {"n": 7}) == 7
    await server.aclose()


def test_a_held_drain_stages_every_call_it_reads() -> None:
    driver = Driver(behind=False)
    driver.stage.hold = True
    assert driver.stage.offer(record(1))
    assert driver.started == []


async def test_a_burst_of_cancels_takes_effect_in_one_pass_and_starts_nothing_before(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Running handlers, then, while an inline call holds a drain, a cancel for each and one
    more (inline) call: the first cancelled handler to run finds every cancel applied (the
    drain read on past the first), and the call read after them runs only once they all
    ended, whichever order trio runs a batch in (eight rounds). A drain that stopped at each
    cancel applied one per pass; a pump that ran first in the next batch ran the call first."""
    events: list[tuple[str, int, int]] = []
    servers: list[Server] = []

    async def wait(ctx: Any, args: dict[str, Any]) -> None:
        try:
            await trio.sleep_forever()
        finally:
            cancelling = servers[0].statistics().calls["cancelling-running"]
            events.append(("ended", args["n"], cancelling))

    async def never(ctx: Any, args: dict[str, Any]) -> None:
        raise AssertionError("runs inline")

    def work(ctx: Any, args: dict[str, Any]) -> int:
        events.append(("started", args["n"], 0))
        return int(args["n"])

    def hold(ctx: Any, args: dict[str, Any]) -> None:
        time.sleep(0.1)  # holds the drain that read it: the burst behind it arrives meanwhile

    registry = Registry(
        [
            Endpoint(spec=EndpointSpec(name="t/wait", params=(N,)), handler=wait),
            Endpoint(spec=EndpointSpec(name="t/work", params=(N,)), handler=never, run_inline=work),
            Endpoint(spec=EndpointSpec(name="t/hold"), handler=never, run_inline=hold),
        ]
    )
    server = Server(registry)
    servers.append(server)
    [bound] = await nursery.start(server.run, f"ipc://{tmp_path}/s.sock")
    socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(bound)

    def send(frame: dict[str, Any]) -> None:
        socket.send(msgpack.packb(frame))

    try:
        send({"type": "hello", "versions": [1], "name": "canceller"})
        for first in range(1, 80, 10):
            events.clear()
            waiters = range(first, first + 4)
            for n in waiters:
                send({"type": "call", "id": n, "endpoint": "t/wait", "args": {"n": n}})
            with trio.fail_after(30):
                while server.statistics().calls["running"] < 4:
                    await trio.sleep(0.01)
            # Sent at once, without yielding: the server reads the hold first, and the rest
            # while its drain is held, all in one drain.
            send({"type": "call", "id": first + 4, "endpoint": "t/hold", "args": {}})
            for n in waiters:
                send({"type": "cancel", "id": n, "reason": "caller"})
            after = first + 5
            send({"type": "call", "id": after, "endpoint": "t/work", "args": {"n": after}})
            terminal: dict[int, dict[str, Any]] = {}
            with trio.fail_after(30):
                while len(terminal) < 6:  # the hold answers too
                    if not socket.poll(0):
                        await trio.sleep(0.005)
                        continue
                    frame = msgpack.unpackb(socket.recv())
                    if frame["type"] in ("result", "error") and frame.get("id") is not None:
                        terminal[frame["id"]] = frame
            assert all(terminal[n]["code"] == "cancelled" for n in waiters), terminal
            assert terminal[after] == {"type": "result", "id": after, "value": after}
            ended = [event for event in events if event[0] == "ended"]
            assert ended[0][2] == 4, events  # every cancel applied before any handler ran
            assert events[-1] == ("started", after, 0), events
        await server.aclose()
    finally:
        socket.close(linger=0)
