"""A raw client that cancels its calls 0-5 ms after sending them, and the checks of what the
answers claimed against what the server did (cancel truth: ``cancelled`` means no effect).

Shared by ``bench.cancel_storm`` and the cancel-truth tests (``tests/actors/cluster``)."""

from __future__ import annotations

import gc
import heapq
import random
import select
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import msgpack
import zmq

from actors.session_log._reader import load_session
from wire import open_client


def user_message(text: str) -> dict[str, Any]:
    """One ``user/message`` event as a host appends it (``text`` is also its id)."""
    return {
        "type": "user/message",
        "data": {
            "id": text,
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        },
        "surfaceOp": "append",
    }


#: Answers that claim the call had no effect.
NO_EFFECT = frozenset({"cancelled", "deadline-exceeded"})
#: Answers a healthy server may give a storm: a result, no effect, or (an owner that did not
#: answer within the relay's grace, under load) ``unavailable`` with the outcome unknown.
EXPECTED = frozenset({"result", *NO_EFFECT, "unavailable"})


@attrs.define
class Sent:
    """One call of the storm and everything the client saw of it."""

    id: int
    endpoint: str
    agent: str
    #: The appended text, the note, or the sleep's label.
    mark: str
    #: Seconds after sending at which the client cancels (None: never).
    cancel_after: float | None
    sent: float = 0.0
    #: Client clock when the cancel frame went out (None: the answer came first, or no cancel).
    cancel_sent: float | None = None
    received: float | None = None
    frames: list[dict[str, Any]] = attrs.Factory(list)

    @property
    def code(self) -> str:
        """``result``, the error code, or ``none`` (no terminal frame)."""
        if not self.frames:
            return "none"
        frame = self.frames[0]
        return "result" if frame["type"] == "result" else str(frame["code"])


def plan(
    agents: list[str],
    *,
    appends: int,
    notes: int,
    sleeps: int,
    tag: str,
    seed: int,
    creates: int = 0,
    agent_creates: int = 0,
    cwd: Path | None = None,
) -> list[tuple[Sent, dict[str, Any]]]:
    """The calls of one storm, shuffled: each with a cancel 0-5 ms after sending, or (one in
    five) a deadline of 1-5 ms instead; one append in four carries its agent's supersede key,
    so a newer one cancels it. Creates (``sessions/create`` naming no session, so a scale-out
    supervisor takes its task path) and titled ``agents/create`` calls (two writes: the
    session, then its title) are marked by their cwd, ``cwd / <mark>``."""
    rng = random.Random(seed)
    calls: list[tuple[Sent, dict[str, Any]]] = []
    kinds = ["append"] * appends + ["note"] * notes + ["sleep"] * sleeps + ["create"] * creates
    kinds += ["agent"] * agent_creates
    rng.shuffle(kinds)
    for n, kind in enumerate(kinds, start=1):
        agent = rng.choice(agents) if agents else ""
        mark = f"{tag}-{kind}-{n}"
        frame: dict[str, Any] = {"type": "call", "id": n}
        if kind == "append":
            frame["endpoint"] = "sessions/append"
            frame["args"] = {"agentId": agent, "events": [user_message(mark)]}
            if rng.random() < 0.25:
                frame["supersede"] = f"append-{agent}"
        elif kind == "create":
            assert cwd is not None, "creates are marked by a cwd under cwd"
            frame["endpoint"] = "sessions/create"
            frame["args"] = {"cwd": str(cwd / mark)}
        elif kind == "agent":
            assert cwd is not None, "creates are marked by a cwd under cwd"
            frame["endpoint"] = "agents/create"
            frame["args"] = {"cwd": str(cwd / mark), "title": mark}
        elif kind == "note":
            frame["endpoint"] = "diagnostics/note"
            frame["args"] = {"agentId": agent, "text": mark}
        else:
            frame["endpoint"] = "diagnostics/sleep"
            seconds = rng.uniform(0.0005, 0.004)
            frame["args"] = {"agentId": agent, "seconds": seconds, "label": mark}
        cancel_after: float | None = rng.uniform(0.0, 0.005)
        if rng.random() < 0.2:
            frame["deadlineMs"] = rng.uniform(1.0, 5.0)
            cancel_after = None
        calls.append((Sent(n, frame["endpoint"], agent, mark, cancel_after), frame))
    return calls


