"""A client-side log of acknowledged appends, checked against the session logs on disk.

Also the other client-side records the cluster fault tests check: `CallLog` (every call issued
and its one outcome) and `OwnershipLog` (shard claims as a watch on etcd saw them, with the
time each change was seen).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.cluster._etcd_http import EtcdClient, prefix_end
from actors.session_log._reader import load_session
from wire import WireError


@attrs.frozen
class Ack:
    agent: str
    text: str
    seq: int
    #: The worker that acknowledged the append, when the client knows it (direct routing).
    worker: str | None = None
    #: Client clock (``trio.current_time``) when the call was sent and when its ack came back.
    sent: float | None = None
    received: float | None = None


@attrs.define
class AckLog:
    """Every append the server acknowledged, as the client saw it."""

    acks: list[Ack] = attrs.Factory(list)
    failures: list[tuple[float, str]] = attrs.Factory(list)

    def record(
        self,
        agent: str,
        text: str,
        result: dict[str, Any],
        *,
        worker: str | None = None,
        sent: float | None = None,
        received: float | None = None,
    ) -> None:
        self.acks.append(Ack(agent, text, result["seqs"][0], worker, sent, received))

    def missing(self, paths: dict[str, Path]) -> list[Ack]:
        """Acknowledged appends not found (text at its seq) in the logs on disk."""
        found: dict[str, dict[int, str]] = {}
        for agent, path in paths.items():
            loaded = load_session(path, expected_id=agent)
            texts: dict[int, str] = {}
            for event in loaded.events[: loaded.stored_count]:
                if event.get("type") == "user/message":
                    texts[event["seq"]] = event["data"]["id"]
            found[agent] = texts
        return [ack for ack in self.acks if found[ack.agent].get(ack.seq) != ack.text]


@attrs.frozen
class CallRecord:
    """One call the client issued and how it ended."""

    agent: str
    started: float
    ended: float
    #: ``ok``, a wire error code, or ``hang`` (no terminal answer within the test's bound).
    outcome: str
    #: The caller's label (which path the call took, say).
    via: str = ""


@attrs.define
class CallLog:
    """Every call issued, each with exactly one outcome (see `run`)."""

    records: list[CallRecord] = attrs.Factory(list)
    issued: int = 0

    async def run(
        self, agent: str, call: Callable[[], Awaitable[Any]], *, bound: float, via: str = ""
    ) -> tuple[bool, Any]:
        """Await ``call()``, logging its outcome; ``(True, result)`` or ``(False, None)``.

        A call still unanswered after ``bound`` seconds is cancelled and logged as ``hang``.
        """
        self.issued += 1
        started = trio.current_time()
        outcome, value, ok = "hang", None, False
        try:
            with trio.move_on_after(bound):
                value = await call()
                outcome, ok = "ok", True
        except WireError as exc:
            outcome = exc.code.value
        self.records.append(CallRecord(agent, started, trio.current_time(), outcome, via))
        return ok, value

    def outcomes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for record in self.records:
            counts[record.outcome] = counts.get(record.outcome, 0) + 1
        return counts


async def append_logged(
    call: Callable[[str, dict[str, Any]], Awaitable[Any]],
    acks: AckLog,
    agent: str,
    text: str,
    *,
    bound: float,
    worker: str | None = None,
) -> bool:
    """Append ``text`` as one user message to ``agent`` through ``call`` (``client.call``, say)
    within ``bound`` seconds (a hang fails the test): an acknowledgement goes in ``acks`` with
    its send and receive times, a typed failure in ``acks.failures``, after which this backs
    off 50 ms. Whether the append was acknowledged."""
    from tests.actors.cluster._cluster import user_message

    sent = trio.current_time()
    try:
        with trio.fail_after(bound):
            result = await call(
                "sessions/append", {"agentId": agent, "events": [user_message(text)]}
            )
    except WireError as exc:
        acks.failures.append((trio.current_time(), exc.code.value))
        await trio.sleep(0.05)
        return False
    acks.record(agent, text, result, worker=worker, sent=sent, received=trio.current_time())
    return True


#: One append through some route: ``(endpoint, args)`` → ``(result, worker that acked or None)``.
AppendVia = Callable[[str, dict[str, Any]], Awaitable[tuple[Any, str | None]]]


async def keep_appending(
    append: AppendVia,
    agents: list[str],
    acks: AckLog,
    calls: CallLog,
    stop: trio.Event,
    *,
    tag: str = "",
    bound: float = 10,
    via: str = "",
) -> None:
    """Append one user message to each of ``agents`` in turn until ``stop``: every call goes in
    ``calls`` with its one outcome, every acknowledged one in ``acks`` with its send and receive
    times (a failed call backs off 50 ms)."""
    from tests.actors.cluster._cluster import user_message

    k = 0
    while not stop.is_set():
        for agent in agents:
            k += 1
            text = f"{agent}/{tag}{k}"
            args = {"agentId": agent, "events": [user_message(text)]}

            async def attempt(args: dict[str, Any] = args) -> tuple[Any, str | None]:
                return await append("sessions/append", args)

            sent = trio.current_time()
            ok, answer = await calls.run(agent, attempt, bound=bound, via=via)
            if ok:
                result, worker = answer
                acks.record(
                    agent, text, result, worker=worker, sent=sent, received=trio.current_time()
                )
            else:
                await trio.sleep(0.05)


@attrs.define
class Tenure:
    """One claim of a shard: its owner, its epoch (``create_revision``), when it was seen."""

    shard: int
    worker: str
    epoch: int
    #: Client clock when the watch delivered the claim (None: held before the watch began).
    seen_created: float | None
    #: etcd revision of the delete, and client clock when the watch delivered it.
    deleted_revision: int | None = None
    seen_deleted: float | None = None


@attrs.define
class OwnershipLog:
    """Shard claims under one cluster prefix, in etcd's order, with the time each was seen."""

    prefix: bytes
    tenures: list[Tenure] = attrs.Factory(list)
    #: Revision the log covers up to (the last watch batch applied).
    revision: int = 0
    #: ``(shard, held epoch, new epoch)`` for a claim created while another was held.
    overlaps: list[tuple[int, int, int]] = attrs.Factory(list)
    #: ``(worker id, delete revision, client clock)`` of each member key deleted (lease gone).
    members_gone: list[tuple[str, int, float]] = attrs.Factory(list)
    changed: trio.Event = attrs.Factory(trio.Event)

    def held(self) -> dict[int, Tenure]:
        """The current tenure of each held shard."""
        return {t.shard: t for t in self.tenures if t.deleted_revision is None}

    def of(self, shard: int) -> list[Tenure]:
        return [t for t in self.tenures if t.shard == shard]

    def _shard(self, key: bytes) -> int | None:
        rest = key[len(self.prefix) :]
        if not rest.startswith(b"shards/"):
            return None
        return int(rest.removeprefix(b"shards/"))

    async def follow(
        self, etcd: EtcdClient, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Read the current claims, then follow the watch until cancelled."""
        revision, kvs = await etcd.range(self.prefix, prefix_end(self.prefix))
        for kv in kvs:
            shard = self._shard(kv.key)
            if shard is not None:
                worker = json.loads(kv.value)["workerId"]
                self.tenures.append(Tenure(shard, worker, kv.create_revision, None))
        self.revision = revision
        task_status.started()
        batches = etcd.watch(self.prefix, prefix_end(self.prefix), start_revision=revision + 1)
        async with contextlib.aclosing(batches):
            async for batch in batches:
                now = trio.current_time()
                for deleted, kv in batch.events:
                    shard = self._shard(kv.key)
                    if shard is None:
                        member = kv.key[len(self.prefix) :].removeprefix(b"members/")
                        if deleted and member != kv.key[len(self.prefix) :]:
                            self.members_gone.append((member.decode(), kv.mod_revision, now))
                        continue
                    held = self.held().get(shard)
                    if deleted:
                        if held is not None:
                            held.deleted_revision, held.seen_deleted = kv.mod_revision, now
                        continue
                    if held is not None and held.epoch == kv.create_revision:
                        continue  # a rewrite of the same claim
                    if held is not None:  # a second owner: tests assert there is none
                        self.overlaps.append((shard, held.epoch, kv.create_revision))
                        held.deleted_revision, held.seen_deleted = kv.create_revision, now
                    worker = json.loads(kv.value)["workerId"]
                    self.tenures.append(Tenure(shard, worker, kv.create_revision, now))
                self.revision = batch.revision
                self.changed.set()
                self.changed = trio.Event()


def ack_window_problems(acks: list[Ack], ownership: OwnershipLog, shard_count: int) -> list[str]:
    """Acks (those naming their worker) that no single-owner history explains; [] if none.

    Each agent's acks, in seq order (the session's own order), are matched in order to the
    claims etcd saw on its shard: an ack belongs to a claim of the worker that acked it, and
    was sent before that claim's delete was seen (acked before the delete happened). Then,
    per shard, every ack of an earlier claim must have been sent before every ack of a later
    claim came back: otherwise the later owner acked before the earlier one stopped, which
    means two owners acknowledged appends for the shard in overlapping intervals.

    Every problem reported is a proof (no timing slack is assumed), so the check never
    raises a false alarm; the price is that an overlap shorter than the watch's delivery lag
    can go unseen. Exact per-ack epochs would need the worker to name its epoch in the reply.
    """
    from actors.cluster import shard_of

    problems: list[str] = []
    by_claim: dict[tuple[int, int], list[Ack]] = {}
    by_agent: dict[str, list[Ack]] = {}
    for ack in acks:
        if ack.worker is not None:
            by_agent.setdefault(ack.agent, []).append(ack)
    for agent, agent_acks in by_agent.items():
        shard = shard_of(agent, shard_count)
        tenures = sorted(ownership.of(shard), key=lambda t: t.epoch)
        k = 0
        for ack in sorted(agent_acks, key=lambda a: a.seq):
            while k < len(tenures) and not _within(ack, tenures[k]):
                k += 1
            if k == len(tenures):
                problems.append(f"{ack} fits no claim of shard {shard} after the previous ack")
                break
            by_claim.setdefault((shard, k), []).append(ack)
    for (shard, k), earlier in by_claim.items():
        last_sent = max(a.sent or 0.0 for a in earlier)
        for (other, j), later in by_claim.items():
            if other == shard and j > k:
                first_back = min(a.received or 0.0 for a in later)
                if last_sent >= first_back:
                    problems.append(
                        f"shard {shard}: claim #{k} acked a call sent at {last_sent:.3f}, "
                        f"after claim #{j} had acked one by {first_back:.3f}"
                    )
    return problems


def _within(ack: Ack, tenure: Tenure) -> bool:
    if ack.worker != tenure.worker:
        return False
    return tenure.seen_deleted is None or (ack.sent or 0.0) <= tenure.seen_deleted
