"""The supervisor relays calls to their owners without a task per call, and cancellation and
deadlines still cross the hop (``actors/cluster/_router.py``, ``wire/_detached.py``)."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import pytest
import trio

from tests.actors.cluster._cluster import raw_terminal_frames, running_cluster
from wire import Client, open_client

CALLS = 8


async def _endings(workers: dict[str, str], labels: set[str]) -> dict[str, str]:
    """How each worker's ``diagnostics/sleep`` handlers with one of ``labels`` ended."""
    found: dict[str, str] = {}
    for endpoint in workers.values():
        async with open_client(endpoint) as worker:
            for ending in await worker.call("diagnostics/endings"):
                if ending["call"] in labels:
                    found[ending["call"]] = ending["outcome"]
    return found


async def _started(workers: dict[str, str]) -> int:
    """Handlers running on the workers (each asked directly)."""
    running = 0
    for endpoint in workers.values():
        async with open_client(endpoint) as worker:
            stats = await worker.call("system/stats")
            running += stats["calls"]["running"] - 1  # not counting this stats call
    return running


async def _wait_for_endings(workers: dict[str, str], labels: set[str]) -> dict[str, str]:
    while True:
        found = await _endings(workers, labels)
        if set(found) == labels:
            return found
        await trio.sleep(0.1)


async def _running(client: Client) -> int:
    """Calls running at ``client``'s server, not counting this stats call."""
    stats = await client.call("system/stats")
    assert stats["handlerTasks"] == 0, "a relayed call took a handler task"
    return int(stats["calls"]["running"]) - 1


async def test_relayed_calls_take_no_task_and_a_cancel_reaches_the_worker(
    tmp_path: Path,
) -> None:
    """Calls in flight through the supervisor hold no handler task there, and a caller that
    cancels them cancels their handlers on the owning workers."""
    async with running_cluster(tmp_path) as cluster:
        with trio.fail_after(60):
            async with open_client(cluster.address) as client:
                workers = (await client.call("system/describe"))["cluster"]["workers"]
                # One call per agent: an agent's calls take turns, and one still queued on its
                # worker when cancelled would never start (nor end) its handler.
                agents = [
                    (await client.call("agents/create", {"cwd": str(tmp_path)}))["agentId"]
                    for _ in range(CALLS)
                ]
                for agent in agents:  # the supervisor connects to each owner on first use
                    await client.call("diagnostics/echo", {"agentId": agent})
                labels = {f"relay-{i}" for i in range(CALLS)}
                async with trio.open_nursery() as nursery:
                    for i, agent in enumerate(agents):
                        args = {"agentId": agent, "seconds": 30, "label": f"relay-{i}"}
                        nursery.start_soon(client.call, "diagnostics/sleep", args)
                    while await _running(client) < CALLS or await _started(workers) < CALLS:
                        await trio.sleep(0.05)
                    nursery.cancel_scope.cancel()
                ended = await _wait_for_endings(workers, labels)
                assert ended == dict.fromkeys(labels, "cancelled")
                assert await _running(client) == 0
        assert await cluster.stop() == 0


async def test_a_relayed_call_ends_at_its_deadline_on_the_worker(tmp_path: Path) -> None:
    """A call with a deadline, relayed by the supervisor, gets exactly one deadline-exceeded
    answer, and its handler on the owning worker ends cancelled."""
    async with running_cluster(tmp_path) as cluster:
        with trio.fail_after(60):
            async with open_client(cluster.address) as client:
                workers = (await client.call("system/describe"))["cluster"]["workers"]
                agent = (await client.call("agents/create", {"cwd": str(tmp_path)}))["agentId"]
            started = time.monotonic()
            args = {"agentId": agent, "seconds": 30, "label": "relay-deadline"}
            call = {"id": 1, "endpoint": "diagnostics/sleep", "args": args, "deadlineMs": 300}
            read = functools.partial(
                raw_terminal_frames, cluster.address, [call], timeout=5, settle=0.5
            )
            frames = await trio.to_thread.run_sync(read)
            assert [f["code"] for f in frames.get(1, [])] == ["deadline-exceeded"]
            assert time.monotonic() - started < 4
            ended = await _wait_for_endings(workers, {"relay-deadline"})
            assert ended == {"relay-deadline": "cancelled"}
        assert await cluster.stop() == 0


async def test_calls_naming_no_agent_are_relayed_without_a_task(tmp_path: Path) -> None:
    """A call about no agent (``diagnostics/echoRaw``) goes to the workers in turn, relayed
    like an agent's call once the supervisor is connected to them: while a burst of them is in
    flight, the supervisor holds no handler task, and every one gets its own payload back."""
    async with running_cluster(tmp_path) as cluster:
        with trio.fail_after(120):
            async with open_client(cluster.address) as client:
                for i in range(8):  # the supervisor connects to each worker on first use
                    await client.call("diagnostics/echoRaw", {"payload": f"warm-{i}"})
                calls = [
                    {"id": i, "endpoint": "diagnostics/echoRaw", "args": {"payload": f"p{i}"}}
                    for i in range(1, 2001)
                ]
                burst = functools.partial(
                    raw_terminal_frames, cluster.address, calls, timeout=60, settle=0.5
                )
                tasks_seen: list[int] = []
                answers: dict[int, list[dict[str, object]]] = {}

                async def send() -> None:
                    answers.update(await trio.to_thread.run_sync(burst))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(send)
                    while not answers:
                        stats = await client.call("system/stats")
                        tasks_seen.append(stats["handlerTasks"])
                        await trio.sleep(0.001)
                assert sorted(answers) == [c["id"] for c in calls]
                assert all(
                    frames == [{"type": "result", "id": n, "value": f"p{n}"}]
                    for n, frames in answers.items()
                )
                assert tasks_seen and max(tasks_seen) == 0, tasks_seen
        assert await cluster.stop() == 0


@pytest.mark.parametrize("writes_per_agent", [None, 100], ids=["default", "configured-100"])
async def test_writes_behind_a_write_wait_at_the_relay_and_their_cancels_are_answered_there(
    tmp_path: Path, writes_per_agent: int | None
) -> None:
    """An agent's writes are handed to its owner one at a time, the rest wait at the relay in
    arrival order: 40 notes sent at once and every other one cancelled at once. The cancelled
    notes that were still waiting are answered by the relay (``cancelled``, state ``queued``,
    counted by ``relay_answered_waiting_total``) and the owner never sees them; every note
    answered with a result is in the agent's notes, in the order sent, and no cancelled one is.
    With ``[cluster] relayWritesPerAgent = 100`` all 40 go on at once and the owner answers
    every cancel.
    """
    extra: list[str] = []
    if writes_per_agent is not None:
        config = tmp_path / "cluster.toml"
        config.write_text(f"[cluster]\nrelayWritesPerAgent = {writes_per_agent}\n")
        extra = ["--config", str(config)]
    async with running_cluster(tmp_path, extra=extra) as cluster:
        with trio.fail_after(60):
            async with open_client(cluster.address) as client:
                agent = (await client.call("agents/create", {"cwd": str(tmp_path)}))["agentId"]
                await client.call("diagnostics/echo", {"agentId": agent})  # connects the owner
                calls = [
                    {
                        "id": n,
                        "endpoint": "diagnostics/note",
                        "args": {"agentId": agent, "text": f"note-{n}"},
                    }
                    for n in range(1, 41)
                ]
                cancelled_ids = list(range(2, 41, 2))
                burst = functools.partial(
                    raw_terminal_frames,
                    cluster.address,
                    calls,
                    timeout=20,
                    settle=0.5,
                    cancels=cancelled_ids,
                )
                answers = await trio.to_thread.run_sync(burst)
                notes = await client.call("diagnostics/notes", {"agentId": agent})
                families = await client.call("system/metrics")
        assert await cluster.stop() == 0
    assert sorted(answers) == list(range(1, 41))
    assert all(len(frames) == 1 for frames in answers.values()), answers
    frames = {n: frames[0] for n, frames in answers.items()}
    applied = [n for n, frame in sorted(frames.items()) if frame["type"] == "result"]
    refused = [n for n, frame in frames.items() if frame.get("code") == "cancelled"]
    assert sorted(applied + refused) == list(range(1, 41)), frames
    assert set(refused) <= set(cancelled_ids)
    # What was answered is what happened, in the order sent.
    assert [text for text in notes if text.startswith("note-")] == [f"note-{n}" for n in applied]
    assert {frames[n]["details"]["state"] for n in refused} == {"queued"}
    answered_here = sum(
        sample["value"] for sample in families["relay_answered_waiting_total"]["samples"]
    )
    if writes_per_agent is None:
        # Notes never run long enough to be cancelled on the owner: every cancel that found one
        # still waiting was answered at the relay, and the cancels came while most still waited.
        assert answered_here == len(refused) >= 10, (answered_here, refused)
    else:
        assert answered_here == 0
    assert families["relay_waiting_calls"]["samples"] == [{"labels": [], "value": 0}]
