"""The trio transport over real ZeroMQ sockets (inproc, ipc, tcp) inside one process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
import trio
import zmq

from wire import (
    ArgumentsInvalidError,
    CallCancelledError,
    CancelReason,
    Client,
    Endpoint,
    EndpointSpec,
    OverloadedError,
    Param,
    Registry,
    Server,
    ServerLimits,
    UnknownEndpointError,
    open_client,
)


class Probe:
    """Handlers that record how they ended, as the server saw it."""

    def __init__(self) -> None:
        self.endings: list[str] = []
        self.running = trio.Event()

    async def echo(self, ctx: Any, args: dict[str, Any]) -> Any:
        return args["value"]

    async def sleep(self, ctx: Any, args: dict[str, Any]) -> str:
        self.running.set()
        try:
            await trio.sleep(args["seconds"])
        except trio.Cancelled:
            self.endings.append("cancelled")
            raise
        self.endings.append("completed")
        return "slept"

    async def fail(self, ctx: Any, args: dict[str, Any]) -> None:
        raise RuntimeError("handler broke")

    async def unencodable(self, ctx: Any, args: dict[str, Any]) -> Any:
        """A result msgpack or the protocol cannot carry, picked by ``value``."""
        return {"int-key": {"ok": {1: "one"}}, "object": [object()]}[args["value"]]


def registry(probe: Probe) -> Registry:
    value = Param(name="value", wire_name="value", annotation=Any)
    seconds = Param(name="seconds", wire_name="seconds", annotation=float)
    return Registry(
        [
            Endpoint(spec=EndpointSpec(name="t/echo", params=(value,)), handler=probe.echo),
            Endpoint(spec=EndpointSpec(name="t/sleep", params=(seconds,)), handler=probe.sleep),
            Endpoint(spec=EndpointSpec(name="t/fail"), handler=probe.fail),
            Endpoint(
                spec=EndpointSpec(name="t/unencodable", params=(value,)),
                handler=probe.unencodable,
            ),
        ]
    )


ServeFn = Callable[..., Any]


@pytest.fixture(params=["inproc", "ipc", "tcp"])
def address(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return {
        "inproc": f"inproc://test-{id(tmp_path)}",
        "ipc": f"ipc://{tmp_path}/s.sock",
        "tcp": "tcp://127.0.0.1:0",
    }[request.param]


async def start(
    nursery: trio.Nursery, address: str, limits: ServerLimits | None = None
) -> tuple[Server, Probe, str]:
    probe = Probe()
    server = Server(registry(probe), limits=limits)
    [bound] = await nursery.start(server.run, address)
    return server, probe, bound


async def settle(server: Server) -> None:
    """Wait until the server has no handler task left (bounded)."""
    with trio.fail_after(5):
        while server.statistics().handler_tasks:
            await trio.sleep(0.005)


async def test_transport_conformance(nursery: trio.Nursery, address: str) -> None:
    """Every transport carries calls, typed errors, and many pipelined calls on one connection."""
    with trio.fail_after(20):
        server, _, bound = await start(nursery, address)
        async with open_client(bound) as client:
            assert await client.call("t/echo", {"value": {"a": [1, "b"]}}) == {"a": [1, "b"]}
            with pytest.raises(UnknownEndpointError, match=r"^unknown endpoint 't/nope'$"):
                await client.call("t/nope")
            with pytest.raises(ArgumentsInvalidError, match=r"^t/sleep: seconds: expected"):
                await client.call("t/sleep", {"seconds": "x"})
            results: dict[int, Any] = {}

            async def one(i: int) -> None:
                results[i] = await client.call("t/echo", {"value": i})

            async with trio.open_nursery() as calls:
                for i in range(300):
                    calls.start_soon(one, i)
            assert results == {i: i for i in range(300)}
            assert client.statistics().pending_calls == 0
        await server.aclose()


async def test_handler_exception_is_internal_and_server_survives(nursery: trio.Nursery) -> None:
    """A failing handler fails its call with internal (message kept), not the server."""
    with trio.fail_after(10):
        server, _, bound = await start(nursery, "tcp://127.0.0.1:0")
        async with open_client(bound) as client:
            from wire import InternalError

            with pytest.raises(InternalError, match=r"^handler broke$"):
                await client.call("t/fail")
            assert await client.call("t/echo", {"value": 1}) == 1
        await server.aclose()


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("int-key", r"int is not allowed for map key"),
        ("object", r"cannot send a value of type object"),
    ],
)
async def test_unencodable_result_fails_only_that_call(
    nursery: trio.Nursery, kind: str, reason: str
) -> None:
    """A result the wire cannot carry fails its own call with internal; the connection and
    the calls beside it go on."""
    from wire import InternalError

    with trio.fail_after(10):
        server, _, bound = await start(nursery, "tcp://127.0.0.1:0")
        async with open_client(bound) as client:
            results: list[Any] = []

            async def echo(i: int) -> None:
                results.append(await client.call("t/echo", {"value": i}))

            async with trio.open_nursery() as calls:
                for i in range(20):
                    calls.start_soon(echo, i)
                with pytest.raises(InternalError, match=rf"^cannot encode result: .*{reason}"):
                    await client.call("t/unencodable", {"value": kind})
            assert sorted(results) == list(range(20))
            assert client.statistics().state == "ready"
            assert await client.call("t/echo", {"value": "after"}) == "after"
        await server.aclose()


async def test_cancel_reaches_the_handler(nursery: trio.Nursery) -> None:
    """Cancelling the caller's scope cancels the server-side handler."""
    with trio.fail_after(10):
        server, probe, bound = await start(nursery, "tcp://127.0.0.1:0")
        async with open_client(bound) as client:
            with trio.move_on_after(0.2) as scope:
                await client.call("t/sleep", {"seconds": 30})
            assert scope.cancelled_caught
            await settle(server)
            assert probe.endings == ["cancelled"]
            assert server.statistics().cancelled_total == 1
            assert client.statistics().pending_calls == 0
        await server.aclose()


