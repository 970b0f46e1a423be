"""Fault tests against ``serve --workers 2`` with real processes (slow: run with -m slow).

Each test states what it proves and checks the client-side log of acknowledged appends against
the session logs on disk afterwards: nothing acknowledged may be lost.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest
import trio
import trio.lowlevel
import zmq

from actors._log_reader import load_session
from actors.cluster import rendezvous_owner, shard_of
from tests.cluster._acks import AckLog
from tests.cluster._cluster import SHARDS, running_cluster, user_message
from tests.cluster.test_crash_recovery import agents_on
from wire import InternalError, WireError, open_client

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


async def _append(client: object, acks: AckLog, agent: str, text: str) -> None:
    result = await client.call(  # type: ignore[attr-defined]
        "sessions/append", {"agentId": agent, "events": [user_message(text)]}
    )
    acks.record(agent, text, result)


async def _paths(client: object, agents: list[str]) -> dict[str, Path]:
    return {
        a: Path((await client.call("sessions/info", {"agentId": a}))["path"])  # type: ignore[attr-defined]
        for a in agents
    }


_VANISHING_CLIENT = """
import sys, trio
from wire import open_client
address, agent = sys.argv[1], sys.argv[2]
async def main():
    async with open_client(address) as client:
        for k in range(5):
            text = f"vanish/{k}"
            r = await client.call("sessions/append", {"agentId": agent, "events": [
                {"type": "user/message", "surfaceOp": "append", "data": {"id": text,
                 "role": "user", "content": [{"type": "text", "text": text}],
                 "source": {"kind": "user"}}}]})
            print(f"ack {text} {r['seqs'][0]}", flush=True)
        async with trio.open_nursery() as nursery:
            for i in range(8):
                nursery.start_soon(client.call, "diagnostics/sleep",
                                   {"agentId": agent, "seconds": 60, "label": f"vanish{i}"})
            await trio.sleep(0.5)
            print("sleeping", flush=True)
