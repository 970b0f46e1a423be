"""Shared by the detached-call tests: a server whose endpoints detach their calls, and a raw
DEALER peer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack
import trio
import zmq

from wire import (
    CancelReason,
    Detach,
    DetachedCall,
    Endpoint,
    EndpointSpec,
    Param,
    Registry,
    Server,
    UnavailableError,
    WireError,
)

__all__ = ["Done", "RawPeer", "Relay", "registry", "settle", "start", "wait_for"]


class Done:
    """Records every on_done call; ``event`` is set by the first."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, WireError | None]] = []
        self.event = trio.Event()

    def __call__(self, value: Any, error: WireError | None) -> None:
        self.calls.append((value, error))
        self.event.set()


class Relay:
    """Endpoints that detach their calls, and record what the server told them."""

    def __init__(self) -> None:
        self.calls: list[DetachedCall] = []
        self.cancels: list[CancelReason] = []
        self.begun = trio.Event()
        #: How resumed handlers ended: "value", "cancelled".
        self.resumed: list[str] = []
        self.resumed_running = trio.Event()
        self.echo_running = trio.Event()
        self.echo_endings: list[str] = []

    def _hold(self, call: DetachedCall) -> None:
        call.on_cancel = self.cancels.append
        self.calls.append(call)
        self.begun.set()

    def hold(self, ctx: Any, args: dict[str, Any]) -> Detach:
        """Detach and keep the call; the test ends it (or never does)."""
        return Detach(self._hold)

    def resume_now(self, ctx: Any, args: dict[str, Any]) -> Detach:
        """Detach, then resume at once onto a handler that returns ``value``."""
        value = args["value"]

        async def handler() -> Any:
            await trio.lowlevel.checkpoint()
            self.resumed.append("value")
            return value

        def begin(call: DetachedCall) -> None:
            self._hold(call)
            call.resume(handler)

        return Detach(begin)

    def resume_slow(self, ctx: Any, args: dict[str, Any]) -> Detach:
        """Detach, then resume at once onto a handler that sleeps ``seconds``."""
        seconds = args["seconds"]

        async def handler() -> str:
            self.resumed_running.set()
            try:
                await trio.sleep(seconds)
            except trio.Cancelled:
                self.resumed.append("cancelled")
                raise
            self.resumed.append("value")
            return "slept"

        def begin(call: DetachedCall) -> None:
            self._hold(call)
            call.resume(handler)

        return Detach(begin)

    def hold_bare(self, ctx: Any, args: dict[str, Any]) -> Detach:
        """Detach and keep the call, handing nothing on (no on_cancel)."""

        def begin(call: DetachedCall) -> None:
            self.calls.append(call)
            self.begun.set()

        return Detach(begin)

    def answer_now(self, ctx: Any, args: dict[str, Any]) -> Detach:
        """Detach, then answer inside begin (a relay's cache hit)."""

        def begin(call: DetachedCall) -> None:
            self._hold(call)
            call.succeed(args["value"])

        return Detach(begin)

    def fail_wire(self, ctx: Any, args: dict[str, Any]) -> Detach:
        def begin(call: DetachedCall) -> None:
            call.on_cancel = self.cancels.append
            raise UnavailableError("relay target is down", details={"worker": "w9"})

        return Detach(begin)

    def fail_bug(self, ctx: Any, args: dict[str, Any]) -> Detach:
        def begin(call: DetachedCall) -> None:
            call.on_cancel = self.cancels.append
            raise RuntimeError("relay broke")

        return Detach(begin)

    async def echo(self, ctx: Any, args: dict[str, Any]) -> Any:
        return args["value"]

    async def sleep(self, ctx: Any, args: dict[str, Any]) -> str:
        self.echo_running.set()
        try:
            await trio.sleep(args["seconds"])
        except trio.Cancelled:
            self.echo_endings.append("cancelled")
            raise
        self.echo_endings.append("completed")
        return "slept"


async def _task_path(ctx: Any, args: dict[str, Any]) -> Any:
    raise AssertionError("a detaching endpoint must never take the task path")


def registry(relay: Relay) -> Registry:
    value = Param(name="value", wire_name="value", annotation=Any)
    seconds = Param(name="seconds", wire_name="seconds", annotation=float)

    def detaching(name: str, run: Any, params: tuple[Param, ...] = ()) -> Endpoint:
        return Endpoint(
            spec=EndpointSpec(name=name, params=params), handler=_task_path, run_inline=run
        )

    return Registry(
        [
            detaching("d/hold", relay.hold),
            detaching("d/hold-bare", relay.hold_bare),
            detaching("d/resume", relay.resume_now, (value,)),
            detaching("d/resume-slow", relay.resume_slow, (seconds,)),
            detaching("d/now", relay.answer_now, (value,)),
            detaching("d/fail-wire", relay.fail_wire),
            detaching("d/fail-bug", relay.fail_bug),
            Endpoint(spec=EndpointSpec(name="t/echo", params=(value,)), handler=relay.echo),
            Endpoint(spec=EndpointSpec(name="t/sleep", params=(seconds,)), handler=relay.sleep),
        ]
    )


async def start(nursery: trio.Nursery, address: str) -> tuple[Server, Relay, str]:
    relay = Relay()
    server = Server(registry(relay))
    [bound] = await nursery.start(server.run, address)
    return server, relay, bound


async def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until true (for at most 5 s)."""
    with trio.move_on_after(5):
        while not condition():
            await trio.sleep(0.005)
    assert condition(), f"timed out waiting for {what}"


async def settle(server: Server) -> None:
    await wait_for(lambda: server.statistics().handler_tasks == 0, "handler tasks to end")


class RawPeer:
    """A bare DEALER that speaks the protocol by hand and keeps every frame it receives."""

    def __init__(self, address: str) -> None:
        self.sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(address)
        self.received: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        self.sock.send(msgpack.packb(message))

    async def receive_until(self, until: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            try:
                frame = self.sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                await trio.sleep(0.002)
                continue
            message: dict[str, Any] = msgpack.unpackb(frame)
            self.received.append(message)
            if until(message):
                return message

    async def greet(self) -> None:
        self.send({"type": "hello", "versions": [1]})
        await self.receive_until(lambda m: m["type"] == "welcome")

    def frames_for(self, call_id: int) -> list[dict[str, Any]]:
        return [m for m in self.received if m.get("id") == call_id]

    async def round_trip(self, call_id: int) -> None:
        """An echo call answered: everything the server queued before it has been read."""
        self.send({"type": "call", "id": call_id, "endpoint": "t/echo", "args": {"value": call_id}})
        reply = await self.receive_until(lambda m: m.get("id") == call_id)
        assert reply == {"type": "result", "id": call_id, "value": call_id}

    def close(self) -> None:
        self.sock.close(linger=0)
