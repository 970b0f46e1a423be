"""``cancelled`` means no effect, in every mode: one process, ``--workers 2`` (the supervisor's
relay) and two hosts on etcd (a supervisor relaying to the other host's workers).

A raw client sends appends, notes and sleeps and cancels each 0-5 ms after sending it (or
gives it a 1-5 ms deadline); every terminal frame is then checked against what the server did:
an append answered ``cancelled`` or ``deadline-exceeded`` must not be in the session log, one
answered with a result must be; the same for notes (``diagnostics/notes``) and for sleeps
(``diagnostics/endings``: a sleep answered ``cancelled`` did not run to completion). The
cancel's latency (cancel frame to terminal frame) is printed, never asserted.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import msgpack
import pytest
import trio
import zmq

from actors.cli._demo import start_server_process
from actors.cluster import shard_of
from bench._storm import (
    Sent,
    Verdict,
    appended_texts,
    cancel_latencies,
    completed_sleeps,
    created_cwds,
    judge,
    noted_texts,
    percentile,
    plan,
    storm,
)
from tests.actors.cluster._cluster import running_cluster
from tests.actors.cluster._etcd import EtcdCluster
from wire import open_client

AGENTS = 8

#: (appends, notes, sleeps) per mode: a realistic default run, and the issue's full count.
COUNTS = [
    pytest.param((300, 300, 150), id="default"),
    pytest.param((2000, 2000, 600), id="2000", marks=pytest.mark.slow),
]


@attrs.define
class Deployment:
    """A running server in one mode: where calls go, and who keeps diagnostics endings."""

    address: str
    #: Endpoints to ask ``diagnostics/endings`` (the server, or every worker).
    endings_from: list[str]
    #: Stops it gracefully (logs flushed); True if every process exited 0.
    stop: Callable[[], Awaitable[bool]]


@asynccontextmanager
async def _single(tmp_path: Path) -> AsyncIterator[Deployment]:
    process, [address] = await start_server_process(
        f"ipc://{tmp_path}/one.sock", tmp_path / "data", ready_within=60
    )

    async def stop() -> bool:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(30):
            await process.wait()
        return process.returncode == 0

    try:
        yield Deployment(address, [address], stop)
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
                await process.wait()


async def _workers_of(address: str) -> dict[str, str]:
    async with open_client(address) as client:
        return dict((await client.call("system/describe"))["cluster"]["workers"])


@asynccontextmanager
async def _two_workers(tmp_path: Path) -> AsyncIterator[Deployment]:
    async with running_cluster(tmp_path, workers=2) as cluster:

        async def stop() -> bool:
            return await cluster.stop() == 0

        workers = await _workers_of(cluster.address)
        yield Deployment(cluster.address, list(workers.values()), stop)


def _two_hosts(etcd: EtcdCluster, name: str) -> Callable[[Path], Any]:
    @asynccontextmanager
    async def deploy(tmp_path: Path) -> AsyncIterator[Deployment]:
        url = f"{etcd.etcd_url}/{name}"
        extra = {h: ["--coordinator", url, "--host-id", h] for h in "ab"}
        async with (
            running_cluster(tmp_path, extra=extra["a"], name="a", data=tmp_path / "data-a") as a,
            running_cluster(tmp_path, extra=extra["b"], name="b", data=tmp_path / "data-b") as b,
        ):
            # Host a's supervisor routes by the cluster-wide map: wait until it names all
            # four workers and an owner for every shard.
            async with open_client(a.address) as client:
                while True:
                    cluster = (await client.call("system/describe"))["cluster"]
                    if len(cluster["workers"]) == 4 and None not in cluster["owners"]:
                        break
                    await trio.sleep(0.1)

            async def stop() -> bool:
                stopped = [await a.stop(), await b.stop()]
                return stopped == [0, 0]

            yield Deployment(a.address, list(cluster["workers"].values()), stop)

    return deploy


async def _agents(address: str, cwd: Path, *, hosts: int) -> tuple[list[str], dict[str, Path]]:
    """``AGENTS`` new agents (spread over ``hosts`` hosts' workers when there are several) and
    their session log paths."""
    async with open_client(address) as client:
        agents: list[str] = []
        for _ in range(200):
            created = await client.call("agents/create", {"cwd": str(cwd)})
            agents.append(created["agentId"])
            if len(agents) >= AGENTS and (
                hosts == 1 or len(_hosts_of(agents, await _map(client))) >= hosts
            ):
                break
        if hosts > 1:
            owners = _hosts_of(agents, await _map(client))
            assert len(owners) == hosts, f"agents on hosts {owners} only"
        paths = {
            agent: Path((await client.call("sessions/info", {"agentId": agent}))["path"])
            for agent in agents
        }
    return agents, paths


async def _map(client: Any) -> dict[str, Any]:
    return dict((await client.call("system/describe"))["cluster"])


def _hosts_of(agents: list[str], cluster: dict[str, Any]) -> set[str]:
    """The hosts (worker id prefixes) whose workers own ``agents``."""
    owners = cluster["owners"]
    return {owners[shard_of(a, len(owners))].split("-")[0] for a in agents}


async def _run(
    deploy: Callable[[Path], Any], tmp_path: Path, counts: tuple[int, int, int], mode: str
) -> list[Verdict]:
    appends, notes, sleeps = counts
    tag = f"{mode}-{os.getpid()}"
    async with deploy(tmp_path) as deployment:
        hosts = 2 if mode == "two-hosts" else 1
        agents, paths = await _agents(deployment.address, tmp_path, hosts=hosts)
        calls = plan(agents, appends=appends, notes=notes, sleeps=sleeps, tag=tag, seed=19)
        sent: list[Sent] = await trio.to_thread.run_sync(
            functools.partial(storm, deployment.address, calls)
        )
        noted = await noted_texts(deployment.address, agents)
        completed = await completed_sleeps(deployment.endings_from, tag)
        assert await deployment.stop(), "a server process did not exit 0 after SIGTERM"
    logged = await trio.to_thread.run_sync(appended_texts, paths)
    by_kind = {
        kind: [s for s in sent if s.endpoint == endpoint]
        for kind, endpoint in (
            ("append", "sessions/append"),
            ("note", "diagnostics/note"),
            ("sleep", "diagnostics/sleep"),
        )
    }
    latencies = cancel_latencies(sent)
    print(
        f"\n{mode}: cancel → terminal frame over {len(latencies)} cancels: "
        f"p50 {percentile(latencies, 0.5) * 1000:.2f} ms, "
        f"p99 {percentile(latencies, 0.99) * 1000:.2f} ms, "
        f"max {percentile(latencies, 1.0) * 1000:.2f} ms"
    )
    for kind, kind_sent in by_kind.items():
        kind_latencies = cancel_latencies(kind_sent)
        if kind_latencies:
            print(
                f"{mode} {kind}: cancel → terminal frame p50 "
                f"{percentile(kind_latencies, 0.5) * 1000:.2f} ms, p99 "
                f"{percentile(kind_latencies, 0.99) * 1000:.2f} ms ({len(kind_latencies)})"
            )
    verdicts = [
        judge("append", by_kind["append"], logged),
        judge("note", by_kind["note"], noted),
        judge("sleep", by_kind["sleep"], completed),
    ]
    for verdict in verdicts:
        print(f"{mode} {verdict.kind}: {verdict.codes}, superseded {verdict.superseded}")
    return verdicts


def _assert_truthful(verdicts: list[Verdict]) -> None:
    for verdict in verdicts:
        assert verdict.not_one_frame == [], f"{verdict.kind}: calls without exactly one answer"
        assert verdict.lied_no_effect == [], f"{verdict.kind}: answered no effect, yet applied"
        assert verdict.lost_acks == [], f"{verdict.kind}: answered with a result, yet not applied"
        # Both outcomes happened: the storm cancelled calls before and after they took effect.
        assert verdict.codes.get("result", 0) > 0, verdict.codes
        assert verdict.codes.get("cancelled", 0) > 0, verdict.codes
        assert verdict.unexpected == [], f"{verdict.kind}: answers a healthy server never gives"
        if verdict.kind == "append":
            # Newer appends with the same supersede key cancelled older ones (the relay passes
            # that cancel on too, and answers with the owner's outcome).
            assert verdict.superseded > 0, "no append was superseded"


@pytest.mark.parametrize("counts", COUNTS)
async def test_one_process_cancelled_calls_had_no_effect(
    tmp_path: Path, counts: tuple[int, int, int]
) -> None:
    """In one process (``agent-actors serve``), appends, notes and sleeps cancelled 0-5 ms
    after sending: every one answered cancelled had no effect, every result did."""
    with trio.fail_after(300):
        verdicts = await _run(_single, tmp_path, counts, "one-process")
    _assert_truthful(verdicts)


@pytest.mark.parametrize("counts", COUNTS)
async def test_relayed_cancelled_calls_had_no_effect(
    tmp_path: Path, counts: tuple[int, int, int]
) -> None:
    """Through the supervisor of ``--workers 2``, appends, notes and sleeps cancelled 0-5 ms
    after sending: every one answered cancelled had no effect, every result did."""
    with trio.fail_after(300):
        verdicts = await _run(_two_workers, tmp_path, counts, "workers-2")
    _assert_truthful(verdicts)


@pytest.mark.etcd
@pytest.mark.parametrize("counts", COUNTS)
async def test_two_hosts_cancelled_calls_had_no_effect(
    tmp_path: Path, counts: tuple[int, int, int], etcd: EtcdCluster, cluster_name: str
) -> None:
    """Through one host's supervisor of a two-host cluster on etcd (its agents owned by
    workers of both hosts), calls cancelled 0-5 ms after sending: every one answered
    cancelled had no effect, every result did."""
    with trio.fail_after(300):
        verdicts = await _run(_two_hosts(etcd, cluster_name), tmp_path, counts, "two-hosts")
    _assert_truthful(verdicts)


async def test_cancelled_creates_on_the_supervisors_task_path_had_no_effect(
    tmp_path: Path,
) -> None:
    """Through the supervisor of ``--workers 2``, ``sessions/create`` calls naming no session
    (the task path: any worker, awaited in a handler task) cancelled 0-5 ms after sending:
    every one answered cancelled created nothing, every result created its session."""
    marks = tmp_path / "marks"
    calls = plan([], appends=0, notes=0, sleeps=0, creates=200, tag="create", seed=5, cwd=marks)
    async with running_cluster(tmp_path, workers=2) as cluster:
        with trio.fail_after(120):
            sent = await trio.to_thread.run_sync(functools.partial(storm, cluster.address, calls))
            assert await cluster.stop() == 0
    created = {Path(cwd).name for cwd in await trio.to_thread.run_sync(created_cwds, cluster.data)}
    verdict = judge("create", sent, created)
    print(f"\nworkers-2 create (task path): {verdict.codes}")
    _assert_truthful([verdict])


async def test_cancelled_agent_creates_had_no_effect(tmp_path: Path) -> None:
    """Titled ``agents/create`` calls (the session, then its title: two writes) cancelled 0-5 ms
    after sending, in one process: every one answered cancelled created nothing, every result
    created its session (once the session exists the title is written, and the call answers
    its result whatever the caller does)."""
    marks = tmp_path / "marks"
    calls = plan(
        [], appends=0, notes=0, sleeps=0, agent_creates=200, tag="agent", seed=7, cwd=marks
    )
    async with _single(tmp_path) as deployment:
        with trio.fail_after(120):
            sent = await trio.to_thread.run_sync(
                functools.partial(storm, deployment.address, calls)
            )
            assert await deployment.stop()
    created = {
        Path(cwd).name for cwd in await trio.to_thread.run_sync(created_cwds, tmp_path / "data")
    }
    verdict = judge("agent", sent, created)
    print(f"\none process agents/create: {verdict.codes}")
    _assert_truthful([verdict])


class _RawPeer:
    """A bare DEALER speaking the protocol by hand (it answers pings while it waits)."""

    def __init__(self, address: str) -> None:
        self.sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(address)
        self.terminal: dict[int, list[dict[str, Any]]] = {}
        self.bye = False

    def send(self, message: dict[str, Any]) -> None:
        self.sock.send(msgpack.packb(message))

    async def pump_until(self, done: Callable[[], bool]) -> None:
        while not done():
            try:
                message = msgpack.unpackb(self.sock.recv(zmq.NOBLOCK))
            except zmq.Again:
                await trio.sleep(0.002)
                continue
            if message["type"] == "ping":
                self.send({"type": "pong"})
            elif message["type"] == "bye":
                self.bye = True
            elif message["type"] in ("result", "error") and message.get("id") is not None:
                self.terminal.setdefault(message["id"], []).append(message)

    async def answer(self, call_id: int) -> dict[str, Any]:
        await self.pump_until(lambda: call_id in self.terminal)
        return self.terminal[call_id][0]

    def close(self) -> None:
        self.sock.close(linger=0)


async def _running_on(endpoint: str) -> int:
    """Handlers running on the worker at ``endpoint``, not counting the stats call asking."""
    async with open_client(endpoint) as worker:
        return int((await worker.call("system/stats"))["calls"]["running"]) - 1


async def test_an_owner_that_cannot_answer_never_gets_its_calls_called_cancelled(
    tmp_path: Path,
) -> None:
    """Through the supervisor, calls on a worker that hangs (SIGSTOP) are never answered
    cancelled or deadline-exceeded: a caller's cancel, a deadline, and the supervisor's own
    shutdown drain all get unavailable (outcome unknown) once the owner stays silent past the
    grace (or peer-lost once its connection is lost), and the supervisor still exits 0 once the
    worker runs again."""
    async with running_cluster(tmp_path, workers=2) as cluster:
        with trio.fail_after(90):
            async with open_client(cluster.address) as client:
                cluster_map = await _map(client)
                owners = cluster_map["owners"]
                by_worker: dict[str, list[str]] = {}
                while not any(len(agents) >= 2 for agents in by_worker.values()):
                    agent = (await client.call("agents/create", {"cwd": str(tmp_path)}))["agentId"]
                    by_worker.setdefault(owners[shard_of(agent, len(owners))], []).append(agent)
                worker, agents = next((w, a) for w, a in by_worker.items() if len(a) >= 2)
                for agent in agents[:2]:  # the supervisor connects to the owner on first use
                    await client.call("diagnostics/echo", {"agentId": agent})
            endpoint = cluster_map["workers"][worker]
            pid = cluster.worker_pids()[worker]
            peer = _RawPeer(cluster.address)
            stopped = False
            try:
                peer.send({"type": "hello", "versions": [1], "name": "raw"})
                for call_id, agent in enumerate(agents[:2], start=1):
                    args = {"agentId": agent, "seconds": 60, "label": f"hung-{call_id}"}
                    peer.send(
                        {
                            "type": "call",
                            "id": call_id,
                            "endpoint": "diagnostics/sleep",
                            "args": args,
                        }
                    )
                while await _running_on(endpoint) < 2:
                    await trio.sleep(0.05)
                os.kill(pid, signal.SIGSTOP)
                stopped = True

                cancelled_at = trio.current_time()
                peer.send({"type": "cancel", "id": 1, "reason": "caller"})
                args = {"agentId": agents[0], "seconds": 60, "label": "hung-3"}
                peer.send(
                    {
                        "type": "call",
                        "id": 3,
                        "endpoint": "diagnostics/sleep",
                        "args": args,
                        "deadlineMs": 200,
                    }
                )
                first = await peer.answer(1)
                waited = trio.current_time() - cancelled_at
                assert first["type"] == "error" and first["code"] in ("unavailable", "peer-lost")
                assert waited >= 0.5, f"answered {waited:.2f} s after the cancel: not the owner's"
                # Past its deadline, the owner's own answer is awaited too: no
                # deadline-exceeded the supervisor cannot vouch for.
                third = await peer.answer(3)
                assert third["type"] == "error" and third["code"] in ("unavailable", "peer-lost")

                cluster.process.send_signal(signal.SIGTERM)
                second = await peer.answer(2)
                assert second["type"] == "error" and second["code"] in ("unavailable", "peer-lost")
                if second["code"] == "unavailable":
                    assert second["details"].get("outcome") == "unknown", second
                await peer.pump_until(lambda: peer.bye)
            finally:
                if stopped:
                    os.kill(pid, signal.SIGCONT)
                peer.close()
            assert [len(frames) for frames in peer.terminal.values()] == [1, 1, 1]
            await cluster.process.wait()  # it is draining already (a second SIGTERM would kill it)
            assert cluster.process.returncode == 0
