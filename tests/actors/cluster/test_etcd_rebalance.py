"""Rebalance on etcd under load: 2 → 3 → 2 workers, about S/N shards move per change.

Real processes: one etcd member (the session fixture) and two supervisors on one etcd
cluster name and one storage (``--storage-mode shared``), told apart by ``--host-id``: host
``a`` runs two workers throughout (``a-w1``, ``a-w2``), host ``b`` one worker (``b-w1``),
started under load and then stopped with SIGTERM. Lease TTL T = 3 s. Callers append to one
agent in every shard throughout, half through supervisor ``a`` and half routed by the shard
map straight to the owners (so each of those acks names its worker), plus a bare DEALER
speaking the protocol by hand through supervisor ``a`` (to count terminal frames per call id
on the wire itself).

What is checked: every call issued ends exactly once (a result or a typed error, never a
hang), the claims etcd saw per change are exactly the shards whose rendezvous owner changed
(all to or from the third worker, each claimed once, the others keeping their epoch) and
their number is within a band around S/N, etcd never created a claim on a held shard, every
acknowledged append is on disk, and the acks fit a history in which the shard's owners
acknowledged appends one after another, never in overlapping intervals.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import msgpack
import pytest
import trio
import zmq

from actors.cluster import rendezvous_owner
from actors.cluster._direct import ClusterClient, open_cluster_client
from actors.cluster._etcd_http import open_etcd_client
from tests.actors.cluster._acks import (
    Ack,
    AckLog,
    CallLog,
    OwnershipLog,
    Tenure,
    ack_window_problems,
    keep_appending,
)
from tests.actors.cluster._cluster import SHARDS, running_cluster, user_message
from tests.actors.cluster._etcd import EtcdCluster
from tests.actors.cluster.test_etcd_failover import TYPED, agent_per_shard
from wire import Client, open_client

T = 3.0
HOME = ["a-w1", "a-w2"]
#: The worker of the second host, started then stopped.
GUEST = "b-w1"
#: Both hosts mount one storage, so any worker may own any shard.
SHARED = ["--storage-mode", "shared", "--storage-id", "test-shared"]
#: Concurrent callers of each kind (through the supervisor, and routed by the map).
CALLERS = 3


def _owners(ownership: OwnershipLog) -> list[str | None]:
    held = ownership.held()
    return [held[s].worker if s in held else None for s in range(SHARDS)]


async def _settled(ownership: OwnershipLog, workers: list[str]) -> list[str | None]:
    """Wait until every shard is held by its rendezvous owner over ``workers``."""
    expected: list[str | None] = [rendezvous_owner(s, workers) for s in range(SHARDS)]
    with trio.move_on_after(30):
        while _owners(ownership) != expected:
            await ownership.changed.wait()
        return expected
    raise AssertionError(f"not settled on {workers}: {_owners(ownership)} != {expected}")


def _band(workers: int) -> float:
    """Three standard deviations of the number of shards that move when a worker joins or
    leaves (each shard moves with probability 1/N under rendezvous hashing)."""
    p = 1 / workers
    return 3 * math.sqrt(SHARDS * p * (1 - p))


@pytest.mark.etcd
async def test_rebalance_two_three_two_under_load(tmp_path: Path, etcd: EtcdCluster) -> None:
    """Growing 2 → 3 and shrinking back under load moves about S/3 shards each way (exactly
    those rendezvous hashing names), every call ends once and typed, nothing acknowledged is
    lost, and no two workers acknowledge appends for one shard in overlapping intervals."""
    name = f"r{uuid.uuid4().hex[:10]}"
    url = f"{etcd.etcd_url}/{name}"
    agents = agent_per_shard("rb")
    acks, calls = AckLog(), CallLog()
    ownership = OwnershipLog(f"/agent-actors/{name}/".encode())
    paths: dict[str, Path] = {}
    maps: list[list[str | None]] = []
    #: Per settled map: the epoch of each shard's claim, and how many claims etcd had seen.
    epochs: list[dict[int, int]] = []
    seen: list[int] = []

    async def settle(workers: list[str]) -> None:
        maps.append(await _settled(ownership, workers))
        epochs.append({s: t.epoch for s, t in ownership.held().items()})
        seen.append(len(ownership.tenures))

    async with (
        running_cluster(
            tmp_path, workers=2, ttl=T, extra=["--coordinator", url, "--host-id", "a", *SHARED]
        ) as cluster,
        open_etcd_client(etcd.urls) as etcd_client,
        open_client(cluster.address) as client,
        open_cluster_client(cluster.address) as direct,
        trio.open_nursery() as nursery,
    ):
        with trio.fail_after(100):
            await nursery.start(ownership.follow, etcd_client)
            for agent in agents:
                await client.call("agents/create", {"agentId": agent, "cwd": str(tmp_path)})
                paths[agent] = Path(
                    (await client.call("sessions/info", {"agentId": agent}))["path"]
                )
            await settle(HOME)
            stop_load = trio.Event()
            stop_raw = threading.Event()
            raw: dict[str, Any] = {}
            async with trio.open_nursery() as load:
                for k in range(CALLERS):
                    mine = agents[k::CALLERS]
                    load.start_soon(_via_supervisor, client, mine, acks, calls, stop_load)
                    load.start_soon(_routed, direct, mine, acks, calls, stop_load)

                async def bare() -> None:
                    try:
                        raw.update(
                            await trio.to_thread.run_sync(
                                raw_appends,
                                cluster.address,
                                agents,
                                stop_raw,
                                abandon_on_cancel=True,
                            )
                        )
                    finally:
                        stop_raw.set()  # on every way out, so the thread ends by itself

                load.start_soon(bare)
                await _appended_after(acks, agents, trio.current_time())
                async with running_cluster(
                    tmp_path,
                    workers=1,
                    ttl=T,
                    extra=["--coordinator", url, "--host-id", "b", *SHARED],
                    name="b",
                    data=cluster.data,
                ) as guest:
                    await settle([*HOME, GUEST])
                    await _appended_after(acks, agents, trio.current_time())
                    assert await guest.stop() == 0  # SIGTERM: drains, hands its shards on
                await settle(HOME)
                await _appended_after(acks, agents, trio.current_time())
                stop_load.set()
                stop_raw.set()
            # Every call got its one terminal frame: nothing is pending on either client.
            assert client.statistics().pending_calls == 0
            assert direct.supervisor.statistics().pending_calls == 0
        assert await cluster.stop() == 0
        nursery.cancel_scope.cancel()

    grown = {s for s in range(SHARDS) if maps[0][s] != maps[1][s]}
    shrunk = {s for s in range(SHARDS) if maps[1][s] != maps[2][s]}
    print(
        f"rebalance: moved {len(grown)} then {len(shrunk)} of {SHARDS}; {calls.outcomes()}; "
        f"{len(raw['terminals'])} bare calls"
    )
    # About S/N shards move per change, each to (then from) the new worker, none between the
    # two that stayed; shrinking back restores the first map.
    assert grown == {s for s in range(SHARDS) if maps[1][s] == GUEST}
    assert 0 < len(grown) and abs(len(grown) - SHARDS / 3) <= _band(3), maps
    assert shrunk == grown
    assert maps[2] == maps[0]
    # What etcd saw: per change, one new claim for each moved shard and no other (no shard
    # bounced through a third owner), and every shard that stayed kept its epoch.
    for change, moved in ((1, grown), (2, shrunk)):
        claimed = ownership.tenures[seen[change - 1] : seen[change]]
        assert sorted(t.shard for t in claimed) == sorted(moved), (change, claimed)
        stayed = set(range(SHARDS)) - moved
        assert {s: epochs[change][s] for s in stayed} == {s: epochs[change - 1][s] for s in stayed}
    # Every call issued ended exactly once, typed, never a hang; on the wire itself, each
    # call id got exactly one terminal frame.
    assert calls.issued == len(calls.records)
    frames: dict[int, list[str]] = raw["terminals"]
    assert len(frames) > 50
    assert {i: n for i, codes in frames.items() if (n := len(codes)) != 1} == {}
    assert {codes[0] for codes in frames.values()} <= {"result", *TYPED}
    for agent, text, value in raw["acks"]:
        acks.record(agent, text, value)
    outcomes = calls.outcomes()
    assert set(outcomes) <= {"ok", *TYPED}, outcomes
    # etcd never granted a claim on a held shard, nothing acknowledged was lost, and the
    # acks fit one owner at a time per shard.
    assert ownership.overlaps == []
    assert acks.missing(paths) == []
    traced = [a for a in acks.acks if a.worker is not None]
    assert {a.worker for a in traced} == {*HOME, GUEST}
    assert ack_window_problems(traced, ownership, SHARDS) == []


def raw_appends(address: str, agents: list[str], stop: threading.Event) -> dict[str, Any]:
    """From a bare DEALER (in a thread), keep 8 appends in flight round the agents until
    ``stop``, then wait for the open calls (at most 20 s) and listen 1 s more for duplicates.
    Returns every terminal frame's kind per call id (``result`` or the error code; an empty
    list for a call that got none) and the acks ``(agent, text, value)``."""
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    terminals: dict[int, list[str]] = {}
    sent: dict[int, tuple[str, str]] = {}
    acks: list[tuple[str, str, Any]] = []
    try:
        sock.send(msgpack.packb({"type": "hello", "versions": [1]}))
        assert msgpack.unpackb(sock.recv())["type"] == "welcome"
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        open_calls, quiet_until, give_up = 0, None, None
        while quiet_until is None or time.monotonic() < quiet_until:
            if not stop.is_set() and open_calls < 8:
                call_id = len(sent) + 1
                agent = agents[call_id % len(agents)]
                text = f"{agent}/r{call_id}"
                args = {"agentId": agent, "events": [user_message(text)]}
                call = {"type": "call", "id": call_id, "endpoint": "sessions/append", "args": args}
                sock.send(msgpack.packb(call))
                sent[call_id] = (agent, text)
                terminals[call_id] = []
                open_calls += 1
                continue
            if stop.is_set() and quiet_until is None:
                give_up = give_up or time.monotonic() + 20
                if open_calls == 0 or time.monotonic() > give_up:
                    quiet_until = time.monotonic() + 1.0
            if poller.poll(50):
                frame = msgpack.unpackb(sock.recv())
                kind, call_id = frame.get("type"), frame.get("id")
                if kind in ("result", "error") and call_id in sent:
                    terminals[call_id].append(frame.get("code", "result"))
                    if len(terminals[call_id]) == 1:
                        open_calls -= 1
                        if kind == "result":
                            acks.append((*sent[call_id], frame["value"]))
                elif kind == "ping":
                    sock.send(msgpack.packb({"type": "pong"}))
        sock.send(msgpack.packb({"type": "bye"}))
        return {"terminals": terminals, "acks": acks}
    finally:
        sock.close()


async def _via_supervisor(
    client: Client, agents: list[str], acks: AckLog, calls: CallLog, stop: trio.Event
) -> None:
    async def append(endpoint: str, args: dict[str, Any]) -> tuple[Any, str | None]:
        return await client.call(endpoint, args), None

    await keep_appending(append, agents, acks, calls, stop, tag="s", bound=15, via="supervisor")


async def _routed(
    direct: ClusterClient, agents: list[str], acks: AckLog, calls: CallLog, stop: trio.Event
) -> None:
    async def append(endpoint: str, args: dict[str, Any]) -> tuple[Any, str | None]:
        result, claim = await direct.call_traced(endpoint, args)
        return result, claim.worker_id if claim is not None else None

    await keep_appending(append, agents, acks, calls, stop, tag="d", bound=15, via="direct")


async def _appended_after(acks: AckLog, agents: list[str], since: float) -> None:
    while True:
        done = {a.agent for a in acks.acks if a.sent is not None and a.sent >= since}
        if done >= set(agents):
            return
        await trio.sleep(0.1)


def test_ack_window_check_flags_overlapping_owners() -> None:
    """The overlap check accepts acks that fit one owner at a time, and flags acks whose
    session order interleaves two owners, whose times invert the claims' order, or that were
    sent after their owner's claim was seen deleted."""
    agent = "rb-0"
    ownership = OwnershipLog(b"/agent-actors/x/")
    ownership.tenures += [
        Tenure(0, "a-w1", 10, None, deleted_revision=20, seen_deleted=5.0),
        Tenure(0, "b-w1", 21, 5.1, deleted_revision=30, seen_deleted=9.0),
        Tenure(0, "a-w1", 31, 9.1),
    ]

    def ack(seq: int, worker: str, sent: float, received: float) -> Ack:
        return Ack(agent, f"t{seq}", seq, worker, sent, received)

    fine = [ack(1, "a-w1", 4.0, 4.2), ack(2, "b-w1", 5.2, 5.3), ack(3, "a-w1", 9.2, 9.3)]
    assert ack_window_problems(fine, ownership, 1) == []
    # In session order a, b, a, b: the last b fits no claim after the second a's.
    interleaved = [*fine, ack(4, "b-w1", 9.4, 9.5)]
    assert len(ack_window_problems(interleaved, ownership, 1)) == 1
    # b's ack (claim #1) was sent after a's ack under the later claim #2 had come back.
    inverted = [ack(1, "a-w1", 4.0, 4.2), ack(2, "b-w1", 4.7, 4.8), ack(3, "a-w1", 4.5, 4.6)]
    assert len(ack_window_problems(inverted, ownership, 1)) == 1
    # b acked a call sent after its claim was seen deleted, and no later claim is b's.
    zombie = [ack(1, "b-w1", 9.5, 9.6)]
    assert len(ack_window_problems(zombie, ownership, 1)) == 1
