"""A worker killed with SIGKILL under load: typed failures, restart, nothing acked is lost."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import trio

from actors.cluster import rendezvous_owner, shard_of
from tests.actors.cluster._acks import AckLog, append_logged
from tests.actors.cluster._cluster import SHARDS, running_cluster, user_message
from wire import PeerLostError, UnavailableError, open_client


def agents_on(worker: str, count: int, prefix: str) -> list[str]:
    """Agent ids whose shard the rendezvous owner over w1, w2 puts on ``worker``."""
    out: list[str] = []
    i = 0
    while len(out) < count:
        candidate = f"{prefix}-{i}"
        if rendezvous_owner(shard_of(candidate, SHARDS), ["w1", "w2"]) == worker:
            out.append(candidate)
        i += 1
    return out


async def test_sigkilled_worker_restarts_and_loses_no_acked_append(tmp_path: Path) -> None:
    """Proves crash recovery: with appenders on both workers, SIGKILL of w1 fails its calls in
    flight promptly with unavailable or peer-lost (never a hang), the supervisor restarts
    w1, appends to every agent succeed again afterwards, and every acknowledged append is in
    the session logs on disk at the seq it was acknowledged with."""
    victims = agents_on("w1", 3, "victim")
    others = agents_on("w2", 3, "other")
    acks = AckLog()
    paths: dict[str, Path] = {}
    after_kill: dict[str, int] = {}
    sleeper_errors: list[tuple[float, type[BaseException]]] = []
    async with running_cluster(tmp_path) as cluster:
        with trio.fail_after(90):
            async with open_client(cluster.address) as client:
                for agent in victims + others:
                    await client.call("agents/create", {"agentId": agent, "cwd": str(tmp_path)})
                    info = await client.call("sessions/info", {"agentId": agent})
                    paths[agent] = Path(info["path"])
                killed_at: float | None = None
                stop = trio.Event()

                async def appender(agent: str) -> None:
                    k = 0
                    while not stop.is_set():
                        k += 1
                        if not await append_logged(
                            client.call, acks, agent, f"{agent}/{k}", bound=15
                        ):
                            continue
                        if killed_at is not None:
                            after_kill[agent] = after_kill.get(agent, 0) + 1

                async def sleeper(agent: str) -> None:
                    try:
                        await client.call("diagnostics/sleep", {"agentId": agent, "seconds": 60})
                    except (UnavailableError, PeerLostError) as exc:
                        sleeper_errors.append((trio.current_time(), type(exc)))

                async with trio.open_nursery() as nursery:
                    for agent in victims + others:
                        nursery.start_soon(appender, agent)
                    for agent in victims:
                        nursery.start_soon(sleeper, agent)
                    await trio.sleep(1.5)
                    old = cluster.worker_pids()["w1"]
                    killed_at = trio.current_time()
                    os.kill(old, signal.SIGKILL)
                    while cluster.worker_pids().get("w1") in (None, old):
                        await trio.sleep(0.1)
                    while not all(after_kill.get(a, 0) >= 3 for a in victims + others):
                        await trio.sleep(0.1)
                    stop.set()
                # The restarted w1 rejoins and gets its shards back (handed over by w2).
                expected = [rendezvous_owner(s, ["w1", "w2"]) for s in range(SHARDS)]
                while True:
                    described = (await client.call("system/describe"))["cluster"]
                    if described["owners"] == expected:
                        break
                    await trio.sleep(0.1)
                for agent in victims:
                    info = await client.call("sessions/info", {"agentId": agent})
                    assert info["writer"] is False  # reloaded by w1, not yet written there
                    appended = await client.call(
                        "sessions/append", {"agentId": agent, "events": [user_message("last")]}
                    )
                    acks.record(agent, "last", appended)
            assert await cluster.stop() == 0
    assert len(sleeper_errors) == len(victims)
    assert all(at - killed_at < 3.0 for at, _ in sleeper_errors)
    assert acks.acks
    assert acks.missing(paths) == []
    # Failover and failback handed sessions over cleanly: no append ever met a second writer
    # still holding a session's lock (agent-busy), and only typed errors were seen.
    codes = {code for _, code in acks.failures}
    assert codes <= {"unavailable", "peer-lost"}, codes


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not reaped by init yet, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def test_workers_stop_when_their_supervisor_is_killed(tmp_path: Path) -> None:
    """A supervisor killed with SIGKILL leaves no worker behind: each sees the end of the pipe
    the supervisor held (its stdin) and stops, holding its shards no longer."""
    async with running_cluster(tmp_path, workers=2) as cluster:
        pids = cluster.worker_pids()
        assert len(pids) == 2
        cluster.process.kill()
        await cluster.process.wait()
        # Wide: the machines are shared; a worker's exit takes well under a second.
        with trio.move_on_after(20):
            while any(_alive(pid) for pid in pids.values()):
                await trio.sleep(0.1)
        assert not [w for w, pid in pids.items() if _alive(pid)], "workers outlived the supervisor"
