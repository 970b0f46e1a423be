"""Self-fencing with real processes and a real etcd: a zombie owner, an etcd outage, quorum loss.

``serve --workers 2 --coordinator etcd://…`` with a lease TTL of T = 3 s. The client keeps a
log of every acknowledged append with the times (client clock) it sent the call and got the
ack, and checks it against the lease deadline: a worker's deadline is at most T after the
last keep-alive it sent, so no ack of the lost lease may come back later than T (plus the
fencing margin as slack for delivery) after the worker was stopped or etcd went away. Bounds
are wide: the machine is shared and loaded.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.cluster import CoordinatorError, rendezvous_owner, shard_of
from actors.cluster._etcd_http import EtcdClient, open_etcd_client, prefix_end
from actors.cluster._fencing import default_margin
from tests.actors.cluster._acks import AckLog, append_logged
from tests.actors.cluster._cluster import SHARDS, running_cluster, user_message
from tests.actors.cluster._etcd import EtcdCluster, etcd_binary, start_etcd
from wire import Client, WireError, open_client

pytestmark = pytest.mark.etcd

#: Lease TTL of the workers (the issue's T for tests).
T = 3.0
#: Slack for an ack already sent before the deadline to reach the client (the margin).
DELIVERY = default_margin(T)
#: With a coordinator worker ids are ``<host-id>-w1…``.
HOST = "h"
WORKERS = [f"{HOST}-w1", f"{HOST}-w2"]
W1, W2 = WORKERS
#: How long a 3-member etcd's leader keeps renewing leases after losing quorum: its election
#: timeout (etcd's default 1 s, with CheckQuorum it then steps down), plus slack.
LEADER_STEP_DOWN = 1.5


def agents_on(worker: str, count: int, prefix: str) -> list[str]:
    """Agent ids whose shard the rendezvous owner over both workers puts on ``worker``."""
    out: list[str] = []
    i = 0
    while len(out) < count:
        candidate = f"{prefix}-{i}"
        if rendezvous_owner(shard_of(candidate, SHARDS), WORKERS) == worker:
            out.append(candidate)
        i += 1
    return out


async def claims(
    etcd: EtcdClient, prefix: bytes
) -> tuple[dict[str, int], dict[int, tuple[str, int]]]:
    """``(worker -> member lease, shard -> (owner, epoch))`` as etcd holds them now."""
    _, kvs = await etcd.range(prefix, prefix_end(prefix))
    members: dict[str, int] = {}
    shards: dict[int, tuple[str, int]] = {}
    for kv in kvs:
        name = kv.key[len(prefix) :].decode()
        if name.startswith("members/"):
            members[name.removeprefix("members/")] = kv.lease
        elif name.startswith("shards/"):
            shards[int(name.removeprefix("shards/"))] = (
                json.loads(kv.value)["workerId"],
                kv.create_revision,
            )
    return members, shards


async def converged(
    etcd: EtcdClient,
    prefix: bytes,
    old_leases: dict[str, int],
    old_top_epoch: int,
    *,
    renewed: list[str],
    within: float = 60.0,
) -> dict[int, tuple[str, int]]:
    """Wait until the ``renewed`` workers hold new leases and every shard is owned once, by
    its rendezvous owner (a renewed one's under an epoch newer than every epoch before); the
    claims then.

    Raises:
        AssertionError: not converged ``within`` seconds (the last state seen is quoted).
    """
    expected = [rendezvous_owner(s, WORKERS) for s in range(SHARDS)]
    seen: list[Any] = []
    with trio.move_on_after(within):
        return await _converged(etcd, prefix, old_leases, old_top_epoch, renewed, expected, seen)
    raise AssertionError(
        f"not converged in {within:g} s: members and claims {seen[-1:]}, "
        f"old leases {old_leases}, old top epoch {old_top_epoch}, expected owners {expected}"
    )


async def _converged(
    etcd: EtcdClient,
    prefix: bytes,
    old_leases: dict[str, int],
    old_top_epoch: int,
    renewed: list[str],
    expected: list[str],
    seen: list[Any],
) -> dict[int, tuple[str, int]]:
    while True:
        try:
            members, shards = await claims(etcd, prefix)
        except CoordinatorError:  # etcd still electing a leader
            members, shards = {}, {}
        seen[:] = [(members, shards)]
        if (
            sorted(members) == WORKERS
            and all(members[w] != old_leases[w] for w in renewed)
            and sorted(shards) == list(range(SHARDS))
            and all(shards[s][0] == expected[s] for s in range(SHARDS))
            and all(epoch > old_top_epoch for w, epoch in shards.values() if w in renewed)
        ):
            return shards
        await trio.sleep(0.2)


async def claim_history(
    etcd: EtcdClient, prefix: bytes, after: int
) -> list[tuple[int, int, int, bool]]:
    """``(shard, epoch, lease, created while another claim held the shard)`` of every claim
    created after revision ``after``, from etcd's watch history."""
    revision, kvs = await etcd.range(prefix, prefix_end(prefix))
    held = {kv.key: kv.create_revision for kv in kvs if b"/shards/" in kv.key}
    held = {key: epoch for key, epoch in held.items() if epoch <= after}
    out: list[tuple[int, int, int, bool]] = []
    if revision <= after:
        return out
    batches = etcd.watch(prefix, prefix_end(prefix), start_revision=after + 1)
    async with contextlib.aclosing(batches):
        async for batch in batches:
            for deleted, kv in batch.events:
                if b"/shards/" not in kv.key:
                    continue
                if deleted:
                    held.pop(kv.key, None)
                elif held.get(kv.key) != kv.create_revision:
                    shard = int(kv.key.rsplit(b"/", 1)[1])
                    out.append((shard, kv.create_revision, kv.lease, kv.key in held))
                    held[kv.key] = kv.create_revision
            if batch.revision >= revision:
                break
    return out


async def create_agents(client: Client, agents: list[str], cwd: Path) -> None:
    for agent in agents:
        await client.call("agents/create", {"agentId": agent, "cwd": str(cwd)})


async def test_zombie_owner_acks_nothing_after_its_deadline(
    tmp_path: Path, etcd: EtcdCluster
) -> None:
    """A worker stopped (SIGSTOP) for 2T while a client appends to its agents directly
    acknowledges no append after its lease deadline; once resumed it gives its shards up,
    rejoins under a new lease and serves them again under new, higher epochs."""
    name = f"z{uuid.uuid4().hex[:10]}"
    prefix = f"/agent-actors/{name}/".encode()
    victims = agents_on(W1, 3, "zombie")
    acks = AckLog()
    # A peer timeout longer than the stop: the client keeps its calls to the stopped worker
    # pending (no peer-lost), so they reach it the moment it resumes, still believing it owns
    # the shards; only self-fencing keeps it from acknowledging them.
    config = tmp_path / "patient.toml"
    config.write_text("[wire]\nheartbeat = 1.0\npeerTimeout = 30.0\n")
    async with (
        running_cluster(
            tmp_path,
            workers=2,
            ttl=T,
            extra=[
                "--coordinator",
                f"{etcd.etcd_url}/{name}",
                "--host-id",
                HOST,
                "--config",
                str(config),
            ],
        ) as cluster,
        open_etcd_client(etcd.urls) as etcd_client,
    ):
        with trio.fail_after(150):
            async with open_client(cluster.address) as client:
                await create_agents(client, victims, tmp_path)
                described = (await client.call("system/describe"))["cluster"]
            old_leases, old_shards = await claims(etcd_client, prefix)
            old_top = max(epoch for _, epoch in old_shards.values())
            victim_shards = {shard_of(a, SHARDS) for a in victims}
            assert all(old_shards[s][0] == W1 for s in victim_shards)

            resumed = trio.Event()
            regained = trio.Event()
            stopped_at = resumed_at = regained_at = 0.0
            after_regain = 0
            async with open_client(described["workers"][W1]) as direct:

                async def appender(agent: str) -> None:
                    nonlocal after_regain
                    k = 0
                    while True:
                        if resumed.is_set() and not regained.is_set():
                            # No new calls until the new claims are seen: an ack now could
                            # only be one of the old lease.
                            await regained.wait()
                        k += 1
                        text = f"{agent}/{k}"
                        if not await append_logged(
                            direct.call, acks, agent, text, bound=20, worker=W1
                        ):
                            continue
                        if regained.is_set():
                            after_regain += 1
                        await trio.sleep(0.02)

                async def probe(agent: str) -> None:
                    text = f"{agent}/probe"
                    sent = trio.current_time()
                    try:
                        with trio.fail_after(20):
                            result = await direct.call(
                                "sessions/append",
                                {"agentId": agent, "events": [user_message(text)]},
                            )
                    except WireError as exc:
                        acks.failures.append((trio.current_time(), exc.code.value))
                        return
                    acks.record(
                        agent, text, result, worker=W1, sent=sent, received=trio.current_time()
                    )

                async with trio.open_nursery() as nursery:
                    for agent in victims:
                        for _ in range(2):
                            nursery.start_soon(appender, agent)
                    await trio.sleep(1.5)
                    pid = cluster.worker_pids()[W1]
                    os.kill(pid, signal.SIGSTOP)
                    stopped_at = trio.current_time()
                    try:
                        # Past its deadline: calls sent now reach it only when it resumes.
                        await trio.sleep(T + DELIVERY)
                        for agent in victims:
                            nursery.start_soon(probe, agent)
                        await trio.sleep(2 * T - (T + DELIVERY))
                    finally:
                        os.kill(pid, signal.SIGCONT)
                    resumed_at = trio.current_time()
                    resumed.set()
                    final = await converged(etcd_client, prefix, old_leases, old_top, renewed=[W1])
                    regained_at = trio.current_time()
                    regained.set()
                    while after_regain < 3 * len(victims):
                        await trio.sleep(0.1)
                    nursery.cancel_scope.cancel()

            new_leases, _ = await claims(etcd_client, prefix)
            history = await claim_history(etcd_client, prefix, old_top)
        assert await cluster.stop() == 0

    assert any(a.received is not None and a.received < stopped_at for a in acks.acks)
    # Its lease deadline is at most T after the stop (its last keep-alive was sent before).
    # A call sent after the stop (the probes: after the deadline) reaches it only when it
    # resumes, past that deadline, and before its new claims: none may be acknowledged. (A
    # call sent before the stop may have been checked and made durable in time with its ack
    # frame held up by the stop: delivered late, but decided before the deadline.)
    late = [a for a in acks.acks if a.sent is not None and stopped_at <= a.sent < regained_at]
    assert late == [], f"{len(late)} ack(s) of the lost lease after its deadline: {late[:3]}"
    # It dropped its shards and rejoined: a new member lease, the same shards back under new
    # epochs higher than the old ones, and acks again afterwards.
    assert new_leases[W1] != old_leases[W1]
    # Never two owners at once, and nothing claimed under the old lease after the stop.
    assert [h for h in history if h[3]] == []
    assert [h for h in history if h[2] == old_leases[W1]] == []
    assert all(final[s][0] == W1 and final[s][1] > old_shards[s][1] for s in victim_shards)
    # The calls sent while it was stopped reached it when it resumed and were refused, typed.
    refused = [code for at, code in acks.failures if resumed_at <= at < regained_at]
    assert len(refused) >= len(victims), refused
    assert set(refused) <= {"unavailable", "moved"}, refused


async def _lose_etcd(tmp_path: Path, *, members: int) -> None:
    """Cut a worker cluster off etcd for 2T (one member stopped, or 2 of 3: no quorum) and
    check reads, writes, claims and the recovery (see the tests below)."""
    for attempt in range(3):  # free ports are picked before etcd binds them: retry on a race
        directory = tmp_path / f"etcd{attempt}"
        directory.mkdir()
        try:
            start = functools.partial(start_etcd, directory, members=members, timeout=30)
            etcd = await trio.to_thread.run_sync(start)
            break
        except RuntimeError:
            if attempt == 2:
                raise
    try:
        await _outage(tmp_path, etcd, members=members)
    finally:
        etcd.stop()


async def _outage(tmp_path: Path, etcd: EtcdCluster, *, members: int) -> None:
    name = f"o{uuid.uuid4().hex[:10]}"
    prefix = f"/agent-actors/{name}/".encode()
    agents = agents_on(W1, 2, "out") + agents_on(W2, 2, "out")
    down = [0] if members == 1 else [1, 2]
    acks = AckLog()
    reads_ok: list[float] = []
    read_failures: list[tuple[float, str]] = []
    async with (
        running_cluster(
            tmp_path,
            workers=2,
            ttl=T,
            extra=["--coordinator", f"{etcd.etcd_url}/{name}", "--host-id", HOST],
        ) as cluster,
        open_etcd_client(etcd.urls) as etcd_client,
    ):
        with trio.fail_after(180):
            old_leases, old_shards = await claims(etcd_client, prefix)
            old_top = max(epoch for _, epoch in old_shards.values())
            async with open_client(cluster.address) as client:
                await create_agents(client, agents, tmp_path)
                lost_at = back_at = 0.0
                recovered = trio.Event()

                async def appender(agent: str) -> None:
                    k = 0
                    while True:
                        k += 1
                        if await append_logged(client.call, acks, agent, f"{agent}/{k}", bound=20):
                            await trio.sleep(0.05)

                async def reader(agent: str) -> None:
                    while True:
                        try:
                            with trio.fail_after(20):
                                await client.call("sessions/info", {"agentId": agent})
                        except WireError as exc:
                            read_failures.append((trio.current_time(), exc.code.value))
                        else:
                            reads_ok.append(trio.current_time())
                        await trio.sleep(0.05)

                async with trio.open_nursery() as nursery:
                    for agent in agents:
                        nursery.start_soon(appender, agent)
                        nursery.start_soon(reader, agent)
                    await trio.sleep(1.5)
                    lost_at = trio.current_time()
                    for index in down:
                        etcd.kill(index)
                    await trio.sleep(2 * T)
                    # From here on etcd may answer again (with 3 members, quorum is back as
                    # soon as the first one has restarted).
                    back_at = trio.current_time()
                    for index in down:
                        await trio.to_thread.run_sync(etcd.restart, index)
                    final = await converged(
                        etcd_client, prefix, old_leases, old_top, renewed=WORKERS
                    )
                    recovered_at = trio.current_time()
                    while not any(a.sent is not None and a.sent > recovered_at for a in acks.acks):
                        await trio.sleep(0.1)
                    recovered.set()
                    nursery.cancel_scope.cancel()
            history = await claim_history(etcd_client, prefix, old_top)
        assert await cluster.stop() == 0

    # Writes stop by the lease deadline, typed unavailable. The workers' deadlines are at
    # most T after etcd went away (their last keep-alives were sent before): a call sent after
    # that and answered before etcd returned (so under the old lease) must not be
    # acknowledged; nor may an ack come back later than the deadline plus a second of
    # delivery slack (acks stop at the deadline minus the margin already). Without quorum
    # the surviving member, if it was the leader, renews leases on its own until it steps
    # down, an election timeout (1 s by default) later: keep-alives sent until then succeed.
    deadline = lost_at + T + (0.0 if members == 1 else LEADER_STEP_DOWN)
    fenced = deadline + 1.0
    # An ack decided before the fence time can still be delivered late by a CPU-starved box;
    # what fencing promises is that none is decided after it, which the send times show. The
    # delivery bound is a wide one (a flaky test blocks every landing).
    delivered_by = deadline + 3.0
    late = [
        a
        for a in acks.acks
        if a.sent is not None
        and a.received is not None
        and a.received < back_at
        and (a.sent >= deadline or a.received >= delivered_by)
    ]
    relative = [
        (round((a.sent or 0) - lost_at, 2), round((a.received or 0) - lost_at, 2)) for a in late
    ]
    assert late == [], f"{len(late)} ack(s) after the deadline (sent, received): {relative[:5]}"
    assert any(a.received is not None and a.received < lost_at for a in acks.acks)
    refused = {code for at, code in acks.failures if fenced <= at < back_at}
    timeline = sorted(
        [(round(a.received - lost_at, 2), "ack") for a in acks.acks if a.received is not None]
        + [(round(at - lost_at, 2), code) for at, code in acks.failures]
    )
    timeline = [(at, what) for at, what in timeline if deadline - 1 <= at + lost_at < back_at]
    assert refused == {"unavailable"}, (refused, back_at - lost_at, timeline)
    # Reads keep working all along the outage.
    assert [f for f in read_failures if lost_at <= f[0] < back_at] == []
    assert any(fenced <= at < back_at for at in reads_ok)
    # No claims on the fenced leases (none during the outage, none after it under the old
    # leases), never two owners at once; after etcd returned, every shard owned once by its
    # owner under a new lease and a new epoch.
    assert [h for h in history if h[2] in old_leases.values()] == []
    assert [h for h in history if h[3]] == []
    assert sorted(final) == list(range(SHARDS))
    assert recovered.is_set()


async def test_etcd_outage_stops_writes_at_the_deadline_and_keeps_reads(tmp_path: Path) -> None:
    """With its only etcd member stopped for 2T, the workers keep serving reads, refuse writes
    (unavailable) from their lease deadline on and claim nothing; once etcd is back (same data
    directory) they rejoin under new leases and every shard is owned once again."""
    if etcd_binary() is None:
        pytest.skip("etcd binary not found on PATH: apt-get install etcd-server")
    await _lose_etcd(tmp_path, members=1)


async def test_etcd_quorum_loss_behaves_like_an_outage(tmp_path: Path) -> None:
    """With 2 of 3 etcd members killed (no quorum) for 2T, reads go on, writes stop by the
    lease deadline (unavailable), and the cluster converges again once quorum returns."""
    if etcd_binary() is None:
        pytest.skip("etcd binary not found on PATH: apt-get install etcd-server")
    await _lose_etcd(tmp_path, members=3)
