"""``agent-actors serve --workers N`` with real processes: sharding, routing, drain."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.cluster import rendezvous_owner, shard_of
from actors.cluster._direct import open_cluster_client
from tests.actors.cluster._cluster import SHARDS, raw_terminal_frames, running_cluster, user_message
from wire import CallCancelledError, UnavailableError, open_client
from wire._errors import MovedError


async def test_every_shard_owned_once_and_calls_reach_owners(tmp_path: Path) -> None:
    """Two workers own every shard exactly once (the rendezvous owner), calls through the
    supervisor reach agents on both, a worker asked for another's agent answers moved with
    the owner, and prepare reads a session that lives in the other worker."""
    async with running_cluster(tmp_path) as cluster:
        with trio.fail_after(60):
            async with open_client(cluster.address) as client:
                described = await client.call("system/describe")
                shard_map = described["cluster"]
                workers = shard_map["workers"]
                assert sorted(workers) == ["w1", "w2"]
                assert shard_map["shardCount"] == SHARDS
                assert shard_map["owners"] == [
                    rendezvous_owner(s, ["w1", "w2"]) for s in range(SHARDS)
                ]
                epochs = shard_map["epochs"]
                assert all(0 < e <= shard_map["revision"] for e in epochs)
                assert any(e["name"] == "sessions/append" for e in described["endpoints"])

                by_worker: dict[str, list[str]] = {"w1": [], "w2": []}
                n = 0
                while not (by_worker["w1"] and by_worker["w2"]):
                    n += 1
                    created = await client.call(
                        "agents/create", {"title": f"agent {n}", "cwd": str(tmp_path)}
                    )
                    agent = created["agentId"]
                    owner = shard_map["owners"][shard_of(agent, SHARDS)]
                    by_worker[owner].append(agent)
                    appended = await client.call(
                        "sessions/append", {"agentId": agent, "events": [user_message(f"m{n}")]}
                    )
                    assert len(appended["seqs"]) == 1
                    info = await client.call("sessions/info", {"agentId": agent})
                    assert info["writer"] is True
                    assert info["title"] == f"agent {n}"

                me, source = by_worker["w1"][0], by_worker["w2"][0]
                prepared = await client.call(
                    "sessionReferenceResolver/prepare",
                    {"agentId": me, "content": "see", "references": [{"sessionId": source}]},
                )
                assert source in str(prepared["additionalContext"])

            async with open_client(workers["w1"]) as w1:
                with pytest.raises(MovedError) as moved:
                    await w1.call("sessions/info", {"agentId": source})
                assert moved.value.details["owner"] == "w2"
                assert moved.value.details["endpoint"] == workers["w2"]
                assert moved.value.details["shard"] == shard_of(source, SHARDS)
                own = await w1.call("sessions/info", {"agentId": me})
                assert own["sessionId"] == me

            async with open_cluster_client(cluster.address) as direct:
                info = await direct.call("sessions/info", {"agentId": source})
                assert info["sessionId"] == source
        assert await cluster.stop() == 0


async def test_sigterm_drains_every_call_with_one_terminal_error(tmp_path: Path) -> None:
    """SIGTERM on the supervisor ends each call in flight with exactly one typed outcome
    (cancelled with reason shutdown, or unavailable) and the supervisor exits 0."""
    async with running_cluster(tmp_path) as cluster:
        outcomes: list[str] = []
        with trio.fail_after(60):
            async with open_client(cluster.address) as client:
                agents = [
                    (await client.call("agents/create", {"cwd": str(tmp_path)}))["agentId"]
                    for _ in range(4)
                ]

                async def sleeper(agent: str, i: int) -> None:
                    try:
                        await client.call(
                            "diagnostics/sleep", {"agentId": agent, "seconds": 30, "label": str(i)}
                        )
                        outcomes.append("result")
                    except CallCancelledError as exc:
                        outcomes.append(f"cancelled:{exc.reason}")
                    except UnavailableError:
                        outcomes.append("unavailable")

                raw: dict[int, list[dict[str, Any]]] = {}

                async def raw_client() -> None:
                    calls = [
                        {
                            "id": i,
                            "endpoint": "diagnostics/sleep",
                            "args": {"agentId": agents[0], "seconds": 30, "label": f"raw{i}"},
                        }
                        for i in range(1, 13)
                    ]
                    read = functools.partial(
                        raw_terminal_frames, cluster.address, calls, timeout=40
                    )
                    raw.update(await trio.to_thread.run_sync(read))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(raw_client)
                    for i in range(12):
                        nursery.start_soon(sleeper, agents[i % 4], i)
                    await trio.sleep(1.5)
                    started = trio.current_time()
                    cluster.process.send_signal(15)
                assert trio.current_time() - started < 10
            assert await cluster.process.wait() == 0
        assert len(outcomes) == 12
        assert set(outcomes) <= {"cancelled:shutdown", "unavailable"}
        # On the wire: exactly one terminal frame per call id, each a shutdown cancel.
        assert sorted(raw) == list(range(1, 13))
        assert all(len(frames) == 1 for frames in raw.values())
        assert {f[0]["code"] for f in raw.values()} == {"cancelled"}
        assert {f[0]["details"]["reason"] for f in raw.values()} == {"shutdown"}
