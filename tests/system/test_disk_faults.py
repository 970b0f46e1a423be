"""A real server on a disk that refuses writes: an error means nothing was written (issue 19,
item 3).

The data directory is a 4 MiB tmpfs that is filled up, or a directory made read-only under a
running server (`tests._disks`); each test skips with a message where it cannot mount. Every
write the disk refuses is answered ``unavailable`` with ``details.reason`` and ``errno``, the
log holds exactly the acknowledged events, reads keep serving, writes work again once the disk
does, and the server's stderr shows warnings, never a traceback. Single process by default;
``serve --workers 2`` checks that a worker's refusal reaches the caller through the
supervisor unchanged.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from actors._serve import READY_LINE
from actors.session_log._reader import load_session
from tests._disks import fill, free, read_only, tmpfs
from tests.actors.cluster._cluster import SHARDS, Cluster, kill_cluster, user_message
from tests.actors.cluster.test_crash_recovery import agents_on
from wire import UnavailableError, WireError, open_client

MODES = [
    pytest.param(0, id="single-process"),
    pytest.param(2, id="workers-2"),
]


@asynccontextmanager
async def serving(tmp_path: Path, data: Path, workers: int) -> AsyncIterator[str]:
    """``agent-actors serve`` (``--workers N`` unless 0) on ``data``, its stderr kept in
    ``tmp_path/stderr`` (off the faulty disk); stopped with SIGTERM at exit."""
    argv = [sys.executable, "-m", "actors", "serve", "--endpoint", f"ipc://{tmp_path}/s.sock"]
    argv += ["--data", str(data)]
    if workers:
        argv += ["--workers", str(workers), "--shards", str(SHARDS)]
    with (tmp_path / "stderr").open("ab") as stderr:
        process = await trio.lowlevel.open_process(
            argv,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    cluster = Cluster(process=process, address="", data=data)
    try:
        assert process.stdout is not None
        line = b""
        with trio.fail_after(90):
            while b"\n" not in line:
                chunk = await process.stdout.receive_some(4096)
                assert chunk, f"server exited early: {(tmp_path / 'stderr').read_text()}"
                line += chunk
        ready = line.split(b"\n", 1)[0].decode()
        assert ready.startswith(READY_LINE), ready
        yield ready.removeprefix(READY_LINE).split()[0]
        assert await cluster.stop() == 0
    finally:
        with trio.CancelScope(shield=True):
            pids = await kill_cluster(cluster)
            with trio.move_on_after(10):  # gone before the caller unmounts their disk
                while _alive(pids.values()):
                    await trio.sleep(0.05)


def _alive(pids: Iterable[int]) -> bool:
    return any(Path(f"/proc/{pid}").exists() for pid in pids)


def bulky(label: str) -> str:
    """``label`` and 16 KiB of incompressible text: a batch holding it needs fresh blocks."""
    return f"{label}/" + base64.b64encode(os.urandom(12 * 1024)).decode()


def agent_ids(workers: int, prefix: str, count: int = 2) -> list[str]:
    """Agents spread over both workers (any ids in a single process)."""
    if not workers:
        return [f"{prefix}-{i}" for i in range(count)]
    return agents_on("w1", count // 2, prefix) + agents_on("w2", count - count // 2, prefix)


def logged_texts(path: Path) -> list[str]:
    """The user messages the log holds, as a reader sees them."""
    loaded = load_session(path)
    assert loaded.torn is None
    events: list[Any] = list(loaded.events)
    return [e["data"]["id"] for e in events if e["type"] == "user/message"]


def refused(error: WireError, reason: str, errno: str | None = None) -> None:
    """Check a refused write's answer: ``unavailable`` with the reason (and errno)."""
    assert isinstance(error, UnavailableError), error
    assert error.details["reason"] == reason, error.details
    if errno is not None:
        assert error.details["errno"] == errno, error.details
    assert error.details["path"], error.details


def clean_stderr(tmp_path: Path, reason: str) -> None:
    """The server's stderr names the refusals (one line each) and holds no traceback."""
    stderr = (tmp_path / "stderr").read_text()
    assert "Traceback" not in stderr, stderr
    assert reason in stderr, stderr


