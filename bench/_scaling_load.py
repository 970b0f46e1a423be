"""The scaling benchmark's load generators, each run in a process of its own.

The generators drive the same calls: ``in_flight`` slots, each keeping one call outstanding
for ``duration`` seconds, then the calls still in flight are collected. Which agents a slot
calls is the ``spread`` (:func:`slot_sequences`): ``workers`` (the default) deals the slots out
evenly over the workers that own agents, so every worker has as many calls outstanding;
``agents`` gives every agent an equal share, so each worker's load is its share of the agents
(with 64 agents, hashing puts 42 on one of 2 workers and that one caps the throughput).

- ``zmtp`` (the default, ``bench._scaling_zmtp``): the wire protocol over ZMTP spoken on plain
  sockets, its loop in C (``bench/_zmtp_drive.c``; in Python where there is no C compiler):
  about 1 µs of CPU per call (4–8 µs for the Python loop) and no thread of its own to take
  turns with the workers'. The C loop also reports latency percentiles.
- ``raw``: a blocking pyzmq DEALER per endpoint speaking the wire protocol directly
  (``docs/protocol.md``: ``hello``, ``call``, ``result``/``error``, ``ping``/``pong``), routing
  by the shard map of ``system/describe`` resolved once per agent: 5–20 µs of CPU per call with
  its ZeroMQ I/O thread.
- ``client``: the Python client of the product (``wire.open_client`` through the supervisor,
  ``actors.cluster._direct.open_cluster_client`` routing by the shard map), which costs about
  as much CPU per call as the server spends on an echo.

Each prints :data:`STARTED` on a line of its own when its first call goes out (the driver
reads the server's CPU counters then), and at the end its report, one line of JSON:
``{calls, errors, seconds, cpuSeconds, agentsPerWorker}``: ``cpuSeconds`` is the generator's
own CPU time over the measured run, so its cost per call can be reported beside the server's;
``agentsPerWorker`` how many of the agents each worker owns (the ``client`` generator omits it).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Generic, TypeVar

import msgpack
import trio
import zmq

__all__ = [
    "ENDPOINTS",
    "GENERATORS",
    "SPREADS",
    "STARTED",
    "CallSlots",
    "agents_per_worker",
    "call_frames",
    "client_generate",
    "lane_windows",
    "peek",
    "raw_generate",
    "resolve_routes",
    "routes_for",
    "slot_sequences",
]

ENDPOINTS = {
    "echo": ("diagnostics/echo", {"payload": "x" * 64}),
    "candidates": ("sessionReferenceResolver/candidates", {"query": ""}),
}
GENERATORS = ("zmtp", "raw", "client")
SPREADS = ("workers", "agents")
T = TypeVar("T")
#: The line a generator prints when its load starts.
STARTED = "started"

#: Longest wait for a welcome, the shard map, or the calls in flight at the end (seconds).
_REPLY_TIMEOUT = 30.0
_PING = msgpack.packb({"type": "ping"})
_PONG = msgpack.packb({"type": "pong"})
_DESCRIBE = msgpack.packb({"type": "call", "id": 0, "endpoint": "system/describe", "args": {}})
#: Frames at least this long are peeked at rather than decoded (bytes).
_PEEK_ABOVE = 512


# -- raw: pyzmq + msgpack, no trio -------------------------------------------------------------


class _RawPeer:
    """One DEALER connection that has been welcomed by the server."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], endpoint: str) -> None:
        self.socket: zmq.Socket[bytes] = context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(endpoint)
        self.send_now(msgpack.packb({"type": "hello", "versions": [1], "name": "bench"}))
        self.expect(lambda message: message.get("type") == "welcome", endpoint)

    def send_now(self, message: bytes) -> None:
        self.socket.send(message)

    def expect(self, matches: Any, what: str) -> dict[str, Any]:
        """Receive until a frame ``matches`` (answering pings meanwhile)."""
        if not self.socket.poll(int(_REPLY_TIMEOUT * 1000)):
            raise RuntimeError(f"no answer from {what} within {_REPLY_TIMEOUT:g} s")
        while True:
            message: dict[str, Any] = msgpack.unpackb(self.socket.recv())
            if message.get("type") == "ping":
                self.socket.send(_PONG)
            elif matches(message):
                return message
            elif message.get("type") == "error":
                raise RuntimeError(f"{what}: {message.get('code')}: {message.get('message')}")


def peek(frame: bytes) -> tuple[Any, Any]:
    """The ``type`` and ``id`` of a frame; a large frame's other values are skipped, not
    decoded (a ``candidates`` result is about 10 kB: decoding it would cost the generator
    more than the server spends on some calls)."""
    if len(frame) < _PEEK_ABOVE:
        message = msgpack.unpackb(frame)
        return message.get("type"), message.get("id")
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(frame)
    kind = ident = None
    for _ in range(unpacker.read_map_header()):
        key = unpacker.unpack()
        if key == "type":
            kind = unpacker.unpack()
        elif key == "id":
            ident = unpacker.unpack()
        else:
            unpacker.skip()
        if kind is not None and ident is not None:
            break
    return kind, ident


