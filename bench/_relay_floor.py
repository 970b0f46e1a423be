"""The floor of a relay hop in Python on this host: what any relay written with pyzmq and
msgpack pays per call before it keeps a single promise.

``python -m bench._relay_floor FRONT ROUTES POLICY LOOP`` binds ``FRONT`` (a ROUTER), connects
one DEALER to each worker that ``ROUTES`` (a JSON file: agent id → worker endpoint) names, says
``hello`` to each, prints :data:`READY_PREFIX` and the bound address, and relays until it is
killed. Its ZeroMQ I/O thread runs under ``POLICY`` (``serve --io-threads``: the cluster's).
``LOOP`` is ``blocking`` (one ``zmq.Poller`` loop) or ``pumps`` (the same steps in the receive
callbacks of ``wire``'s socket pumps under trio, as the supervisor runs them).

- a call is decoded, routed by its ``agentId``, given an id of its own and re-encoded;
- an answer is decoded, given back its caller's id and re-encoded;
- pings are answered, and a ``hello`` gets the first worker's ``welcome``.

Either way there is no call record: no cancel is passed on, no deadline kept, no write held in
a lane, no lost caller or worker noticed. Those are what the supervisor's relay does on top
(``docs/scale-out.md``, "Routing"), and ``bench.scaling`` reports the supervisor's CPU per
relayed call against both loops' (``echo/floor/<workers>``, ``echo/floorPumps/<workers>``,
``echo/hopVsFloor/<workers>``): the blocking loop is the floor of Python and pyzmq, the pumps
add what trio and the pumps cost. Calls naming no agent, or an agent the routes do not know,
are answered ``bad-request``: the load generators never send one.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgpack
import trio
import zmq

from wire import IO_THREAD_POLICIES, IoThreadPolicy, use_io_thread_policy

__all__ = ["LOOPS", "READY_PREFIX", "cluster_map", "floor_relay", "relay", "relay_on_pumps"]

READY_PREFIX = "bench-relay-floor: serving on"
#: How the floor relay runs: one blocking loop, or wire's socket pumps under trio.
LOOPS = ("blocking", "pumps")
#: High-water marks: the generators keep hundreds of calls in flight through one connection.
_HWM = 100_000
#: A worker's end of the relay: its socket (the blocking loop) or its pump.
_Backend = TypeVar("_Backend")


def _socket(context: zmq.Context[Any], kind: int) -> zmq.Socket[bytes]:
    socket: zmq.Socket[bytes] = context.socket(kind)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.SNDHWM, _HWM)
    socket.setsockopt(zmq.RCVHWM, _HWM)
    return socket


def _welcomed(socket: zmq.Socket[bytes]) -> bytes:
    """Say hello through ``socket``; its worker's welcome frame."""
    socket.send(msgpack.packb({"type": "hello", "versions": [1], "name": "relay-floor"}))
    while True:
        frame = socket.recv()
        if msgpack.unpackb(frame).get("type") == "welcome":
            return frame


def _owner(message: dict[str, Any], by_agent: dict[str, _Backend]) -> _Backend | None:
    """Where a call goes: the owner of the agent its arguments name, if the routes know it."""
    agent = (message.get("args") or {}).get("agentId")
    return by_agent.get(agent) if type(agent) is str else None


def _refusal(message: dict[str, Any]) -> bytes:
    """The answer to a call the routes cannot place."""
    refusal = {"type": "error", "id": message.get("id"), "code": "bad-request"}
    return bytes(msgpack.packb(refusal | {"message": "unknown agent"}))


def relay(front: str, routes: dict[str, str], policy: IoThreadPolicy = "batch") -> None:
    """Relay calls from ``front`` to the workers of ``routes`` until the process is killed."""
    use_io_thread_policy(policy)  # before the first socket: the context's threads start then
    context: zmq.Context[Any] = zmq.Context.instance()
    frontend = _socket(context, zmq.ROUTER)
    frontend.bind(front)
    backends: dict[str, zmq.Socket[bytes]] = {}
    for endpoint in sorted(set(routes.values())):
        backends[endpoint] = _socket(context, zmq.DEALER)
        backends[endpoint].connect(endpoint)
    # Every worker is welcomed before the first call; a hello is answered with the first's.
    welcomes = [_welcomed(backend) for backend in backends.values()]
    welcome = welcomes[0]
    by_agent = {agent: backends[endpoint] for agent, endpoint in routes.items()}
    print(READY_PREFIX, frontend.getsockopt_string(zmq.LAST_ENDPOINT), flush=True)

    packb, unpackb, noblock, more = msgpack.packb, msgpack.unpackb, zmq.NOBLOCK, zmq.SNDMORE
    # The backend's send, as wire's pump uses it: the sugar layer's Python wrapper costs more
    # than the send itself. Every peer here sends one frame per message: a ROUTER receives
    # two parts (routing id, frame), read by two plain receives.
    send: Any = getattr(zmq.Socket.__mro__[1], "send", zmq.Socket.send)
    pong = packb({"type": "pong"})
    #: Our id → the caller's routing id and its id.
    pending: dict[int, tuple[bytes, Any]] = {}
    next_id = 0
    poller = zmq.Poller()
    for socket in (frontend, *backends.values()):
        poller.register(socket, zmq.POLLIN)
    while True:
        for socket, _ in poller.poll():
            if socket is frontend:
                while True:
                    try:
                        peer = frontend.recv(noblock)
                    except zmq.Again:
                        break
                    frame = frontend.recv(noblock)
                    message = unpackb(frame)
                    kind = message.get("type")
                    if kind == "call":
                        backend = _owner(message, by_agent)
                        if backend is None:
                            send(frontend, peer, more)
                            send(frontend, _refusal(message))
                            continue
                        next_id += 1
                        pending[next_id] = (peer, message["id"])
                        message["id"] = next_id
                        send(backend, packb(message), noblock)
                    elif kind == "hello" or kind == "ping":
                        send(frontend, peer, more)
                        send(frontend, welcome if kind == "hello" else pong)
                continue
            while True:
                try:
                    frame = socket.recv(noblock)
                except zmq.Again:
                    break
                message = unpackb(frame)
                kind = message.get("type")
                if kind == "result" or kind == "error":
                    caller = pending.pop(message.get("id"), None)
                    if caller is not None:
                        message["id"] = caller[1]
                        send(frontend, caller[0], more | noblock)
                        send(frontend, packb(message), noblock)
                elif kind == "ping":
                    send(socket, pong)


async def relay_on_pumps(front: str, routes: dict[str, str], policy: IoThreadPolicy) -> None:
    """:func:`relay`'s steps in the receive callbacks of ``wire``'s socket pumps, one per
    socket, under trio."""
    from wire._pump import SocketPump

    use_io_thread_policy(policy)
    context: zmq.Context[Any] = zmq.Context.instance()
    frontend = _socket(context, zmq.ROUTER)
    frontend.bind(front)
    packb, unpackb = msgpack.packb, msgpack.unpackb
    pong = packb({"type": "pong"})
    pending: dict[int, tuple[bytes, Any]] = {}
    next_id = 0
    welcome = trio.Event()
    welcomes: list[bytes] = []

    def from_caller(peer: bytes, frames: list[bytes]) -> None:
        nonlocal next_id
        message = unpackb(frames[0])
        kind = message.get("type")
        if kind == "call":
            backend = _owner(message, by_agent)
            if backend is None:
                callers.send_nowait(peer, _refusal(message))
                return
            next_id += 1
            pending[next_id] = (peer, message["id"])
            message["id"] = next_id
            backend.send_nowait(b"", packb(message))
        elif kind == "hello" or kind == "ping":
            callers.send_nowait(peer, welcomes[0] if kind == "hello" else pong)

    def from_worker(pump: list[SocketPump]) -> Callable[[bytes, list[bytes]], None]:
        def receive(_: bytes, frames: list[bytes]) -> None:
            message = unpackb(frames[0])
            kind = message.get("type")
            if kind == "result" or kind == "error":
                caller = pending.pop(message.get("id"), None)
                if caller is not None:
                    message["id"] = caller[1]
                    callers.send_nowait(caller[0], packb(message))
            elif kind == "ping":
                pump[0].send_nowait(b"", pong)
            elif kind == "welcome":
                welcomes.append(frames[0])
                if len(welcomes) == len(backends):
                    welcome.set()

        return receive

    callers = SocketPump(frontend, router=True, on_receive=from_caller)
    backends: dict[str, SocketPump] = {}
    async with trio.open_nursery() as nursery:
        for endpoint in sorted(set(routes.values())):
            socket = _socket(context, zmq.DEALER)
            socket.connect(endpoint)
            holder: list[SocketPump] = []
            holder.append(SocketPump(socket, router=False, on_receive=from_worker(holder)))
            backends[endpoint] = holder[0]
            nursery.start_soon(holder[0].run)
            hello = {"type": "hello", "versions": [1], "name": "relay-floor"}
            holder[0].send_nowait(b"", packb(hello))
        by_agent = {agent: backends[endpoint] for agent, endpoint in routes.items()}
        await welcome.wait()  # every worker welcomed us before the first call
        nursery.start_soon(callers.run)
        print(READY_PREFIX, frontend.getsockopt_string(zmq.LAST_ENDPOINT), flush=True)


@contextlib.contextmanager
def floor_relay(
    tmp: Path,
    address: str,
    agents: list[str],
    policy: IoThreadPolicy = "batch",
    loop: str = "blocking",
) -> Iterator[tuple[int, str]]:
    """Run the floor relay (its ``loop``) in front of the workers of the cluster at ``address``
    (their shard map routes ``agents``), its I/O thread under ``policy``; yields its pid and
    its address. Killed when the block exits."""
    from bench._scaling_load import resolve_routes

    routes_file = tmp / "floor-routes.json"
    cluster = trio.run(cluster_map, address)
    routes_file.write_text(json.dumps(resolve_routes(cluster, agents)))
    argv = [sys.executable, "-m", "bench._relay_floor", f"ipc://{tmp}/floor-{loop}.sock"]
    argv += [str(routes_file), policy, loop]
    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=root)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith(READY_PREFIX):
            raise RuntimeError(f"the floor relay did not start: {line!r}")
        yield process.pid, line[len(READY_PREFIX) :].strip()
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


async def cluster_map(address: str) -> dict[str, Any]:
    """The ``cluster`` entry of the ``system/describe`` of the supervisor at ``address``."""
    from wire import open_client

    async with open_client(address) as client:
        described = await client.call("system/describe")
    cluster: dict[str, Any] = described["cluster"]
    return cluster


def main(argv: list[str]) -> int:
    front, routes_file, policy, loop = argv
    if policy not in IO_THREAD_POLICIES:
        raise SystemExit(f"I/O thread policy must be one of {IO_THREAD_POLICIES}, not {policy!r}")
    if loop not in LOOPS:
        raise SystemExit(f"loop must be one of {LOOPS}, not {loop!r}")
    routes = json.loads(Path(routes_file).read_text())
    if loop == "pumps":
        trio.run(relay_on_pumps, front, routes, policy)
    else:
        relay(front, routes, policy)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
