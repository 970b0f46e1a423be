"""A worker killed with SIGKILL under load: typed failures, restart, nothing acked is lost."""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path
from typing import Any

import trio

from actors.cluster import rendezvous_owner, shard_of
from actors.cluster._lanes import WRITES_HANDED_ON
from actors.session_log import load_session
from tests.actors.cluster._acks import AckLog, append_logged
from tests.actors.cluster._cluster import SHARDS, raw_terminal_frames, running_cluster, user_message
from wire import Client, PeerLostError, UnavailableError, open_client


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


async def _relay_waiting(client: Client) -> float:
    families = await client.call("system/metrics")
    return float(families["relay_waiting_calls"]["samples"][0]["value"])


async def test_writes_waiting_at_the_relay_when_their_owner_dies_go_to_the_next_owner(
    tmp_path: Path,
) -> None:
    """300 appends pipelined to one agent whose owner is SIGKILLed while most of them wait at
    the supervisor (one write per agent is handed on at a time): only the write in flight can
    end ambiguous (``unavailable`` or ``peer-lost``); every other one reaches the next owner
    and is answered with its result, each is in the log once, and the log keeps the order they
    were sent in."""
    [agent] = agents_on("w1", 1, "lane")
    count = 300
    async with running_cluster(tmp_path) as cluster:
        with trio.fail_after(90):
            async with open_client(cluster.address) as client:
                await client.call("agents/create", {"agentId": agent, "cwd": str(tmp_path)})
                path = Path((await client.call("sessions/info", {"agentId": agent}))["path"])
                calls = [
                    {
                        "id": n,
                        "endpoint": "sessions/append",
                        "args": {"agentId": agent, "events": [user_message(f"lane-{n}")]},
                    }
                    for n in range(1, count + 1)
                ]
                burst = functools.partial(
                    raw_terminal_frames, cluster.address, calls, timeout=60, settle=0.5
                )
                answers: dict[int, list[dict[str, Any]]] = {}

                async def send() -> None:
                    answers.update(await trio.to_thread.run_sync(burst))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(send)
                    while await _relay_waiting(client) < 10:
                        await trio.sleep(0.005)
                    os.kill(cluster.worker_pids()["w1"], signal.SIGKILL)
            assert await cluster.stop() == 0
    assert sorted(answers) == list(range(1, count + 1))
    assert all(len(frames) == 1 for frames in answers.values()), answers
    codes = {n: frames[0].get("code", "result") for n, frames in answers.items()}
    ambiguous = [n for n, code in codes.items() if code != "result"]
    assert {codes[n] for n in ambiguous} <= {"unavailable", "peer-lost"}, codes
    assert len(ambiguous) <= WRITES_HANDED_ON, [answers[n] for n in ambiguous]
    logged = [
        event["data"]["id"]
        for event in load_session(path, expected_id=agent).events
        if event.get("type") == "user/message"
    ]
    assert len(logged) == len(set(logged)), "an append is in the log twice"
    applied = [int(text.removeprefix("lane-")) for text in logged]
    assert applied == sorted(applied), "the log is not in the order the appends were sent"
    assert set(applied) >= {n for n, code in codes.items() if code == "result"}