def storm(
    address: str,
    calls: list[tuple[Sent, dict[str, Any]]],
    *,
    in_flight: int = 32,
    timeout: float = 120.0,
    settle: float = 0.5,
    routes: Mapping[str, str] | None = None,
) -> list[Sent]:
    """Send ``calls`` from raw DEALERs (run it in a thread), at most ``in_flight`` at a time,
    each cancelled at its ``cancel_after`` unless answered first; keep every terminal frame,
    reading ``settle`` seconds past the last one (a second would come by then).

    A call goes to ``routes[agent]`` (the owner of its agent, for a client that routes by the
    shard map), else to ``address``; its cancel follows it. One DEALER per endpoint."""
    routes = routes or {}
    context = zmq.Context()
    endpoints = list(dict.fromkeys([address, *routes.values()]))
    sockets: dict[str, zmq.Socket[bytes]] = {}
    by_id = {sent.id: sent for sent, _ in calls}
    socket_of = {sent.id: routes.get(sent.agent, address) for sent, _ in calls}
    # The client runs in the test process: a full collection there walks every test module's
    # objects (up to 50 ms measured), a pause of the client that would count as the server's
    # cancel latency. The storm's own objects are few and acyclic.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for endpoint in endpoints:
            sock = sockets[endpoint] = context.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(endpoint)
        deadline = time.monotonic() + timeout
        for sock in sockets.values():
            _hello(sock, deadline)
        cancels: list[tuple[float, int]] = []
        open_ids: set[int] = set()
        queue = iter(calls)
        exhausted = False
        last_frame = time.monotonic()
        while time.monotonic() < deadline:
            while not exhausted and len(open_ids) < in_flight:
                nxt = next(queue, None)
                if nxt is None:
                    exhausted = True
                    break
                sent, frame = nxt
                sent.sent = time.monotonic()
                sockets[socket_of[sent.id]].send(msgpack.packb(frame))
                open_ids.add(sent.id)
                if sent.cancel_after is not None:
                    heapq.heappush(cancels, (sent.sent + sent.cancel_after, sent.id))
            now = time.monotonic()
            while cancels and cancels[0][0] <= now:
                _, call_id = heapq.heappop(cancels)
                if call_id in open_ids:
                    cancel = {"type": "cancel", "id": call_id, "reason": "caller"}
                    sockets[socket_of[call_id]].send(msgpack.packb(cancel))
                    by_id[call_id].cancel_sent = time.monotonic()
            if exhausted and not open_ids and time.monotonic() - last_frame > settle:
                break
            wait = 0.05 if not cancels else max(0.0, cancels[0][0] - time.monotonic())
            for sock in _wait_readable(list(sockets.values()), wait):
                while sock.get(zmq.EVENTS) & zmq.POLLIN:
                    message = msgpack.unpackb(sock.recv())
                    if message["type"] == "ping":
                        sock.send(msgpack.packb({"type": "pong"}))
                    elif message["type"] in ("result", "error") and message.get("id") in by_id:
                        sent = by_id[message["id"]]
                        if not sent.frames:
                            sent.received = time.monotonic()
                        sent.frames.append(message)
                        open_ids.discard(sent.id)
                        last_frame = time.monotonic()
        return [sent for sent, _ in calls]
    finally:
        if collecting:
            gc.enable()
        for sock in sockets.values():
            sock.close()
        context.term()


def _hello(sock: zmq.Socket[bytes], deadline: float) -> None:
    sock.send(msgpack.packb({"type": "hello", "versions": [1], "name": "storm"}))
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError("no welcome from the server")
        if sock.poll(100) and msgpack.unpackb(sock.recv())["type"] == "welcome":
            return


def _wait_readable(sockets: list[zmq.Socket[bytes]], timeout: float) -> list[zmq.Socket[bytes]]:
    """The sockets holding a message, waiting up to ``timeout`` seconds for one, asleep:
    ``zmq.poll`` counts whole ms, so a cancel due in under 1 ms made it return at once, and the
    client spun (most of a core, on the cores the servers share), where ``select`` sleeps to
    the µs."""
    end = time.monotonic() + timeout
    while True:
        # The FD signals a change only; EVENTS, just read, re-arms it.
        ready = [sock for sock in sockets if sock.get(zmq.EVENTS) & zmq.POLLIN]
        left = end - time.monotonic()
        if ready or left <= 0:
            return ready
        select.select([sock.FD for sock in sockets], [], [], left)


