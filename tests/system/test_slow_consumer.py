"""A client that floods calls and never reads costs the server bounded memory, which it gives
back once the client is gone, and costs the other clients little time (issue 19).

Real server processes, single and ``--workers 2`` (the supervisor holds the frames for its
public clients), and a raw DEALER in a process of its own that sends ``system/describe`` calls
(6.5 KB replies) and never reads until told to.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors._serve import READY_LINE
from wire import Client, open_client

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024

FLOOD_CLIENT = textwrap.dedent(
    """
    import json, select, sys, msgpack, zmq
    address, count = sys.argv[1], int(sys.argv[2])
    socket = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.RCVHWM, 1)
    socket.setsockopt(zmq.SNDHWM, 0)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(address)
    socket.send(msgpack.packb({"type": "hello", "versions": [1], "name": "flood"}))
    frames = [msgpack.packb({"type": "call", "id": i, "endpoint": "system/describe",
                             "args": {}}) for i in range(1, count + 1)]
    def ping_until_told():
        # Never reads, yet stays alive: any frame it sends counts as a sign of life.
        while not select.select([sys.stdin], [], [], 0.3)[0]:
            socket.send(msgpack.packb({"type": "ping"}))
        return sys.stdin.readline().strip()
    print("ready", flush=True)
    ping_until_told()
    for frame in frames:
        socket.send(frame)
    print("sent", flush=True)
    if ping_until_told() == "read":
        def read_all():
            frames = []
            while socket.poll(1000):
                frames.append(msgpack.unpackb(socket.recv()))
            return frames
        held = read_all()
        socket.send(msgpack.packb({"type": "call", "id": count + 1,
                                   "endpoint": "system/describe", "args": {}}))
        late = [f for f in read_all() if f.get("id") == count + 1
                or f.get("details", {}).get("id") == count + 1]
        print(json.dumps({"read": len(held), "late": late}), flush=True)
    socket.close(linger=0)
    """
)


@attrs.define
class Served:
    process: trio.Process
    address: str
    stderr: bytearray

    def rss(self) -> int:
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")


@asynccontextmanager
async def serving(tmp_path: Path, workers: int, config: str = "") -> AsyncIterator[Served]:
    """``agent-actors serve`` (``--workers`` when ``workers`` > 1) with its stderr kept."""
    command = [sys.executable, "-m", "actors", "serve", "--endpoint", f"ipc://{tmp_path}/s.sock"]
    command += ["--data", str(tmp_path / "data")]
    if config:
        (tmp_path / "config.toml").write_text(config)
        command += ["--config", str(tmp_path / "config.toml")]
    if workers > 1:
        command += ["--workers", str(workers)]
    process = await trio.lowlevel.open_process(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None and process.stderr is not None
    stderr = bytearray()
    try:
        async with trio.open_nursery() as nursery:

            async def keep_stderr() -> None:
                assert process.stderr is not None
                while chunk := await process.stderr.receive_some(65536):
                    stderr.extend(chunk)

            nursery.start_soon(keep_stderr)
            line = b""
            with trio.fail_after(90):
                while not line.endswith(b"\n"):
                    chunk = await process.stdout.receive_some(1)
                    assert chunk, f"server exited early: {stderr.decode(errors='replace')}"
                    line += chunk
            assert line.decode().startswith(READY_LINE), line
            address = line.decode().removeprefix(READY_LINE).split()[0]
            yield Served(process=process, address=address, stderr=stderr)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(20):
                    await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


@attrs.define
class Flood:
    """The flooding client's process and its line protocol (``go``, then ``read`` or EOF)."""

    process: trio.Process

    async def line(self) -> str:
        assert self.process.stdout is not None
        data = b""
        while not data.endswith(b"\n"):
            chunk = await self.process.stdout.receive_some(1)
            assert chunk, f"flood client exited early: {data!r}"
            data += chunk
        return data.decode().strip()

    async def tell(self, command: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(command.encode() + b"\n")


@asynccontextmanager
async def flooding(address: str, count: int) -> AsyncIterator[Flood]:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", FLOOD_CLIENT, address, str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    flood = Flood(process)
    try:
        assert await flood.line() == "ready"
        yield flood
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()


async def peers(client: Client) -> int:
    stats = await client.call("system/stats")
    return int(stats["peers"])


@pytest.mark.parametrize("workers", [1, 2], ids=["single", "workers2"])
async def test_a_flooding_client_that_never_reads_is_dropped_and_its_memory_released(
    tmp_path: Path, workers: int
) -> None:
    """With ``maxBacklogBytes`` at 1 MiB, a client that sends 20,000 describes and never reads
    (but stays alive) is dropped as not reading while another client keeps getting answers;
    its next call is from an unknown peer, and once it is gone the server's RSS is within
    40 MiB of where it started."""
    config = f"[wire]\nmaxBacklogBytes = {MIB}\n"
    async with serving(tmp_path, workers, config) as server:
        with trio.fail_after(120):
            async with open_client(server.address) as other:
                await other.call("system/describe")
                start = server.rss()
                async with flooding(server.address, 20_000) as flood:
                    while await peers(other) < 2:
                        await trio.sleep(0.05)
                    await flood.tell("go")
                    assert await flood.line() == "sent"
                    answered = 0
                    while await peers(other) > 1:
                        assert await other.call("diagnostics/echoRaw", {"payload": answered}) == (
                            answered
                        )
                        answered += 1
                    await flood.tell("read")
                    summary: dict[str, Any] = json.loads(await flood.line())
                    late = summary["late"]
                    assert [(f["type"], f["code"]) for f in late] == [("error", "peer-lost")]
                    assert "unknown peer" in late[0]["message"]
                    await flood.process.wait()
                assert b"is not reading" in server.stderr
                assert await other.call("diagnostics/echoRaw", {"payload": "after"}) == "after"
                assert (await other.call("system/stats"))["backlogFrames"] == 0
                assert server.rss() < start + 40 * MIB


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@attrs.define
class Observer:
    """Another client calling ``diagnostics/echoRaw`` every 2 ms; its latencies by start."""

    client: Client
    samples: list[tuple[float, float]] = attrs.Factory(list)
    calls: int = 0
    #: Latencies during the floods, all of them together.
    during: list[float] = attrs.Factory(list)

    async def run(self, until: trio.Event) -> None:
        while not until.is_set():
            started = trio.current_time()
            await self.client.call("diagnostics/echoRaw", {"payload": "x" * 64})
            self.calls += 1
            self.samples.append((started, trio.current_time() - started))
            await trio.sleep(0.002)

    def between(self, start: float, end: float) -> list[float]:
        return [latency for at, latency in self.samples if start <= at < end]


async def _one_flood(
    server: Served, observer: Observer, poller: Client, count: int
) -> dict[str, Any]:
    """Flood ``count`` describes; the RSS before, at peak and after the flood client left, and
    the observer's latencies from the start of the flood until the server took all of it."""
    start = server.rss()
    peak = start
    async with flooding(server.address, count) as flood:
        while await peers(poller) < 3:
            await trio.sleep(0.05)
        base = (await poller.call("system/stats"))["callsTotal"]
        observed_at_go = observer.calls
        began = trio.current_time()
        await flood.tell("go")
        polls = 0
        # Over when the server has taken every call of the flood (its calls counted from the
        # total, ours subtracted), or has dropped the flooding client.
        while True:
            peak = max(peak, server.rss())
            stats = await poller.call("system/stats")
            polls += 1
            ours = polls + observer.calls - observed_at_go
            if stats["callsTotal"] - base - ours >= count - 2 or stats["peers"] < 3:
                break
            await trio.sleep(0.1)
        ended = trio.current_time()
    # The flood client is gone: the server notices at its next send or heartbeat.
    while await peers(poller) > 2:
        await trio.sleep(0.2)
    await trio.sleep(1)
    during = observer.between(began, ended)
    observer.during.extend(during)
    return {
        "rssMiB": {
            name: round(value / MIB, 1)
            for name, value in [("start", start), ("peak", peak), ("after", server.rss())]
        },
        "seconds": round(ended - began, 2),
        "n": len(during),
        "p50ms": round(_percentile(during, 0.5) * 1000, 2),
        "p99ms": round(_percentile(during, 0.99) * 1000, 2),
    }


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2], ids=["single", "workers2"])
async def test_a_100k_describe_flood_costs_bounded_memory_and_others_little_latency(
    tmp_path: Path, workers: int
) -> None:
    """Issue 19's flood with the default limits, three times: 100,000 describes never read.
    The server's RSS stays bounded and returns within 40 MiB of the start once the client is
    gone, each time; another client's p50 and p99 during the floods stay within 3x their values
    before (floors of 1 and 3 ms: a noisy, shared 2-core machine), single process and through
    the supervisor."""
    async with serving(tmp_path, workers) as server:
        with trio.fail_after(300):
            async with (
                open_client(server.address) as observed,
                open_client(server.address) as poller,
            ):
                await observed.call("system/describe")
                observer = Observer(observed)
                stop = trio.Event()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(observer.run, stop)
                    await trio.sleep(3)
                    before = observer.between(-math.inf, trio.current_time())
                    floods = [await _one_flood(server, observer, poller, 100_000) for _ in range(3)]
                    stop.set()
    during = observer.during
    figures = {
        "workers": workers,
        "before": {"n": len(before), "p50ms": round(_percentile(before, 0.5) * 1000, 2)}
        | {"p99ms": round(_percentile(before, 0.99) * 1000, 2)},
        "during": {"n": len(during), "p50ms": round(_percentile(during, 0.5) * 1000, 2)}
        | {"p99ms": round(_percentile(during, 0.99) * 1000, 2)},
        "floods": floods,
    }
    print(json.dumps(figures))
    for flood in floods:
        rss = flood["rssMiB"]
        assert rss["after"] < rss["start"] + 40, figures
        assert rss["peak"] < rss["start"] + 128, figures
        assert flood["n"] >= 20, figures
    # Under --workers 2 the observer's calls cross the supervisor and a worker: the flood's
    # passes are short while its replies are held, and the I/O threads preempt then.
    for stat, fraction, floor in [("p50ms", 0.5, 1.0), ("p99ms", 0.99, 3.0)]:
        limit = 3 * max(_percentile(before, fraction) * 1000, floor)
        assert figures["during"][stat] <= limit, (stat, figures)
