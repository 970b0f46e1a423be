"""A peer that stops reading: its held frames are bounded in bytes, its new calls are refused,
and the memory they took goes back to the system (docs/protocol.md § 11.3).

Real ZeroMQ sockets inside one process: a server and a raw DEALER that reads only when told.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgpack
import pytest
import trio
import trio.lowlevel
import zmq

from tests._processes import run_script
from wire import (
    Endpoint,
    EndpointSpec,
    OverloadedError,
    Param,
    Registry,
    Server,
    ServerLimits,
    metrics_snapshot,
    open_client,
)
from wire._pump import SocketPump

KIB = 1024


class Handlers:
    """``t/echo`` answers at once; ``t/held`` answers 64 KiB once ``release`` is set;
    ``t/count`` counts the times it ran."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.ran = 0

    async def echo(self, ctx: Any, args: dict[str, Any]) -> Any:
        return args["value"]

    async def held(self, ctx: Any, args: dict[str, Any]) -> str:
        await self.release.wait()
        return "x" * (64 * KIB)

    async def count(self, ctx: Any, args: dict[str, Any]) -> int:
        self.ran += 1
        return self.ran


async def serve(
    nursery: trio.Nursery, address: str, limits: ServerLimits | None = None
) -> tuple[Server, Handlers, str]:
    handlers = Handlers()
    value = Param(name="value", wire_name="value", annotation=Any)
    registry = Registry(
        [
            Endpoint(spec=EndpointSpec(name="t/echo", params=(value,)), handler=handlers.echo),
            Endpoint(spec=EndpointSpec(name="t/held"), handler=handlers.held),
            Endpoint(spec=EndpointSpec(name="t/count"), handler=handlers.count),
        ]
    )
    server = Server(registry, limits=limits)
    [bound] = await nursery.start(server.run, address)
    return server, handlers, bound


@contextmanager
def raw_peer(address: str) -> Iterator[zmq.Socket[bytes]]:
    """A DEALER that said hello and holds one frame at most until it reads (RCVHWM 1)."""
    context = zmq.Context.instance()
    socket: zmq.Socket[bytes] = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.RCVHWM, 1)
    socket.setsockopt(zmq.SNDHWM, 0)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(address)
    socket.send(msgpack.packb({"type": "hello", "versions": [1], "name": "raw"}))
    try:
        yield socket
    finally:
        socket.close(linger=0)


def call(socket: zmq.Socket[bytes], call_id: int, endpoint: str, **args: Any) -> None:
    socket.send(msgpack.packb({"type": "call", "id": call_id, "endpoint": endpoint, "args": args}))


async def fill_pipe(server: Server, socket: zmq.Socket[bytes], first_id: int) -> int:
    """Send small calls until the server holds frames for ``socket``; the next free id."""
    call_id = first_id
    while server.statistics().backlog_frames == 0:
        for _ in range(100):
            call(socket, call_id, "t/echo", value="x")
            call_id += 1
        await trio.sleep(0.01)
    return call_id


def terminal_frames(socket: zmq.Socket[bytes], seconds: float) -> dict[int, dict[str, Any]]:
    """Read until nothing comes for ``seconds``; the terminal frame of each call by id."""
    frames: dict[int, dict[str, Any]] = {}
    while socket.poll(int(seconds * 1000)):
        frame = msgpack.unpackb(socket.recv())
        if frame["type"] in ("result", "error") and frame.get("id") is not None:
            assert frame["id"] not in frames, f"second terminal frame for {frame['id']}"
            frames[frame["id"]] = frame
    return frames


