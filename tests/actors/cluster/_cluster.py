"""Helpers for tests that run a real supervisor with worker processes."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import msgpack
import trio
import zmq

from actors.cli._demo import start_server_process
from bench._storm import user_message as user_message

SHARDS = 16


def raw_terminal_frames(
    address: str,
    calls: list[dict[str, Any]],
    *,
    timeout: float,
    settle: float | None = None,
    cancels: Sequence[int] = (),
) -> dict[int, list[dict[str, Any]]]:
    """A raw DEALER (run it in a thread): hello, then ``calls``, then a cancel (reason
    ``caller``) for each id in ``cancels``; every terminal frame by call id, read until the
    server's bye, ``timeout`` seconds, or (with ``settle``) ``settle`` seconds after every call
    has one (a second one would come by then). Pings are answered.
    """
    context = zmq.Context()
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(address)
    try:
        socket.send(msgpack.packb({"type": "hello", "versions": [1], "name": "raw"}))
        for call in calls:
            socket.send(msgpack.packb({"type": "call", **call}))
        for call_id in cancels:
            socket.send(msgpack.packb({"type": "cancel", "id": call_id, "reason": "caller"}))
        terminal: dict[int, list[dict[str, Any]]] = {}
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            if not socket.poll(100):
                continue
            frame = msgpack.unpackb(socket.recv())
            if frame["type"] == "ping":
                socket.send(msgpack.packb({"type": "pong"}))
            elif frame["type"] in ("result", "error") and frame.get("id") is not None:
                terminal.setdefault(frame["id"], []).append(frame)
                if settle is not None and len(terminal) == len(calls):
                    until = min(until, time.monotonic() + settle)
            elif frame["type"] == "bye":
                break
        return terminal
    finally:
        socket.close()
        context.term()


@attrs.define
class Cluster:
    process: trio.Process
    address: str
    data: Path

    def worker_pids(self) -> dict[str, int]:
        """Worker id -> pid of the supervisor's live worker processes (from /proc)."""
        found: dict[str, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as cmd:
                    argv = cmd.read().split(b"\0")
            except (OSError, IndexError, ValueError):
                continue
            if ppid == self.process.pid and b"--id" in argv:
                found[argv[argv.index(b"--id") + 1].decode()] = int(entry)
        return found

    async def stop(self, grace: float = 30) -> int | None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        with trio.move_on_after(grace):
            await self.process.wait()
        return self.process.returncode


@asynccontextmanager
async def running_cluster(
    tmp_path: Path,
    *,
    workers: int = 2,
    shards: int = SHARDS,
    extra: list[str] | None = None,
    ttl: float | None = None,
    name: str = "pub",
    data: Path | None = None,
) -> AsyncIterator[Cluster]:
    """``agent-actors serve --workers N`` on an ipc endpoint; killed (with its workers) at exit.

    Args:
        ttl: The workers' lease TTL in seconds (the supervisor's default when None).
        name: Names the endpoint under ``tmp_path`` when a test runs two supervisors.
        data: The data directory (default ``tmp_path / "data"``); two supervisors on one
            storage pass the same one.
    """
    data = tmp_path / "data" if data is None else data
    endpoint = f"ipc://{tmp_path}/{name}.sock"
    cluster_args = ["--workers", str(workers), "--shards", str(shards), *(extra or [])]
    if ttl is not None:
        cluster_args += ["--lease-ttl", f"{ttl:g}"]
    process, addresses = await start_server_process(
        endpoint, data, extra=cluster_args, ready_within=90
    )
    cluster = Cluster(process=process, address=addresses[0], data=data)
    try:
        yield cluster
    finally:
        with trio.CancelScope(shield=True):
            await kill_cluster(cluster)


async def kill_cluster(cluster: Cluster) -> dict[str, int]:
    """SIGKILL the supervisor, then every worker it had; their pids by worker id."""
    pids = cluster.worker_pids()
    if cluster.process.returncode is None:
        cluster.process.kill()
        await cluster.process.wait()
    for pid in pids.values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids
