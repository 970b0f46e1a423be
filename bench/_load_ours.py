"""agent-actors' side of the load generator: trio tasks on one ``wire`` client per process.

Four workloads:

- ``closed``: ``job.concurrency`` tasks, each calling ``job.calls[0]`` (echo by default) again
  as soon as its previous call returned: a closed loop keeping that many calls in flight. Task
  ``t`` of process ``w`` calls agent ``agents[(w * concurrency + t) % K]``.
- ``keystroke``: ``job.concurrency`` simulated typists. Each keystroke sends one call per name in
  ``job.calls`` with a per-typist ``supersede`` key, so the new call cancels the previous one on
  the server in the same message (latest wins, protocol §8). Each superseded call is classified
  by its terminal frame: ``cancelled`` with ``state: queued`` (cancelled before its handler
  ran), ``state: running`` (during), or a result (the handler had finished: after). A
  keystroke is *answered* when every one of its calls returned its result before a newer
  keystroke superseded it (counter ``keystrokesAnswered``, series ``keyToAnswer``: from the
  keystroke to its last result); ``drainAfterWindow`` is how long after the window the last of
  the process's calls ended.
- ``cancel-probe``: one at a time, start a 30 s ``diagnostics/sleep``, wait ``job.probe_settle``
  s and until ``system/stats`` shows it running, cancel the caller's scope, and take the
  server's ``time.monotonic()`` at the end of the handler (``diagnostics/endings``) minus ours
  at the cancel: cancel-to-quiescence (series ``cancelToQuiescence``; a probe process can run
  beside ``closed`` ones to measure under load).
- ``recovery-probe``: idle through the window; the moment it closes (the typists stop), one
  ``system/stats`` and one ``diagnostics/echo`` to ``agents[0]`` at once, each timed to its
  answer (series ``recoveryStats``, ``recoveryEcho``): how soon the server answers a fresh call
  once the load stops.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

import attrs
import trio

from bench._load_jobs import Go, Job, Samples, payload_of
from bench._load_workloads import CALLS, CallContext, Typing
from wire import CallCancelledError, CancelReason, Client, WireError, open_client

__all__ = ["drive", "setup_server", "supersede_bucket"]

#: Seconds a process may take past its window to drain before it fails.
_DRAIN = 30.0
#: How long a cancelled probe may take to show up in ``diagnostics/endings``; a probe that never
#: does was cancelled while still queued (its handler never ran) and yields no sample.
_ENDING_WITHIN = 2.0


def drive(job: Job, go: Go) -> Samples:
    return trio.run(_drive, job, go)


async def _drive(job: Job, go: Go) -> Samples:
    if not job.agents:
        raise ValueError("agent-actors workloads need at least one agent id")
    async with open_client(job.address, name=f"bench.load/{job.worker}") as client:
        payload = payload_of(job.payload_bytes)
        for i in range(max(job.warmup_calls, len(job.agents))):
            # Every agent gets activated here, before the window, not inside it.
            args = {"agentId": job.agents[i % len(job.agents)], "payload": payload}
            echo = job.calls[0] if job.calls[0].startswith("diagnostics/echo") else _ECHO
            if await client.call(echo, args) != payload:
                raise RuntimeError(f"{echo} returned something else than its payload")
        if job.calls[0] == _PREPARE and job.sources:
            await _warm_sources(client, job)
        samples = Samples(await trio.to_thread.run_sync(go), job.duration)
        await trio.sleep(max(0.0, (samples.start_ns - time.monotonic_ns()) / 1e9))
        with trio.fail_after(job.duration + _DRAIN):
            if job.workload == "closed":
                await _closed(client, job, samples, payload)
            elif job.workload == "keystroke":
                await _keystroke(client, job, samples)
            elif job.workload == "cancel-probe":
                await _probes(client, job, samples)
            elif job.workload == "recovery-probe":
                await _recovery(client, job, samples)
            else:
                raise ValueError(f"unknown workload {job.workload!r}")
        samples.stop_clock()
        return samples


_PREPARE = "sessionReferenceResolver/prepare"
_ECHO = "diagnostics/echo"


async def _warm_sources(client: Client, job: Job) -> None:
    """Reference every source once before the window, so each is loaded from its log (its
    agent activated) here and the window measures prepare itself, not first loads."""
    for source in job.sources:
        args = {
            "agentId": job.agents[0],
            "content": "warm up",
            "references": [{"sessionId": source}],
        }
        await client.call(_PREPARE, args)


def _agent(job: Job, task: int) -> str:
    return job.agents[(job.worker * job.concurrency + task) % len(job.agents)]


async def _closed(client: Client, job: Job, samples: Samples, payload: bytes) -> None:
    builder = CALLS[job.calls[0]]

    async def caller(task: int) -> None:
        ctx = CallContext(
            agent_id=_agent(job, task),
            agents=job.agents,
            sources=job.sources,
            payload=payload,
            handler_seconds=job.handler_seconds,
            rng=random.Random(f"{job.seed}/{job.worker}/{task}"),
        )
        args = builder.build(ctx)
        n = 0
        while samples.open():
            if builder.varies:
                n += 1
                args = builder.build(attrs.evolve(ctx, label=f"c{job.worker}-{task}-{n}"))
            started = time.monotonic_ns()
            try:
                await client.call(builder.endpoint, args)
            except WireError as exc:
                samples.counters[f"error:{exc.code.value}"] += 1
                await trio.sleep(0.001)  # an error loop must not spin
                continue
            samples.call_done(started, time.monotonic_ns())

    async with trio.open_nursery() as nursery:
        for task in range(job.concurrency):
            nursery.start_soon(caller, task)


def supersede_bucket(outcome: str) -> str:
    """When a superseded call was stopped, from how it ended: ``before`` its handler ran
    (``cancelled`` with ``state: queued``), ``during`` (``state: running``), ``after`` (its
    result came back: the handler had finished); any other outcome is returned unchanged."""
    return {"queued": "before", "running": "during", "result": "after"}.get(outcome, outcome)


@attrs.define
class _Pending:
    sent_ns: int
    #: When a newer keystroke of the same typist sent its call (``None``: never superseded).
    superseded_ns: int | None = None
    ended: bool = False


@attrs.define
class _Keystroke:
    """One keystroke's calls: answered once each returned its result, none superseded."""

    sent_ns: int
    waiting: int
    answered: bool = True


async def _keystroke(client: Client, job: Job, samples: Samples) -> None:
    last_end_ns = samples.end_ns

    def keystroke_done(key: _Keystroke, answered: bool, ended: int) -> None:
        key.waiting -= 1
        key.answered = key.answered and answered
        if key.waiting == 0 and key.answered:
            samples.counters["keystrokesAnswered"] += 1
            samples.add("keyToAnswer", ended - key.sent_ns)

    async def one_call(
        typist: int, name: str, pending: _Pending, key: _Keystroke, args: dict[str, Any]
    ) -> None:
        nonlocal last_end_ns
        try:
            await client.call(CALLS[name].endpoint, args, supersede=f"{typist}:{name}")
            outcome = "result"
        except CallCancelledError as exc:
            # Only a supersede may cancel these calls; any other reason is counted apart.
            superseded = exc.reason is CancelReason.SUPERSEDED
            outcome = (exc.state or "unknown") if superseded else f"cancelled:{exc.reason}"
        except WireError as exc:
            outcome = f"error:{exc.code.value}"
        ended = time.monotonic_ns()
        last_end_ns = max(last_end_ns, ended)
        pending.ended = True
        keystroke_done(key, pending.superseded_ns is None and outcome == "result", ended)
        if pending.superseded_ns is None:
            if outcome == "result":
                samples.counters["completed"] += 1
                samples.latencies.append(ended - pending.sent_ns)
            else:
                samples.counters[f"notSuperseded:{outcome}"] += 1
            return
        bucket = supersede_bucket(outcome)
        samples.counters[f"superseded:{bucket}"] += 1
        if bucket in ("before", "during"):
            samples.add("supersedeToTerminal", ended - pending.superseded_ns)

    async def typist(t: int, nursery: trio.Nursery) -> None:
        rng = random.Random(f"{job.seed}/{job.worker}/{t}")
        typing = Typing(rng)
        agent = _agent(job, t)
        latest: dict[str, _Pending] = {}
        n = 0
        while True:
            await trio.sleep(rng.uniform(*job.key_interval))
            now = time.monotonic_ns()
            if not samples.open(now):
                return
            samples.counters["keystrokes"] += 1
            query = typing.keystroke()
            key = _Keystroke(sent_ns=now, waiting=len(job.calls))
            for name in job.calls:
                n += 1
                previous = latest.get(name)
                if previous is not None and not previous.ended:
                    previous.superseded_ns = now
                ctx = CallContext(
                    agent_id=agent,
                    agents=job.agents,
                    query=query,
                    label=f"k{job.worker}-{t}-{n}",
                    handler_seconds=job.handler_seconds,
                    rng=rng,
                )
                latest[name] = pending = _Pending(sent_ns=time.monotonic_ns())
                samples.counters["calls"] += 1
                nursery.start_soon(one_call, t, name, pending, key, CALLS[name].build(ctx))

    async with trio.open_nursery() as nursery:
        for t in range(job.concurrency):
            nursery.start_soon(typist, t, nursery)
    samples.add("drainAfterWindow", last_end_ns - samples.end_ns)


async def _recovery(client: Client, job: Job, samples: Samples) -> None:
    await trio.sleep(max(0.0, (samples.end_ns - time.monotonic_ns()) / 1e9))
    echo = {"agentId": job.agents[0], "payload": payload_of(job.payload_bytes)}

    async def timed(series: str, endpoint: str, args: dict[str, Any] | None) -> None:
        started = time.monotonic_ns()
        await client.call(endpoint, args)
        samples.add(series, time.monotonic_ns() - started)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(timed, "recoveryStats", "system/stats", None)
        nursery.start_soon(timed, "recoveryEcho", _ECHO, echo)


async def _probes(client: Client, job: Job, samples: Samples) -> None:
    while samples.open():
        latency = await cancel_to_quiescence(client, job.agents[0], job.probe_settle)
        if latency is None:
            samples.counters["cancelledWhileQueued"] += 1
        else:
            samples.add("cancelToQuiescence", latency)
        await trio.sleep(0.005)


async def cancel_to_quiescence(client: Client, agent_id: str, settle: float) -> int | None:
    """Nanoseconds from cancelling a running sleep to its handler having ended on the server.

    Returns ``None`` when the handler never ran (the cancel found the call still queued).
    """
    label = f"probe-{uuid.uuid4().hex}"
    scope = trio.CancelScope()

    async def sleeper() -> None:
        with scope:
            args = {"agentId": agent_id, "seconds": 30.0, "label": label}
            await client.call("diagnostics/sleep", args)
            raise RuntimeError("diagnostics/sleep returned although it was cancelled")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sleeper)
        await trio.sleep(settle)
        # As bench.echo does: cancel right after the server confirms a running handler, so the
        # sample is the cancel path itself and not two processes waking from idle as well.
        with trio.move_on_after(_ENDING_WITHIN):
            while True:
                stats = await client.call("system/stats")
                if stats["calls"].get("running", 0) >= 2:  # the stats call counts itself
                    break
                await trio.sleep(0.002)
        cancelled_at = time.monotonic()
        scope.cancel()
    # Wait before asking so our own polling does not compete with the handler being timed.
    await trio.sleep(0.003)
    with trio.move_on_after(_ENDING_WITHIN):
        while True:
            endings = await client.call("diagnostics/endings")
            ending = next((e for e in reversed(endings) if e["call"] == label), None)
            if ending is not None:
                if ending["outcome"] != "cancelled":
                    raise RuntimeError(f"the cancelled sleep ended {ending['outcome']!r}")
                return max(0, round((float(ending["endedAt"]) - cancelled_at) * 1e9))
            await trio.sleep(0.005)
    return None


async def setup_server(
    address: str, agents: int, cwd: str | None = None
) -> tuple[list[str], list[str]]:
    """Create ``agents`` agents working in ``cwd``; return their ids and every endpoint the
    server serves."""
    async with open_client(address, name="bench.load/setup") as client:
        with trio.fail_after(60):
            described = await client.call("system/describe")
            ids = []
            for i in range(agents):
                args = {"title": f"load agent {i}", "cwd": cwd}
                info = await client.call("agents/create", args)
                ids.append(info["agentId"])
    return ids, [e["name"] for e in described["endpoints"]]