async def test_held_replies_over_the_byte_bound_drop_the_peer(
    nursery: trio.Nursery, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Twenty 64 KiB replies held for a peer that stopped reading pass a 512 KiB bound long
    before the 100,000-frame one: the peer is dropped (logged as not reading), its held frames
    are discarded, and another client is served throughout."""
    limits = ServerLimits(max_backlog_bytes=512 * KIB)
    with trio.fail_after(60):
        server, handlers, bound = await serve(nursery, f"ipc://{tmp_path}/s.sock", limits)
        with raw_peer(bound) as peer:
            for call_id in range(1, 21):
                call(peer, call_id, "t/held")
            await fill_pipe(server, peer, 21)
            held = server.statistics()
            assert held.peers == 1 and held.backlog_frames < 1000
            assert held.backlog_bytes >= held.backlog_frames  # each frame a byte at least
            with caplog.at_level(logging.WARNING, logger="wire.server"):
                handlers.release.set()
                while server.statistics().peers:
                    await trio.sleep(0.01)
            gone = server.statistics()
            assert gone.backlog_frames == 0 and gone.backlog_bytes == 0
            assert gone.peers_gone == {"not reading": 1}
            assert "is not reading" in caplog.text
            # What an operator sees of it (system/metrics, the Prometheus page).
            families = await metrics_snapshot(server.statistics, None, None)
            assert families["peers_gone_total"]["samples"] == [
                {"labels": ["not-reading"], "value": 1}
            ]
            assert families["backlog_bytes"]["samples"] == [{"labels": [], "value": 0}]
            async with open_client(bound) as other:
                assert await other.call("t/echo", {"value": "still here"}) == "still here"
        await server.aclose()


async def test_calls_of_a_peer_whose_frames_are_held_are_refused_not_run(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """While frames for a peer are held back, its new calls are answered overloaded and never
    run; once it reads, every call has exactly one terminal frame, and its calls run again."""
    with trio.fail_after(60):
        server, handlers, bound = await serve(nursery, f"ipc://{tmp_path}/s.sock")
        with raw_peer(bound) as peer:
            first_count = await fill_pipe(server, peer, 1)
            for call_id in range(first_count, first_count + 50):
                call(peer, call_id, "t/count")
            while server.statistics().calls_total < first_count + 49:
                await trio.sleep(0.01)
            assert handlers.ran == 0
            frames = await trio.to_thread.run_sync(terminal_frames, peer, 0.5)
            assert set(frames) == set(range(1, first_count + 50))
            for call_id in range(first_count, first_count + 50):
                refused = frames[call_id]
                assert (refused["type"], refused["code"]) == ("error", "overloaded")
                assert refused["message"].startswith("not reading: ")
                assert refused["details"]["heldFrames"] > 0
            assert server.statistics().backlog_frames == 0
            call(peer, first_count + 50, "t/count")
            again = await trio.to_thread.run_sync(terminal_frames, peer, 0.5)
            assert again[first_count + 50]["value"] == 1
        await server.aclose()


async def test_a_send_backlog_over_the_byte_bound_refuses_new_frames(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """A pump whose peer does not read holds frames up to its byte bound, then refuses new
    ones with overloaded naming the bound (the client's calls fail locally so)."""
    context = zmq.Context.instance()
    sink = context.socket(zmq.ROUTER)  # never reads
    sink.setsockopt(zmq.RCVHWM, 1)
    sink.bind(f"ipc://{tmp_path}/sink.sock")
    dealer: zmq.Socket[bytes] = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.SNDHWM, 10)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(f"ipc://{tmp_path}/sink.sock")
    pump = SocketPump(
        dealer, router=False, on_receive=lambda peer, frames: None, max_backlog_bytes=256 * KIB
    )
    try:
        with trio.fail_after(30):
            nursery.start_soon(pump.run)
            frame = b"x" * (16 * KIB)
            refused: OverloadedError | None = None
            for _ in range(10_000):
                try:
                    pump.send_nowait(b"", frame)
                except OverloadedError as exc:
                    refused = exc
                    break
                await trio.lowlevel.checkpoint()
            assert refused is not None
            assert "bytes" in refused.message
            assert refused.details == {"limit": 256 * KIB}
            # The bound is checked against what is held; a frame queued meanwhile joins it.
            assert 256 * KIB <= pump.held.byte_count() <= 256 * KIB + 2 * len(frame)
    finally:
        dealer.close(linger=0)
        sink.close(linger=0)


#: Run in a fresh interpreter: a long test process's heap already has holes that new frames
#: would fill without growing the resident set.
_FREED_FRAMES = """
import json

from wire._memory import release_memory

def rss():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024


trims = release_memory()
base = rss()
frames, survivors = [], []
for i in range(20_000):
    frames.append(bytes([i % 251]) * 6_500)
    if i % 200 == 0:
        survivors.append(bytes(700))  # above the freed ones: free() cannot shrink the heap
grown = rss()
frames.clear()
freed = rss()
release_memory()
print(json.dumps({"trims": trims, "base": base, "grown": grown, "freed": freed, "trimmed": rss()}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_release_memory_hands_a_freed_backlog_back_to_the_system() -> None:
    """About 125 MiB of reply-sized frames, freed while a few later allocations stay alive, stay
    resident under glibc; release_memory brings the resident set back to within 16 MiB of
    where it was before them."""
    rss = run_script(_FREED_FRAMES)
    if not rss["trims"]:
        pytest.skip("not glibc: nothing to hand back with")
    grown = rss["grown"] - rss["base"]
    assert grown > 100 * 1024 * KIB, rss
    assert rss["freed"] - rss["base"] > grown // 2, ("glibc gave it back by itself", rss)
    assert rss["trimmed"] - rss["base"] < 16 * 1024 * KIB, rss