@pytest.mark.parametrize("workers", MODES)
async def test_full_disk_refuses_writes_and_writes_them_only_when_retried(
    tmp_path: Path, workers: int
) -> None:
    """On a full disk appends, ``agents/create`` and ``sessions/create`` answer
    ``unavailable`` (no-space, ENOSPC) while reads serve; once space is freed the retried and
    new appends are written exactly once, and the refused attempts never appear."""
    agents = agent_ids(workers, "full")
    acked: dict[str, list[str]] = {a: [] for a in agents}
    with tmpfs(tmp_path / "data") as data:
        async with serving(tmp_path, data, workers) as address, open_client(address) as client:
            with trio.fail_after(120):
                for a in agents:
                    await client.call("agents/create", {"agentId": a, "title": f"title {a}"})
                    for k in range(2):
                        text = f"{a}/ok/{k}"
                        await client.call(
                            "sessions/append", {"agentId": a, "events": [user_message(text)]}
                        )
                        acked[a].append(text)
                infos = {a: await client.call("sessions/info", {"agentId": a}) for a in agents}
                fill(data)
                retried: dict[str, str] = {}
                for a in agents:
                    for k in range(3):
                        text = bulky(f"{a}/full/{k}")
                        with pytest.raises(WireError) as failed:
                            await client.call(
                                "sessions/append", {"agentId": a, "events": [user_message(text)]}
                            )
                        refused(failed.value, "no-space", "ENOSPC")
                        assert failed.value.details["sessionId"] == a
                        assert a in failed.value.message
                        retried[a] = text  # the last one is retried; the others are dropped
                    info = await client.call("sessions/info", {"agentId": a})
                    assert info["lastSeq"] == infos[a]["lastSeq"]
                    assert info["title"] == f"title {a}"
                    snapshot = await client.call("sessions/snapshot", {"agentId": a})
                    assert [e["data"]["id"] for e in snapshot["events"]] == acked[a]
                found = await client.call(
                    "sessionReferenceResolver/candidates", {"agentId": agents[0], "query": ""}
                )
                assert agents[1] in {c["sessionId"] for c in found}
                fresh = agent_ids(workers, "fresh")
                with pytest.raises(WireError) as created:
                    await client.call("agents/create", {"agentId": fresh[0], "title": "t"})
                refused(created.value, "no-space", "ENOSPC")
                with pytest.raises(WireError) as created:
                    await client.call("sessions/create", {"sessionId": fresh[1]})
                refused(created.value, "no-space", "ENOSPC")
                free(data)
                for a in agents:
                    seq = infos[a]["lastSeq"]
                    for text in (retried[a], f"{a}/after"):
                        result = await client.call(
                            "sessions/append", {"agentId": a, "events": [user_message(text)]}
                        )
                        # The refused appends took no seq (workers: an epoch record opens
                        # every batch).
                        seq += 1 + (1 if workers else 0)
                        assert result["seqs"] == [seq]
                        acked[a].append(text)
                await client.call("agents/create", {"agentId": fresh[0], "title": "t"})
                await client.call("sessions/create", {"sessionId": fresh[1]})
        for a in agents:
            assert logged_texts(Path(infos[a]["path"])) == acked[a]
    clean_stderr(tmp_path, "no-space")


@pytest.mark.parametrize("workers", MODES)
async def test_read_only_data_directory_refuses_writes_and_reads_serve(
    tmp_path: Path, workers: int
) -> None:
    """With the data directory turned read-only under a running server, an append to a session
    it has not written yet, ``agents/create`` and ``sessions/create`` answer ``unavailable``
    (read-only, EROFS) while reads serve; writable again, the retried appends are written once."""
    agents = agent_ids(workers, "ro")
    data = tmp_path / "data"
    async with serving(tmp_path, data, workers) as address, open_client(address) as client:
        with trio.fail_after(60):
            for a in agents:
                await client.call("sessions/create", {"sessionId": a})
    infos: dict[str, Any] = {}
    async with serving(tmp_path, data, workers) as address, open_client(address) as client:
        with trio.fail_after(120):
            for a in agents:  # read: the sessions have no writer in this server
                infos[a] = await client.call("sessions/info", {"agentId": a})
            fresh = agent_ids(workers, "fresh")
            with read_only(data):
                for a in agents:
                    with pytest.raises(WireError) as failed:
                        await client.call(
                            "sessions/append", {"agentId": a, "events": [user_message(f"{a}/ro")]}
                        )
                    refused(failed.value, "read-only", "EROFS")
                    assert failed.value.details["sessionId"] == a
                    snapshot = await client.call("sessions/snapshot", {"agentId": a})
                    assert snapshot["events"] == []
                with pytest.raises(WireError) as created:
                    await client.call("agents/create", {"agentId": fresh[0], "title": "t"})
                refused(created.value, "read-only", "EROFS")
                with pytest.raises(WireError) as created:
                    await client.call("sessions/create", {"sessionId": fresh[1]})
                refused(created.value, "read-only", "EROFS")
                found = await client.call(
                    "sessionReferenceResolver/candidates", {"agentId": agents[0], "query": ""}
                )
                assert agents[1] in {c["sessionId"] for c in found}
            for a in agents:
                result = await client.call(
                    "sessions/append", {"agentId": a, "events": [user_message(f"{a}/ro")]}
                )
                # The refused appends took no seq (workers: the epoch-open record is seq 0).
                assert result["seqs"] == [1 if workers else 0]
            await client.call("agents/create", {"agentId": fresh[0], "title": "t"})
    for a in agents:
        assert logged_texts(Path(infos[a]["path"])) == [f"{a}/ro"]
    clean_stderr(tmp_path, "read-only")