trio.run(main)
"""


async def test_client_vanishing_mid_call_is_cancelled_and_others_unaffected(
    tmp_path: Path,
) -> None:
    """Proves a client killed mid-call costs nothing lasting: its sleeps on the worker are
    cancelled once the supervisor notices it is gone (heartbeat bound), another client's calls
    keep working meanwhile, and the appends it had acknowledged are on disk."""
    agent, other = agents_on("w1", 1, "vanish")[0], agents_on("w2", 1, "steady")[0]
    acks = AckLog()
    async with running_cluster(tmp_path) as cluster:
        with trio.fail_after(90):
            async with open_client(cluster.address) as client:
                for a in (agent, other):
                    await client.call("agents/create", {"agentId": a, "cwd": str(tmp_path)})
                paths = await _paths(client, [agent, other])
                child = await trio.lowlevel.open_process(
                    [sys.executable, "-c", _VANISHING_CLIENT, cluster.address, agent],
                    stdout=subprocess.PIPE,
                    cwd=ROOT,
                )
                assert child.stdout is not None
                out = b""
                while b"sleeping" not in out:
                    chunk = await child.stdout.receive_some(4096)
                    assert chunk, f"client exited early: {out!r}"
                    out += chunk
                for line in out.decode().splitlines():
                    if line.startswith("ack "):
                        _, text, seq = line.split()
                        acks.record(agent, text, {"seqs": [int(seq)]})
                child.kill()
                await child.wait()
                workers = (await client.call("system/describe"))["cluster"]["workers"]
                async with open_client(workers["w1"]) as w1:
                    while True:
                        await _append(client, acks, other, f"steady/{len(acks.acks)}")
                        endings = await w1.call("diagnostics/endings")
                        vanished = [e for e in endings if e["call"].startswith("vanish")]
                        if len(vanished) == 8:
                            break
                        await trio.sleep(0.2)
                assert {e["outcome"] for e in vanished} == {"cancelled"}
                stats = await client.call("system/stats")
                assert stats["peers"] == 1
        assert await cluster.stop() == 0
    assert len(acks.acks) >= 6
    assert acks.missing(paths) == []


async def test_slow_consumer_is_dropped_and_memory_stays_bounded(tmp_path: Path) -> None:
    """Proves a client that stops reading cannot hurt others: the supervisor holds its replies
    up to its backlog bound, then forgets it; its memory stays bounded, and another client's
    appends keep being acknowledged (and are on disk afterwards)."""
    agent = agents_on("w1", 1, "steady")[0]
    acks = AckLog()
    async with running_cluster(tmp_path) as cluster:
        with trio.fail_after(120):
            async with open_client(cluster.address) as client:
                await client.call("agents/create", {"agentId": agent, "cwd": str(tmp_path)})
                paths = await _paths(client, [agent])
                context = zmq.Context()
                dealer = context.socket(zmq.DEALER)
                dealer.setsockopt(zmq.RCVHWM, 1)
                dealer.setsockopt(zmq.SNDHWM, 0)
                dealer.setsockopt(zmq.LINGER, 0)
                dealer.connect(cluster.address)
                dealer.send(msgpack.packb({"type": "hello", "versions": [1]}))
                try:
                    sent = 0
                    peak_rss = 0
                    while sent < 160_000:
                        for _ in range(2000):
                            sent += 1
                            dealer.send(
                                msgpack.packb(
                                    {
                                        "type": "call",
                                        "id": sent,
                                        "endpoint": "diagnostics/echoRaw",
                                        "args": {"payload": "x" * 64},
                                    }
                                ),
                                zmq.NOBLOCK,
                            )
                        with trio.fail_after(10):
                            await _append(client, acks, agent, f"steady/{sent}")
                        peak_rss = max(peak_rss, _rss(cluster.process.pid))
                        await trio.lowlevel.checkpoint()
                    while (await client.call("system/stats"))["peers"] != 1:
                        await _append(client, acks, agent, f"steady/after/{len(acks.acks)}")
                        await trio.sleep(0.2)
                finally:
                    dealer.close()
                    context.term()
                assert peak_rss < 400 * 1024 * 1024
                stats = await client.call("system/stats")
                assert stats["backlogFrames"] == 0
        assert await cluster.stop() == 0
    assert acks.missing(paths) == []


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def test_corrupt_log_fails_only_its_session(tmp_path: Path) -> None:
    """Proves a corrupt session log is contained: calls to that session fail with a clear
    internal error naming the file, every other session serves and takes appends, and the
    acknowledged appends of the healthy sessions are on disk."""
    agents = agents_on("w1", 2, "c") + agents_on("w2", 2, "c")
    broken = agents[0]
    acks = AckLog()
    async with running_cluster(tmp_path) as cluster:
        with trio.fail_after(60):
            async with open_client(cluster.address) as client:
                for a in agents:
                    await client.call("agents/create", {"agentId": a, "cwd": str(tmp_path)})
                    await _append(client, acks, a, f"{a}/first")
                paths = await _paths(client, agents)
        assert await cluster.stop() == 0
    raw = paths[broken].read_bytes()
    paths[broken].write_bytes(raw[: len(raw) // 2] + b"\xff garbage \x00" + raw[len(raw) // 2 :])
    acks.acks = [ack for ack in acks.acks if ack.agent != broken]
    async with running_cluster(tmp_path) as cluster:
        with trio.fail_after(60):
            async with open_client(cluster.address) as client:
                with pytest.raises(InternalError) as info:
                    await client.call("sessions/info", {"agentId": broken})
                assert broken in info.value.message
                assert info.value.details["sessionId"] == broken
                for a in agents[1:]:
                    await _append(client, acks, a, f"{a}/second")
        assert await cluster.stop() == 0
    assert acks.missing({a: paths[a] for a in agents[1:]}) == []


async def test_full_disk_fails_appends_clearly_and_writes_nothing_half(tmp_path: Path) -> None:
    """Proves a write that hits a full disk (simulated with RLIMIT_FSIZE on the owning worker,
    which makes writes past the limit fail with EFBIG as ENOSPC would) fails with a clear
    typed error, leaves no half-written event in the log, and does not disturb other
    sessions; every acknowledged append is on disk."""
    agent = agents_on("w1", 1, "disk")[0]
    other = agents_on("w2", 1, "disk")[0]
    acks = AckLog()
    failures: list[WireError] = []
    async with running_cluster(tmp_path, extra=["--durability", "fsync"]) as cluster:
        with trio.fail_after(60):
            async with open_client(cluster.address) as client:
                for a in (agent, other):
                    await client.call("agents/create", {"agentId": a, "cwd": str(tmp_path)})
                    await _append(client, acks, a, f"{a}/0")
                paths = await _paths(client, [agent, other])
                pid = cluster.worker_pids()["w1"]
                size = paths[agent].stat().st_size
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (size + 200, resource.RLIM_INFINITY))
                for k in range(1, 6):
                    try:
                        await _append(client, acks, agent, f"{agent}/{k}/" + "y" * 300)
                    except WireError as exc:
                        failures.append(exc)
                    await _append(client, acks, other, f"{other}/{k}")
        os.kill(cluster.worker_pids()["w1"], signal.SIGKILL)  # drop what it kept pending
        await cluster.stop()
    assert failures, "no append failed past the file size limit"
    assert all(f.code.value in {"internal", "unavailable"} for f in failures)
    assert "File too large" in failures[0].message or "EFBIG" in failures[0].message
    assert acks.missing(paths) == []
    # Nothing half-written: the log still loads, and readers see exactly the acknowledged
    # events of that session (a write cut off at the limit is a torn tail, never an event).
    loaded = load_session(paths[agent], expected_id=agent)
    visible = [
        e["data"]["id"] for e in loaded.events[: loaded.stored_count] if e["type"] == "user/message"
    ]
    assert visible == [ack.text for ack in acks.acks if ack.agent == agent]
    assert rendezvous_owner(shard_of(agent, SHARDS), ["w1", "w2"]) == "w1"
