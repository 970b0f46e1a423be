"""The ``zmtp`` load generator: the wire protocol over ZMTP 3.0 on plain sockets, no libzmq.

The ``raw`` generator costs 5–20 µs of CPU per call, most of it in libzmq: a call per message
into the library, a mailbox signal to its I/O thread and back, and the I/O thread's own
wake-ups, which on a 2-core machine take turns with the workers' threads. This one speaks ZMTP
3.0 (NULL mechanism, as a ``DEALER``; https://rfc.zeromq.org/spec/23/) on a Unix or TCP socket
itself, from one thread. Python connects, says ``hello`` and reads the shard map; the loop then
runs in C (``_zmtp_drive.c``, compiled on first use: about 1 µs per call) or, without a C
compiler or with the ``agents`` spread, in Python (:func:`_drive`, 4–8 µs per call). Either way
the calls a pass of replies frees go out in one write per connection and replies are read in
large chunks, so the cores are left to the workers the benchmark measures. The calls are the
``raw`` generator's: the same slots, agents, frames and report (``bench._scaling_load``).

The server sees an ordinary ZeroMQ peer: libzmq's ROUTER answers the handshake and cannot tell
the difference.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

import msgpack

from bench._scaling_load import (
    ENDPOINTS,
    CallSlots,
    agents_per_worker,
    call_frames,
    lane_windows,
    peek,
    routes_for,
    slot_sequences,
)

__all__ = ["ZmtpPeer", "frame", "zmtp_generate"]

_REPLY_TIMEOUT = 30.0
_PING = msgpack.packb({"type": "ping"})
_PONG = msgpack.packb({"type": "pong"})
_READ_CHUNK = 1 << 20

# Frame flags (ZMTP 3.0, section "Framing").
_MORE, _LONG, _COMMAND = 0x01, 0x02, 0x04


def frame(body: bytes, flags: int = 0) -> bytes:
    """One ZMTP frame: flags, then a 1-octet or 8-octet size, then the body."""
    if len(body) < 256:
        return bytes((flags, len(body))) + body
    return bytes((flags | _LONG,)) + len(body).to_bytes(8, "big") + body


def _greeting() -> bytes:
    signature = b"\xff" + bytes(8) + b"\x7f"
    mechanism = b"NULL".ljust(20, b"\x00")
    return signature + b"\x03\x00" + mechanism + b"\x00" + bytes(31)


def _ready() -> bytes:
    def prop(name: bytes, value: bytes) -> bytes:
        return bytes((len(name),)) + name + len(value).to_bytes(4, "big") + value

    body = b"\x05READY" + prop(b"Socket-Type", b"DEALER") + prop(b"Identity", b"")
    return frame(body, _COMMAND)


def _connect(endpoint: str) -> socket.socket:
    transport, _, where = endpoint.partition("://")
    if transport == "ipc":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect("\0" + where[1:] if where.startswith("@") else where)
    elif transport == "tcp":
        host, _, port = where.rpartition(":")
        sock = socket.create_connection((host.strip("[]"), int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    else:
        raise ValueError(f"the zmtp generator speaks ipc:// and tcp://, not {endpoint!r}")
    sock.settimeout(_REPLY_TIMEOUT)
    return sock


class ZmtpPeer:
    """One connection to a wire server, handshaken and welcomed."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.socket = _connect(endpoint)
        self._buffer = bytearray()
        self._parts: list[bytes] = []
        self.socket.sendall(_greeting() + _ready())
        greeting = self._read_exactly(64)
        if greeting[0] != 0xFF or greeting[9] != 0x7F or greeting[10] < 3:
            raise RuntimeError(f"{endpoint} does not speak ZMTP 3: {greeting[:12]!r}")
        if greeting[12:32].rstrip(b"\x00") != b"NULL":
            raise RuntimeError(f"{endpoint} asks for a security mechanism this generator lacks")
        self.outgoing: list[bytes] = []
        self.send_now(msgpack.packb({"type": "hello", "versions": [1], "name": "bench"}))
        self.expect(lambda message: message.get("type") == "welcome", endpoint)

    def _read_exactly(self, count: int) -> bytes:
        while len(self._buffer) < count:
            chunk = self.socket.recv(_READ_CHUNK)
            if not chunk:
                raise RuntimeError(f"{self.endpoint} closed the connection")
            self._buffer += chunk
        head = bytes(self._buffer[:count])
        del self._buffer[:count]
        return head

    def send_now(self, message: bytes) -> None:
        self.socket.sendall(frame(message))

    def flush(self) -> None:
        """Send the queued messages, one frame each, in one write."""
        if self.outgoing:
            self.socket.sendall(b"".join(frame(m) for m in self.outgoing))
            self.outgoing.clear()

    def messages(self) -> list[bytes]:
        """The whole messages one read brings (blocking until some bytes come); commands are
        dealt with here (a ``PING`` gets its ``PONG``) and not returned."""
        chunk = self.socket.recv(_READ_CHUNK)
        if not chunk:
            raise RuntimeError(f"{self.endpoint} closed the connection")
        buffer = self._buffer
        buffer += chunk
        out: list[bytes] = []
        at, end = 0, len(buffer)
        while end - at >= 2:
            flags = buffer[at]
            if flags & _LONG:
                if end - at < 9:
                    break
                size, start = int.from_bytes(buffer[at + 1 : at + 9], "big"), at + 9
            else:
                size, start = buffer[at + 1], at + 2
            if end - start < size:
                break
            body = bytes(buffer[start : start + size])
            at = start + size
            if flags & _COMMAND:
                self._command(body)
            elif flags & _MORE:
                self._parts.append(body)
            elif self._parts:
                self._parts.append(body)
                out.append(b"".join(self._parts))  # the protocol sends one part; be lenient
                self._parts = []
            else:
                out.append(body)
        del buffer[:at]
        return out

    def _command(self, body: bytes) -> None:
        name = body[1 : 1 + body[0]]
        if name == b"PING":  # ZMTP 3.1 heartbeat: answer with the context it carries
            context = body[1 + body[0] + 2 :]
            self.socket.sendall(frame(b"\x04PONG" + context, _COMMAND))
        elif name == b"ERROR":
            raise RuntimeError(f"{self.endpoint} refused the handshake: {body!r}")
        # READY (the server's half of the handshake) needs no answer.

    def expect(self, matches: Any, what: str) -> dict[str, Any]:
        """Read until a message ``matches`` (answering pings meanwhile)."""
        while True:
            for raw in self.messages():
                message: dict[str, Any] = msgpack.unpackb(raw)
                if message.get("type") == "ping":
                    self.send_now(_PONG)
                elif matches(message):
                    return message
                elif message.get("type") == "error":
                    code, text = message.get("code"), message.get("message")
                    raise RuntimeError(f"{what}: {code}: {text}")


