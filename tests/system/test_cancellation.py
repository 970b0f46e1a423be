"""Cancellation across the wire, proved against a real server process."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest
import trio
import zmq

from wire import ArgumentsInvalidError, CallCancelledError, open_client


async def wait_for(predicate: Any, what: str, within: float = 10.0) -> None:
    with trio.fail_after(within):
        while not await predicate():
            await trio.sleep(0.01)


async def quiescent(client: Any) -> dict[str, Any]:
    """Wait until the server has no call and no handler task but the stats call itself."""
    stats: dict[str, Any] = {}

    async def idle() -> bool:
        nonlocal stats
        stats = await client.call("system/stats")
        running = stats["calls"]
        return stats["handlerTasks"] == 0 and sum(running.values()) == 1

    await wait_for(idle, "server quiescence")
    return stats


async def test_cancelled_handler_never_publishes(
    server_process: tuple[trio.Process, str], tmp_path: Path
) -> None:
    """A cancel that lands after the work is done but before the publication stops the
    publication, and the caller's scope sees a plain cancellation."""
    _, address = server_process
    # The server's diagnostics directory (conftest's server_process serves tmp_path / "data").
    published = tmp_path / "data" / "diagnostics" / "published.txt"
    marker = tmp_path / "data" / "diagnostics" / "work-done.txt"
    async with open_client(address) as client:
        agent = (await client.call("agents/create", {}))["agentId"]
        with trio.fail_after(20):
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:

                    async def call() -> None:
                        await client.agent(agent).diagnostics.publish(
                            "published.txt", "work-done.txt", 0.2, 2.0
                        )

                    nursery.start_soon(call)
                    while not marker.exists():
                        await trio.sleep(0.005)
                    scope.cancel()
            assert scope.cancelled_caught
            stats = await quiescent(client)
            assert stats["cancelledTotal"] >= 1
            await trio.sleep(2.5)  # past the handler's hold: it would have published by now
        assert marker.exists()
        assert not published.exists()


async def test_uncancelled_handler_publishes(
    server_process: tuple[trio.Process, str], tmp_path: Path
) -> None:
    """Control for the test above: left alone, the same handler publishes."""
    _, address = server_process
    published = tmp_path / "data" / "diagnostics" / "published.txt"
    async with open_client(address) as client:
        agent = (await client.call("agents/create", {}))["agentId"]
        with trio.fail_after(20):
            result = await client.agent(agent).diagnostics.publish("published.txt", "m", 0.05, 0.05)
        assert Path(result) == published.resolve()
        assert published.read_text() == "published\n"


async def test_publish_writes_nowhere_outside_the_diagnostics_directory(
    server_process: tuple[trio.Process, str], tmp_path: Path
) -> None:
    """Any peer may call diagnostics/publish, so a path that is absolute or climbs out of the
    server's diagnostics directory is arguments-invalid, nothing is written, and the server
    keeps serving."""
    _, address = server_process
    outside = tmp_path / "outside.txt"
    (tmp_path / "data" / "diagnostics").mkdir(parents=True, exist_ok=True)
    (tmp_path / "data" / "diagnostics" / "escape").symlink_to(tmp_path)
    async with open_client(address) as client:
        agent = (await client.call("agents/create", {}))["agentId"]
        for path, marker in [
            (str(outside), "m"),
            ("../../outside.txt", "m"),
            ("escape/outside.txt", "m"),
            ("ok.txt", str(outside)),
            ("ok.txt", "../x/../../../outside.txt"),
            ("", "m"),
        ]:
            with trio.fail_after(20), pytest.raises(ArgumentsInvalidError, match="diagnostics"):
                await client.agent(agent).diagnostics.publish(path, marker, 0.0, 0.0)
        assert not outside.exists()
        assert not (tmp_path / "data" / "diagnostics" / "ok.txt").exists()
        assert await client.agent(agent).diagnostics.echo("still serving") == "still serving"