async def test_server_enforces_the_deadline_budget(nursery: trio.Nursery) -> None:
    """A call's deadlineMs is enforced by the server even if the client never cancels."""
    with trio.fail_after(10):
        server, probe, bound = await start(nursery, "tcp://127.0.0.1:0")
        reply = await raw_exchange(
            bound,
            [
                {"type": "hello", "versions": [1]},
                {
                    "type": "call",
                    "id": 1,
                    "endpoint": "t/sleep",
                    "args": {"seconds": 30},
                    "deadlineMs": 100,
                },
            ],
            until=lambda m: m.get("id") == 1,
        )
        assert reply["code"] == "deadline-exceeded"
        assert reply["details"] == {"state": "running", "reason": "deadline"}
        await settle(server)
        assert probe.endings == ["cancelled"]
        await server.aclose()


async def test_deadline_cancel_reason(nursery: trio.Nursery) -> None:
    """A caller's deadline travels with the call and the handler ends cancelled."""
    with trio.fail_after(10):
        server, probe, bound = await start(nursery, "tcp://127.0.0.1:0")
        async with open_client(bound) as client:
            with pytest.raises(trio.TooSlowError):
                with trio.fail_after(0.2):
                    await client.call("t/sleep", {"seconds": 30})
            await settle(server)
            assert probe.endings == ["cancelled"]
        await server.aclose()


async def test_supersede(nursery: trio.Nursery) -> None:
    """A newer call with the same key cancels the older one, which learns why."""
    with trio.fail_after(10):
        server, probe, bound = await start(nursery, "tcp://127.0.0.1:0")
        async with open_client(bound) as client:
            errors: list[CallCancelledError] = []

            async def older() -> None:
                try:
                    await client.call("t/sleep", {"seconds": 30}, supersede="k")
                except CallCancelledError as exc:
                    errors.append(exc)

            async with trio.open_nursery() as calls:
                calls.start_soon(older)
                await probe.running.wait()
                assert await client.call("t/echo", {"value": 2}, supersede="k") == 2
            assert errors[0].reason is CancelReason.SUPERSEDED
            assert errors[0].state == "running"
        await server.aclose()


