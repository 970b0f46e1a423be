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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import msgpack
import pytest
import trio
import trio.lowlevel
import zmq

from actors.cli._demo import start_server_process
from actors.cluster import rendezvous_owner, shard_of
from actors.session_log._reader import load_session
from tests._disks import read_only
from tests.actors.cluster._acks import AckLog
from tests.actors.cluster._cluster import SHARDS, Cluster, running_cluster, user_message
from tests.actors.cluster.test_crash_recovery import agents_on
from wire import InternalError, WireError, open_client

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]


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
    typed error, leaves not one byte of a failed write in the log (the file keeps its size
    at the last acknowledged append, no torn tail), and does not disturb other sessions;
    every acknowledged append is on disk."""
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
                    else:  # the file as of the last acknowledged append (fsync durability)
                        size = paths[agent].stat().st_size
                    await _append(client, acks, other, f"{other}/{k}")
                # Each failed write was cut back: not one byte past the last acknowledged
                # append stays in the file (a torn tail would be bytes a reader must skip).
                assert paths[agent].stat().st_size == size
        os.kill(cluster.worker_pids()["w1"], signal.SIGKILL)  # drop what it kept pending
        await cluster.stop()
    assert failures, "no append failed past the file size limit"
    assert all(f.code.value in {"internal", "unavailable"} for f in failures)
    assert "File too large" in failures[0].message or "EFBIG" in failures[0].message
    assert acks.missing(paths) == []
    # Nothing half-written: the log still loads, and readers see exactly the acknowledged
    # events of that session (a write cut off at the limit is a torn tail, never an event).
    loaded = load_session(paths[agent], expected_id=agent)
    assert loaded.torn is None
    assert paths[agent].stat().st_size == size
    visible = [
        e["data"]["id"] for e in loaded.events[: loaded.stored_count] if e["type"] == "user/message"
    ]
    assert visible == [ack.text for ack in acks.acks if ack.agent == agent]
    assert rendezvous_owner(shard_of(agent, SHARDS), ["w1", "w2"]) == "w1"


# -- a read-only data directory ----------------------------------------------------------------
#
# We run as root, for whom permission bits do not stop writes, so the data directory is made
# read-only with a read-only bind mount of it over itself. Linux refuses to remount a mount
# read-only while files on it are open for writing (EBUSY), so a running server's directory is
# turned read-only by stacking a second, read-only bind mount on top: every file the server
# opens from then on resolves through the read-only mount (EROFS), while descriptors it already
# held stay on the writable one. The test seeds the sessions with a separate server first, so
# the cluster has no session writer open and every append must open its lock and log through
# the read-only mount.
#
# The behaviour this checks, and why: a directory that is read-only when the server starts is
# refused at start (one clear line, non-zero exit, no "ready" line): every write path (the
# projection cache, the session locks, new sessions, spills, the cluster's sockets) needs it,
# and a server announcing itself ready that cannot create an agent would fail its clients later
# and further from the cause; serving a session tree read-only is what ``--sessions DIR``
# (without ``--writable``) is for. A directory that turns read-only under a running server
# (ext4 ``errors=remount-ro``, an operator's remount) is reported per write: each append gets a
# typed error naming the file and the reason, nothing is half-written, and reads keep serving.


async def _seed(
    tmp_path: Path, agents: list[str], acks: AckLog, *, workers: int = 2
) -> dict[str, Path]:
    """Create ``agents`` with one acknowledged append each, with ``serve --workers N`` (or
    plain ``serve`` for 0), which is stopped after."""
    if workers:
        server = running_cluster(tmp_path, workers=workers)
    else:
        server = _single_server(tmp_path)
    async with server as cluster:
        with trio.fail_after(60):
            async with open_client(cluster.address) as client:
                for a in agents:
                    await client.call("agents/create", {"agentId": a, "cwd": str(tmp_path)})
                    await _append(client, acks, a, f"{a}/0")
                paths = await _paths(client, agents)
        assert await cluster.stop() == 0
    return paths


@asynccontextmanager
async def _single_server(tmp_path: Path) -> AsyncIterator[Cluster]:
    """Plain ``agent-actors serve`` (one process) on the same data directory."""
    data = tmp_path / "data"
    process, addresses = await start_server_process(f"ipc://{tmp_path}/single.sock", data)
    try:
        yield Cluster(process=process, address=addresses[0], data=data)
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
                await process.wait()


def _listing(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.lstat().st_size for p in directory.rglob("*")}


async def test_data_directory_turning_read_only_fails_writes_clearly_and_reads_serve(
    tmp_path: Path,
) -> None:
    """Proves a data directory that turns read-only under a running cluster fails each write
    with a typed error that names the reason, on both workers and for a new agent, writes
    nothing (the directory's files are unchanged), keeps serving reads of every session, and
    loses no acknowledged append; once writable again the same sessions take appends."""
    agents = agents_on("w1", 1, "ro") + agents_on("w2", 1, "ro")
    fresh = agents_on("w1", 2, "ro")[1]
    acks = AckLog()
    # Seeded by a single-process server: the cluster below then starts with no writer open,
    # and its claims are the first epochs these logs see (a cluster seeding them would leave
    # epoch-open records that a restarted in-process coordinator's epochs may fall below).
    paths = await _seed(tmp_path, agents, acks, workers=0)
    data = tmp_path / "data"
    failures: list[WireError] = []
    async with running_cluster(tmp_path) as cluster:
        with trio.fail_after(90):
            async with open_client(cluster.address) as client:
                last = {  # readers only: no session has a writer (lock, log) open
                    a: (await client.call("sessions/info", {"agentId": a}))["lastSeq"]
                    for a in agents
                }
                before = _listing(data)
                with read_only(data):
                    for a in agents:
                        for k in (1, 2):
                            try:
                                await _append(client, acks, a, f"{a}/ro/{k}")
                            except WireError as exc:
                                failures.append(exc)
                        info = await client.call("sessions/info", {"agentId": a})
                        assert info["lastSeq"] == last[a]
                        assert not info["writer"]
                    with pytest.raises(WireError) as created:
                        await client.call("agents/create", {"agentId": fresh, "cwd": str(tmp_path)})
                    failures.append(created.value)
                    found = await client.call(
                        "sessionReferenceResolver/candidates", {"agentId": agents[0], "query": ""}
                    )
                    assert agents[1] in {c["sessionId"] for c in found}
                    assert _listing(data) == before
                # Writable again: the same session takes appends (nothing was left pending).
                for a in agents:
                    await _append(client, acks, a, f"{a}/rw")
        assert await cluster.stop() == 0
    assert len(failures) == 2 * len(agents) + 1
    for failure in failures:
        assert failure.code.value in {"unavailable", "internal"}, failure
        assert "Read-only file system" in failure.message, failure.message
    assert str(data) in failures[-1].message
    assert acks.missing(paths) == []
    for a in agents:
        loaded = load_session(paths[a], expected_id=a)
        assert loaded.torn is None
        visible = [e["data"]["id"] for e in loaded.events if e["type"] == "user/message"]
        assert visible == [f"{a}/0", f"{a}/rw"]
    assert not list(data.rglob("*.tmp"))


@pytest.mark.parametrize(
    "workers",
    [pytest.param(0, id="single-process"), pytest.param(2, id="workers-2")],
)
async def test_read_only_data_directory_is_refused_at_start_with_one_clear_line(
    tmp_path: Path, workers: int
) -> None:
    """Proves a server started on a read-only data directory refuses to start: it exits
    non-zero without a ready line, says so in one line naming the data directory (no
    traceback), and leaves the directory and its acknowledged appends untouched."""
    agents = agents_on("w1", 1, "start") + agents_on("w2", 1, "start")
    acks = AckLog()
    paths = await _seed(tmp_path, agents, acks)
    data = tmp_path / "data"
    before = _listing(data)
    with read_only(data):
        argv = [sys.executable, "-m", "actors", "serve", "--endpoint", f"ipc://{tmp_path}/ro.sock"]
        argv += ["--data", str(data)]
        if workers:
            argv += ["--workers", str(workers), "--shards", str(SHARDS)]
        with trio.fail_after(60):
            done = await trio.run_process(
                argv, capture_stdout=True, capture_stderr=True, check=False
            )
        assert _listing(data) == before
    stderr = done.stderr.decode()
    assert done.returncode != 0
    assert done.stdout == b""
    assert "Traceback" not in stderr, stderr
    assert str(data) in stderr, stderr
    assert acks.missing(paths) == []