async def noted_texts(address: str, agents: list[str]) -> set[str]:
    """Every note the ``agents`` hold (``diagnostics/notes``)."""
    async with open_client(address) as client:
        found: set[str] = set()
        for agent in agents:
            found.update(await client.call("diagnostics/notes", {"agentId": agent}))
        return found


async def completed_sleeps(endpoints: Iterable[str], tag: str) -> set[str]:
    """Labels of the sleeps with ``tag`` that ran to their end, on any of ``endpoints`` (the
    server, or each worker: ``diagnostics/endings`` is kept per process)."""
    done: set[str] = set()
    for endpoint in endpoints:
        async with open_client(endpoint) as server:
            for ending in await server.call("diagnostics/endings"):
                if ending["call"].startswith(tag) and ending["outcome"] == "completed":
                    done.add(ending["call"])
    return done


def appended_texts(paths: dict[str, Path]) -> set[str]:
    """The ids of the user messages in the session logs on disk."""
    found: set[str] = set()
    for agent, path in paths.items():
        loaded = load_session(path, expected_id=agent)
        for event in loaded.events[: loaded.stored_count]:
            if event.get("type") == "user/message":
                found.add(event["data"]["id"])
    return found


def created_cwds(data: Path) -> set[str]:
    """The cwd of every session log under the data directory ``data``."""
    return {
        str(load_session(path).header.cwd)
        for pattern in ("session.jsonl", "session.jsonl.zstd")
        for path in data.rglob(pattern)
    }


@attrs.frozen
class Verdict:
    """What the answers of one kind of call claimed, against what the server did."""

    kind: str
    codes: dict[str, int]
    #: Answered ``cancelled`` or ``deadline-exceeded``, yet took effect.
    lied_no_effect: list[str]
    #: Answered with a result, yet took no effect.
    lost_acks: list[str]
    #: Calls without exactly one terminal frame.
    not_one_frame: list[int]
    #: Calls answered ``cancelled`` because a newer call with their supersede key came.
    superseded: int = 0
    #: Answers outside `EXPECTED`, or ``unavailable`` without ``details.outcome: unknown``.
    unexpected: list[str] = attrs.Factory(list)


def judge(kind: str, sent: Iterable[Sent], effected: set[str]) -> Verdict:
    """Compare each call's one terminal frame with whether its mark took effect."""
    codes: dict[str, int] = {}
    lied: list[str] = []
    lost: list[str] = []
    not_one: list[int] = []
    for call in sent:
        codes[call.code] = codes.get(call.code, 0) + 1
        if len(call.frames) != 1:
            not_one.append(call.id)
        if call.code in NO_EFFECT and call.mark in effected:
            lied.append(f"{call.mark} ({call.code}: {call.frames[0].get('details')})")
        if call.code == "result" and call.mark not in effected:
            lost.append(call.mark)
    superseded = 0
    unexpected: list[str] = []
    for call in sent:
        details = (call.frames[0].get("details") or {}) if call.frames else {}
        superseded += details.get("reason") == "superseded"
        if call.code not in EXPECTED or (
            call.code == "unavailable" and details.get("outcome") != "unknown"
        ):
            unexpected.append(f"{call.mark}: {call.frames[:1]}")
    return Verdict(kind, codes, lied, lost, not_one, superseded, unexpected)


def cancel_latencies(sent: Iterable[Sent], ended: str = "all") -> list[float]:
    """Seconds from each cancel frame sent to its call's terminal frame, sorted: of every call
    (``all``), of those that ended with no effect (``no-effect``), split by where the cancel
    found the call (its answer's ``details.state``: ``queued``, not started yet, answered by the
    relay when its lane held the call; ``running``, which only its owner can answer), or with a
    ``result``."""
    return sorted(
        s.received - s.cancel_sent
        for s in sent
        if s.cancel_sent is not None
        and s.received is not None
        and s.received >= s.cancel_sent
        and ended in ("all", *_endings(s))
    )


def _endings(sent: Sent) -> tuple[str, ...]:
    code = sent.code
    if code == "result":
        return ("result",)
    if code in NO_EFFECT:
        state = (sent.frames[0].get("details") or {}).get("state")
        return ("no-effect", str(state))
    return (code,)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of sorted ``values`` (nearest rank)."""
    if not values:
        return float("nan")
    return values[min(len(values) - 1, max(0, round(q * len(values)) - 1))]