async def test_random_cancels_leave_nothing_running(
    server_process: tuple[trio.Process, str],
) -> None:
    """1000 concurrent calls, about half cancelled at random moments by their callers: every
    call ends exactly once on the client and the server ends with zero handler tasks."""
    _, address = server_process
    rng = random.Random(1234)
    outcomes: dict[str, int] = {"result": 0, "cancelled": 0}
    async with open_client(address) as client:
        agent = (await client.call("agents/create", {}))["agentId"]
        proxy = client.agent(agent)

        async def one(i: int) -> None:
            seconds = rng.uniform(0, 0.05)
            cancel_after = rng.uniform(0, 0.06) if i % 2 else None
            with trio.CancelScope() as scope:
                if cancel_after is not None:
                    scope.deadline = trio.current_time() + cancel_after
                await proxy.diagnostics.sleep(seconds, label=f"r{i}")
                outcomes["result"] += 1
            if scope.cancelled_caught:
                outcomes["cancelled"] += 1

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for i in range(1000):
                    nursery.start_soon(one, i)
            assert outcomes["result"] + outcomes["cancelled"] == 1000
            assert outcomes["cancelled"] > 100
            assert client.statistics().pending_calls == 0
            stats = await quiescent(client)
        assert stats["handlerTasks"] == 0
        assert stats["calls"]["queued"] == 0


def raw_storm(address: str, agent: str, calls: int, seed: int) -> dict[int, list[str]]:
    """From a bare DEALER: send calls and random cancels, collect every terminal frame."""
    rng = random.Random(seed)
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    terminals: dict[int, list[str]] = {i: [] for i in range(1, calls + 1)}
    try:
        sock.send(msgpack.packb({"type": "hello", "versions": [1]}))
        assert msgpack.unpackb(sock.recv())["type"] == "welcome"
        for i in range(1, calls + 1):
            args = {"agentId": agent, "seconds": rng.uniform(0, 0.02)}
            sock.send(
                msgpack.packb(
                    {"type": "call", "id": i, "endpoint": "diagnostics/sleep", "args": args}
                )
            )
            if rng.random() < 0.5:
                victim = rng.randint(1, i)
                sock.send(msgpack.packb({"type": "cancel", "id": victim, "reason": "caller"}))
        deadline = time.monotonic() + 30
        quiet_until = None
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        while time.monotonic() < deadline:
            done = all(terminals.values())
            if done and quiet_until is None:
                quiet_until = time.monotonic() + 1.0  # keep listening for duplicates
            if quiet_until is not None and time.monotonic() > quiet_until:
                break
            if poller.poll(50):
                frame = msgpack.unpackb(sock.recv())
                if frame["type"] in ("result", "error") and frame.get("id") in terminals:
                    terminals[frame["id"]].append(frame.get("code", "result"))
                elif frame["type"] == "ping":
                    sock.send(msgpack.packb({"type": "pong"}))
        sock.send(msgpack.packb({"type": "bye"}))
        return terminals
    finally:
        sock.close()


async def test_exactly_one_terminal_frame_per_call(
    server_process: tuple[trio.Process, str],
) -> None:
    """On the wire itself: 1000 calls with random cancels (some for calls already finished)
    get exactly one terminal frame each, and cancelled ones say so."""
    _, address = server_process
    async with open_client(address) as client:
        agent = (await client.call("agents/create", {}))["agentId"]
        terminals = await trio.to_thread.run_sync(raw_storm, address, agent, 1000, 99)
        counts = {i: len(codes) for i, codes in terminals.items()}
        assert set(counts.values()) == {1}, {i: c for i, c in counts.items() if c != 1}
        codes = [codes[0] for codes in terminals.values()]
        assert set(codes) <= {"result", "cancelled"}
        assert codes.count("cancelled") > 50
        stats = await quiescent(client)
        assert stats["handlerTasks"] == 0


async def test_superseded_call_reports_why(server_process: tuple[trio.Process, str]) -> None:
    """Latest wins across processes: the older call fails with reason superseded."""
    _, address = server_process
    async with open_client(address) as client:
        agent = (await client.call("agents/create", {}))["agentId"]
        proxy = client.agent(agent)
        caught: list[CallCancelledError] = []

        async def older() -> None:
            try:
                await proxy.diagnostics.sleep(30.0, supersede="keystrokes")
            except CallCancelledError as exc:
                caught.append(exc)

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(older)
                await trio.sleep(0.3)
                assert await proxy.diagnostics.sleep(0.01, supersede="keystrokes") == 0.01
        assert caught[0].reason is not None
        assert caught[0].reason.value == "superseded"
        assert caught[0].state == "running"