def zmtp_generate(
    address: str,
    mode: str,
    kind: str,
    agents: list[str],
    duration: float,
    in_flight: int,
    start_at: float,
    spread: str = "workers",
) -> dict[str, Any]:
    """Drive the load (arguments as ``bench._scaling_load``'s ``raw`` generator)."""
    endpoint, base = ENDPOINTS[kind]
    supervisor = ZmtpPeer(address)
    peers = {address: supervisor}
    try:
        routes = routes_for(mode, supervisor, address, agents)
        for where in set(routes.values()) - {address}:
            peers[where] = ZmtpPeer(where)
        targets = [
            (peers[routes[agent]], *call_frames(endpoint, {**base, "agentId": agent}))
            for agent in agents
        ]
        balance = agents_per_worker(routes)
        binary = driver_binary()
        if spread == "workers" and binary is not None:
            _exec_driver(binary, targets, in_flight, duration, start_at, balance)
        owners = [routes[agent] for agent in agents]
        sequences = slot_sequences(owners, in_flight, spread)
        time.sleep(max(0.0, start_at - time.time()))
        report = _drive(targets, list(peers.values()), sequences, duration)
        return report | {"agentsPerWorker": balance}
    finally:
        for peer in peers.values():
            peer.socket.close()


def driver_binary() -> Path | None:
    """``_zmtp_drive.c`` compiled (once per version of its source, in the temporary directory),
    or None without a C compiler: then the loop runs in Python, at 4–8 µs per call."""
    source = Path(__file__).with_name("_zmtp_drive.c")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    binary = Path(tempfile.gettempdir()) / f"agent-actors-zmtp-drive-{digest}"
    if binary.exists():
        return binary
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    partial = binary.with_name(f"{binary.name}.{os.getpid()}")
    built = subprocess.run([compiler, "-O2", "-o", str(partial), str(source)], check=False)
    if built.returncode != 0:
        return None
    os.replace(partial, binary)  # atomic: generators started together may both build it
    return binary


def _exec_driver(
    binary: Path,
    targets: list[tuple[ZmtpPeer, bytes, bytes]],
    in_flight: int,
    duration: float,
    start_at: float,
    balance: list[int],
) -> NoReturn:
    """Hand the connections and the calls to the C loop, which becomes this process and prints
    the report."""
    lanes: dict[ZmtpPeer, list[tuple[bytes, int]]] = {}
    for peer, head, tail in targets:
        call = frame(head + b"\xce" + bytes(4) + tail)  # the id: a msgpack uint32, set in C
        lanes.setdefault(peer, []).append((call, len(call) - len(tail) - 4))
    windows = lane_windows(in_flight, len(lanes))
    spec = bytearray(f"ZD1 {duration} {len(lanes)}\n".encode())
    for (peer, calls), window in zip(lanes.items(), windows, strict=True):
        spec += f"{peer.socket.fileno()} {window} {len(calls)}\n".encode()
        for call, id_at in calls:
            spec += f"{len(call)} {id_at}\n".encode() + call
        peer.socket.setblocking(True)
        os.set_inheritable(peer.socket.fileno(), True)
    handle, path = tempfile.mkstemp(prefix="aa-zmtp-spec-")
    with os.fdopen(handle, "wb") as out:
        out.write(spec)
    extra = f'"agentsPerWorker": {json.dumps(balance)}'
    time.sleep(max(0.0, start_at - time.time()))
    sys.stdout.flush()
    os.execv(binary, [str(binary), path, extra])


def _drive(
    targets: list[tuple[ZmtpPeer, bytes, bytes]],
    peers: list[ZmtpPeer],
    sequences: list[list[int]],
    duration: float,
) -> dict[str, Any]:
    """The loop in Python: the calls a pass of replies frees go out in one write per peer."""
    by_fd = {peer.socket.fileno(): peer for peer in peers}
    poller = select.poll()
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    book = CallSlots(targets, sequences, duration)
    for peer, call in book.start():
        peer.outgoing.append(call)
    for peer in peers:
        peer.flush()
    while (step := book.step()) is not None:
        timeout, ping = step
        if ping:
            for peer in peers:
                peer.outgoing.append(_PING)
        for fd, _ in poller.poll(timeout):
            peer = by_fd[fd]
            for raw in peer.messages():
                kind, ident = peek(raw)
                if kind == "ping":
                    peer.outgoing.append(_PONG)
                    continue
                answered = book.answered(kind, ident)
                if answered is not None:
                    answered[0].outgoing.append(answered[1])
        for peer in peers:
            peer.flush()
    return book.report()