async def test_in_flight_limit_is_overloaded_not_dropped(nursery: trio.Nursery) -> None:
    """Calls beyond the in-flight limit fail fast with overloaded; the others complete."""
    with trio.fail_after(10):
        server, _, bound = await start(nursery, "tcp://127.0.0.1:0", ServerLimits(max_in_flight=2))
        async with open_client(bound) as client:
            outcomes: list[str] = []

            async def one() -> None:
                try:
                    outcomes.append(await client.call("t/sleep", {"seconds": 0.3}))
                except OverloadedError:
                    outcomes.append("overloaded")

            async with trio.open_nursery() as calls:
                for _ in range(3):
                    calls.start_soon(one)
            assert sorted(outcomes) == ["overloaded", "slept", "slept"]
        await server.aclose()


async def test_graceful_shutdown_sends_terminal_frames(nursery: trio.Nursery) -> None:
    """aclose cancels running calls with reason shutdown and a terminal frame each."""
    with trio.fail_after(10):
        server, probe, bound = await start(nursery, "tcp://127.0.0.1:0")
        async with open_client(bound) as client:
            caught: list[CallCancelledError] = []

            async def waiting() -> None:
                try:
                    await client.call("t/sleep", {"seconds": 30})
                except CallCancelledError as exc:
                    caught.append(exc)

            async with trio.open_nursery() as calls:
                calls.start_soon(waiting)
                await probe.running.wait()
                await server.aclose()
            assert caught[0].reason is CancelReason.SHUTDOWN


@pytest.mark.parametrize(
    "frames",
    [
        [b"\xc1garbage"],
        [msgpack.packb([1, 2])],
        [msgpack.packb({"type": "call", "id": "x"})],
        [msgpack.packb({"type": "warp", "id": 3})],
        [b"a", b"b"],
        [b"x" * 70_000],
    ],
    ids=["undecodable", "not-a-map", "wrong-type", "unknown-kind", "two-frames", "oversized"],
)
async def test_bad_frames_get_errors_and_server_keeps_serving(
    nursery: trio.Nursery, frames: list[bytes]
) -> None:
    """Malformed input gets a bad-request/too-large error frame; the server serves on."""
    with trio.fail_after(10):
        server, _, bound = await start(
            nursery, "tcp://127.0.0.1:0", ServerLimits(max_frame_bytes=65_536)
        )
        context = zmq.Context.instance()
        sock = context.socket(zmq.DEALER)
        sock.setsockopt(zmq.RCVTIMEO, 5000)
        sock.connect(bound)
        try:
            sock.send_multipart(frames)
            reply = msgpack.unpackb(await trio.to_thread.run_sync(sock.recv))
            assert reply["type"] == "error"
            assert reply["code"] in {"bad-request", "too-large"}
            assert isinstance(reply["message"], str) and reply["message"]
        finally:
            sock.close(linger=0)
        async with open_client(bound) as client:
            assert await client.call("t/echo", {"value": "still here"}) == "still here"
        await server.aclose()