def call_frames(endpoint: str, args: dict[str, Any]) -> tuple[bytes, bytes]:
    """The bytes of a ``call`` frame before and after its id: ``head + packb(id) + tail``.

    Packing the fixed part once keeps the generator's cost per call to a few µs."""
    pack = msgpack.packb
    head = b"\x84" + pack("type") + pack("call") + pack("id")  # a map of 4 entries
    return head, pack("endpoint") + pack(endpoint) + pack("args") + pack(args)


def resolve_routes(cluster: dict[str, Any], agents: list[str]) -> dict[str, str]:
    """Agent id -> endpoint of its owner, from the ``cluster`` entry of ``system/describe``."""
    from actors.cluster import shard_of

    workers: dict[str, str] = cluster["workers"]
    owners: list[str | None] = cluster["owners"]
    routes: dict[str, str] = {}
    for agent in agents:
        owner = owners[shard_of(agent, int(cluster["shardCount"]))]
        if owner is None or owner not in workers:
            raise RuntimeError(f"the shard map names no live owner for agent {agent!r}")
        routes[agent] = workers[owner]
    return routes


def agents_per_worker(routes: dict[str, str]) -> list[int]:
    """How many of the agents each worker owns, most first (a run's balance)."""
    return sorted(Counter(routes.values()).values(), reverse=True)


def slot_sequences(owners: list[str], in_flight: int, spread: str) -> list[list[int]]:
    """For each of ``in_flight`` slots, the indexes of the agents it calls, in turn and over
    again; ``owners[i]`` is where agent ``i``'s calls go.

    ``agents``: slot ``i`` calls agents ``i``, ``i + in_flight``, ``i + 2 * in_flight``, …
    (modulo their count), so every agent gets an equal share of the calls. ``workers``: the
    slots are dealt out to the owners in turn and each cycles over its owner's agents in the
    same way, so every owner has as many calls outstanding (one more at most).
    """
    if spread == "agents":
        count = len(owners)
        return [[(slot + k * in_flight) % count for k in range(count)] for slot in range(in_flight)]
    groups: dict[str, list[int]] = {}
    for index, owner in enumerate(owners):
        groups.setdefault(owner, []).append(index)
    lanes = list(groups.values())
    windows = lane_windows(in_flight, len(lanes))
    sequences: list[list[int]] = []
    for slot in range(in_flight):
        lane = lanes[slot % len(lanes)]
        stride = windows[slot % len(lanes)]
        first = slot // len(lanes)
        sequences.append([lane[(first + k * stride) % len(lane)] for k in range(len(lane))])
    return sequences


def lane_windows(in_flight: int, lanes: int) -> list[int]:
    """How many of ``in_flight`` slots each of ``lanes`` owners gets, the slots dealt out in
    turn (the ``workers`` spread)."""
    return [len(range(lane, in_flight, lanes)) for lane in range(lanes)]


def routes_for(mode: str, supervisor: Any, address: str, agents: list[str]) -> dict[str, str]:
    """Agent id -> the endpoint its calls go to: the supervisor's ``address`` (``hop``), or its
    owner's from the shard map the ``supervisor`` peer reads (``direct``). ``supervisor`` is a
    generator's welcomed peer: ``send_now(frame)`` and ``expect(matches, what)``."""
    if mode != "direct":
        return dict.fromkeys(agents, address)
    supervisor.send_now(_DESCRIBE)
    described = supervisor.expect(lambda m: m.get("id") == 0, "system/describe")
    return resolve_routes(described["value"]["cluster"], agents)


def raw_generate(
    address: str,
    mode: str,
    kind: str,
    agents: list[str],
    duration: float,
    in_flight: int,
    start_at: float,
    spread: str,
) -> dict[str, Any]:
    endpoint, base = ENDPOINTS[kind]
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        supervisor = _RawPeer(context, address)
        routes = routes_for(mode, supervisor, address, agents)
        peers = {address: supervisor} | {
            e: _RawPeer(context, e) for e in set(routes.values()) if e != address
        }
        targets = [
            (peers[routes[agent]].socket, *call_frames(endpoint, {**base, "agentId": agent}))
            for agent in agents
        ]
        sequences = slot_sequences([routes[agent] for agent in agents], in_flight, spread)
        poller = zmq.Poller()
        for peer in peers.values():
            poller.register(peer.socket, zmq.POLLIN)
        # Connections, hellos and the shard map are set up: start with the other generators.
        time.sleep(max(0.0, start_at - time.time()))
        report = _raw_drive(targets, sequences, poller, duration)
        return report | {"agentsPerWorker": agents_per_worker(routes)}
    finally:
        context.destroy(linger=0)


def _raw_drive(
    targets: list[tuple[zmq.Socket[bytes], bytes, bytes]],
    sequences: list[list[int]],
    poller: zmq.Poller,
    duration: float,
) -> dict[str, Any]:
    sockets = {id(socket): socket for socket, _, _ in targets}
    book = CallSlots(targets, sequences, duration)
    for socket, frame in book.start():
        socket.send(frame)
    while (step := book.step()) is not None:
        timeout, ping = step
        if ping:
            for socket in sockets.values():
                socket.send(_PING)
        for socket, _ in poller.poll(timeout):
            while True:
                try:
                    kind, ident = peek(socket.recv(zmq.NOBLOCK))
                except zmq.Again:
                    break
                if kind == "ping":
                    socket.send(_PONG)
                    continue
                call = book.answered(kind, ident)
                if call is not None:
                    call[0].send(call[1])
    return book.report()


class CallSlots(Generic[T]):
    """The bookkeeping of a generator loop written in Python (``raw``, and ``zmtp`` where it
    has no C loop): which call each slot makes next, the calls outstanding, the counts and the
    clock. The loops only move frames.

    ``targets[i]`` is agent ``i``'s destination with its call frame before and after the id;
    ``sequences`` are :func:`slot_sequences`.
    """

    def __init__(
        self, targets: list[tuple[T, bytes, bytes]], sequences: list[list[int]], duration: float
    ) -> None:
        self._targets = targets
        self._sequences = sequences
        self._turns = [0] * len(sequences)  # slot -> how many calls it has made
        self._pending: dict[Any, int] = {}  # call id -> slot
        self._next_id = 1
        self._duration = duration
        self._done = self._errors = 0
        self._cpu = self._started = self._deadline = self._next_ping = self._last_reply = 0.0
        self.sending = True

    def start(self) -> list[tuple[T, bytes]]:
        """Start the clock (printing :data:`STARTED`): every slot's first call."""
        print(STARTED, flush=True)
        self._cpu = time.process_time()
        self._started = self._last_reply = time.perf_counter()
        self._deadline = self._started + self._duration
        self._next_ping = self._started + 1.0
        return [self._call(slot) for slot in range(len(self._sequences))]

    def step(self) -> tuple[int, bool] | None:
        """Before each poll: None when the run is over (every call answered after the
        deadline, or the answers overdue), else the poll's timeout (ms) and whether to ping
        the servers now (the server drops a peer silent for peerTimeoutMs)."""
        if not self._pending:
            return None
        now = time.perf_counter()
        self.sending = now < self._deadline
        if not self.sending and now > self._deadline + _REPLY_TIMEOUT:
            return None
        ping = now >= self._next_ping
        if ping:
            self._next_ping = now + 1.0
        until = (min(self._deadline, self._next_ping) if self.sending else self._next_ping) - now
        return max(1, int(until * 1000)), ping

    def answered(self, kind: Any, ident: Any) -> tuple[T, bytes] | None:
        """Count a reply (``result`` or else an error): the slot's next call, while sending."""
        slot = self._pending.pop(ident, None)
        if slot is None:
            return None  # a pong, or an answer to no call of ours
        if kind == "result":
            self._done += 1
        else:
            self._errors += 1
        self._last_reply = time.perf_counter()
        return self._call(slot) if self.sending else None

    def report(self) -> dict[str, Any]:
        return {
            "calls": self._done,
            "errors": self._errors + len(self._pending),
            "seconds": max(self._last_reply, self._deadline) - self._started,
            "cpuSeconds": time.process_time() - self._cpu,
        }

    def _call(self, slot: int) -> tuple[T, bytes]:
        sequence = self._sequences[slot]
        target, head, tail = self._targets[sequence[self._turns[slot] % len(sequence)]]
        self._turns[slot] += 1
        ident = self._next_id
        self._next_id += 1
        self._pending[ident] = slot
        return target, head + msgpack.packb(ident) + tail


# -- client: the product's Python client ------------------------------------------------------


async def client_generate(
    address: str, mode: str, kind: str, agents: list[str], duration: float, in_flight: int
) -> dict[str, Any]:
    from actors.cluster._direct import open_cluster_client
    from wire import open_client

    endpoint, base = ENDPOINTS[kind]
    done = 0
    errors = 0

    async def drive(call: Any) -> dict[str, Any]:
        nonlocal done, errors
        deadline = trio.current_time() + duration

        async def task(i: int) -> None:
            nonlocal done, errors
            k = i
            while trio.current_time() < deadline:
                try:
                    await call(endpoint, {**base, "agentId": agents[k % len(agents)]})
                    done += 1
                except Exception:
                    errors += 1
                k += in_flight

        print(STARTED, flush=True)
        cpu = time.process_time()
        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for i in range(in_flight):
                nursery.start_soon(task, i)
        return {
            "calls": done,
            "errors": errors,
            "seconds": time.perf_counter() - started,
            "cpuSeconds": time.process_time() - cpu,
        }

    if mode == "direct":
        async with open_cluster_client(address) as direct:
            return await drive(direct.call)
    async with open_client(address) as client:
        return await drive(client.call)