async def raw_exchange(
    address: str, messages: list[dict[str, Any]], until: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Send raw maps from a bare DEALER and return the first reply matching ``until``."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.connect(address)
    sock.setsockopt(zmq.RCVTIMEO, 5000)
    try:
        for message in messages:
            sock.send(msgpack.packb(message))
        while True:
            reply: dict[str, Any] = msgpack.unpackb(await trio.to_thread.run_sync(sock.recv))
            if until(reply):
                return reply
    finally:
        sock.close(linger=0)


@pytest.fixture
async def client_and_server(nursery: trio.Nursery) -> AsyncIterator[tuple[Client, Server]]:
    server, _, bound = await start(nursery, "tcp://127.0.0.1:0")
    async with open_client(bound) as client:
        yield client, server
    await server.aclose()


async def test_errors_leave_the_client_block_unwrapped(nursery: trio.Nursery) -> None:
    """An exception raised inside `async with open_client()` comes out as itself, not wrapped
    in an ExceptionGroup by the client's background tasks."""
    with trio.fail_after(10):
        server, _, bound = await start(nursery, "tcp://127.0.0.1:0")
        with pytest.raises(UnknownEndpointError):
            async with open_client(bound) as client:
                await client.call("t/missing")
        with pytest.raises(KeyError, match="mine"):
            async with open_client(bound):
                raise KeyError("mine")
        await server.aclose()


async def test_a_stranger_that_never_reads_costs_no_backlog(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Calls from a peer that never said hello and never reads get best-effort errors: once
    its pipe is full they are dropped, not held, so the server's backlog stays empty (a held
    reply per call would grow without bound), and the server keeps serving others."""
    with trio.fail_after(120):
        # ipc: small kernel buffers, so the pipe (the server's SNDHWM of 10,000 frames plus
        # the socket buffers) is full after some 15,000 replies.
        server, _, bound = await start(nursery, f"ipc://{tmp_path}/s.sock")
        context = zmq.Context.instance()
        stranger = context.socket(zmq.DEALER)
        stranger.setsockopt(zmq.RCVHWM, 1)
        stranger.setsockopt(zmq.SNDHWM, 0)
        stranger.connect(bound)
        try:
            calls = 40_000
            for call_id in range(1, calls + 1):
                call = {"type": "call", "id": call_id, "endpoint": "t/echo", "args": {}}
                stranger.send(msgpack.packb(call))
                if call_id % 1000 == 0:
                    await trio.sleep(0.01)
            pump = server._pump
            assert pump is not None
            while pump.received < calls:
                await trio.sleep(0.01)
            # Held, the undeliverable replies would be some 25,000 frames here.
            assert server.statistics().backlog_frames == 0
            async with open_client(bound) as client:
                assert await client.call("t/echo", {"value": "still here"}) == "still here"
        finally:
            stranger.close(linger=0)
        await server.aclose()


def _deadline_refuser(sock: zmq.Socket[bytes], calls: int) -> None:
    """A server that welcomes the client, then answers each call deadline-exceeded at once
    (as a server whose deadline fired first would)."""
    from wire._codec import encode
    from wire._messages import Error, Welcome

    peer, _hello = sock.recv_multipart()
    welcome = Welcome(
        heartbeat_ms=1000, peer_timeout_ms=3000, max_frame_bytes=1 << 20, max_in_flight=64
    )
    sock.send_multipart([peer, encode(welcome)])
    for _ in range(calls):
        peer, frame = sock.recv_multipart()
        call = msgpack.unpackb(frame)
        error = Error(
            id=call["id"],
            code="deadline-exceeded",
            message="deadline exceeded while running",
            details={"state": "running", "reason": "deadline"},
        )
        sock.send_multipart([peer, encode(error)])


async def test_a_server_deadline_frame_ends_the_call_as_the_callers_own_deadline() -> None:
    """A deadline-exceeded frame that arrives just before the caller's own deadline leaves the
    ending to the caller's scope (move_on_after catches it, as for a local call); one that
    arrives long before it is raised as DeadlineExceededError."""
    from wire import DeadlineExceededError

    context = zmq.Context.instance()
    sock = context.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, _deadline_refuser, sock, 2)
            with trio.fail_after(20):
                async with open_client(f"tcp://127.0.0.1:{port}") as client:
                    with trio.move_on_after(0.03) as near:
                        await client.call("t/sleep", {"seconds": 5})
                    assert near.cancelled_caught
                    with pytest.raises(DeadlineExceededError), trio.move_on_after(10):
                        await client.call("t/sleep", {"seconds": 5})
    finally:
        sock.close(linger=0)
