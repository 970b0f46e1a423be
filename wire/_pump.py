"""The one task that owns a ZeroMQ socket.

pyzmq has no trio integration and a zmq socket is not safe to share between tasks, so exactly
one task, :meth:`SocketPump.run`, touches the socket. It drains every ready message per wake,
re-checks ``EVENTS`` after every send and receive (the socket's FD is edge-triggered: it only
signals a *change*), and sleeps on the FD or until another task queues an outgoing frame.

The pump moves frames and makes no protocol decisions. Received messages go to a synchronous
callback, which runs in the pump task itself, so a received call costs no extra scheduler hop.
Outgoing frames are queued with :meth:`SocketPump.send_nowait` from any task.

Flow control: a send that would block (the peer's high-water mark is reached) is kept in a
per-peer backlog and retried, never dropped. When a backlog passes ``max_backlog`` frames the
peer is reported through ``on_stuck`` (the server drops such a slow consumer; the client fails
the call with ``overloaded``).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable

import trio
import zmq

from wire._errors import OverloadedError

__all__ = ["SocketPump"]

#: Frames received per wake before the pump yields to let handlers run.
_RECEIVE_BATCH = 512
#: How often a pump with a backlog retries sends that would have blocked (seconds).
_BACKLOG_RETRY = 0.002


class SocketPump:
    """Owns ``socket``; ``router`` says whether messages carry a routing identity.

    Args:
        socket: A DEALER (``router=False``) or ROUTER (``router=True``) socket, not yet used by
            any other task.
        on_receive: ``(peer, frames)`` for each received message; ``peer`` is ``b""`` on a
            DEALER. Runs in the pump task; must not block.
        on_unreachable: ``(peer)`` when the ROUTER cannot route to ``peer`` any more.
        on_stuck: ``(peer)`` when ``peer``'s backlog passed ``max_backlog``.
        max_backlog: Frames kept per peer while its pipe is full.
    """

    def __init__(
        self,
        socket: zmq.Socket[bytes],
        *,
        router: bool,
        on_receive: Callable[[bytes, list[bytes]], None],
        on_unreachable: Callable[[bytes], None] = lambda peer: None,
        on_stuck: Callable[[bytes], None] = lambda peer: None,
        max_backlog: int = 100_000,
    ) -> None:
        self._socket = socket
        self._router = router
        self._on_receive = on_receive
        self._on_unreachable = on_unreachable
        self._on_stuck = on_stuck
        self._max_backlog = max_backlog
        self._outgoing: collections.deque[tuple[bytes, bytes]] = collections.deque()
        self._backlog: dict[bytes, collections.deque[bytes]] = {}
        self._wake_scope: trio.CancelScope | None = None
        self._running = False
        self._closed = False
        #: Whether a socket operation happened since ``EVENTS`` last showed nothing to read.
        self._stale = True
        #: Frames sent and received, for statistics.
        self.sent = 0
        self.received = 0

    def send_nowait(self, peer: bytes, frame: bytes, *, force: bool = False) -> None:
        """Queue ``frame`` for ``peer`` (``b""`` on a DEALER); never blocks.

        Raises:
            OverloadedError: ``peer``'s backlog is full (unless ``force``: cancels must go out).
            trio.ClosedResourceError: the pump has stopped.
        """
        if self._closed:
            raise trio.ClosedResourceError("socket pump is closed")
        if not force:
            backlog = self._backlog.get(peer)
            if backlog is not None and len(backlog) >= self._max_backlog:
                raise OverloadedError(
                    "peer is not reading: send backlog is full",
                    details={"limit": self._max_backlog},
                )
        self._outgoing.append((peer, frame))
        if self._wake_scope is not None:
            self._wake_scope.cancel()

    def backlog_size(self) -> int:
        return sum(len(b) for b in self._backlog.values())

    async def run(self) -> None:
        """Pump until cancelled. Only one task may run this.

        Raises:
            trio.BusyResourceError: another task already runs this pump.
        """
        if self._running:
            raise trio.BusyResourceError("another task is already pumping this socket")
        self._running = True
        socket = self._socket
        fd = socket.FD
        try:
            while True:
                if self._outgoing or self._backlog:
                    self._flush()
                received = self._drain() if self._stale else 0
                if received or self._outgoing:
                    await trio.lowlevel.checkpoint()
                    continue
                timeout = _BACKLOG_RETRY if self._backlog else math.inf
                with trio.CancelScope() as wake:
                    self._wake_scope = wake
                    # Sleeping is safe only when EVENTS was read after the last socket
                    # operation and showed nothing to receive: the FD signals changes only.
                    if not self._stale and not self._outgoing:
                        with trio.move_on_after(timeout):
                            await trio.lowlevel.wait_readable(fd)
                            self._stale = True
                self._wake_scope = None
        finally:
            self._wake_scope = None
            self._closed = True

    def flush_now(self) -> None:
        """Send what is queued without waiting (used during shutdown)."""
        self._flush()

    def _drain(self) -> int:
        """Receive every ready message (up to a batch); clears ``_stale`` when drained."""
        socket = self._socket
        count = 0
        while True:
            if count >= _RECEIVE_BATCH:
                return count  # still stale: more may be waiting
            if not _readable(socket):
                break
            try:
                parts = socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            count += 1
            if self._router:
                self._on_receive(parts[0], parts[1:])
            else:
                self._on_receive(b"", parts)
        self._stale = False
        self.received += count
        return count

    def _flush(self) -> None:
        if self._backlog:
            self._retry_backlog()
        outgoing = self._outgoing
        while outgoing:
            peer, frame = outgoing.popleft()
            backlog = self._backlog.get(peer)
            if backlog is not None:
                self._hold(peer, backlog, frame)
                continue
            if not self._send(peer, frame):
                self._hold(peer, self._backlog.setdefault(peer, collections.deque()), frame)

    def _hold(self, peer: bytes, backlog: collections.deque[bytes], frame: bytes) -> None:
        backlog.append(frame)
        if len(backlog) == self._max_backlog + 1:
            self._on_stuck(peer)

    def _retry_backlog(self) -> None:
        for peer, backlog in list(self._backlog.items()):
            while backlog and self._send(peer, backlog[0]):
                backlog.popleft()
            if not backlog:
                self._backlog.pop(peer, None)

    def _send(self, peer: bytes, frame: bytes) -> bool:
        """Send one frame; ``False`` if it would block."""
        try:
            if self._router:
                self._socket.send_multipart((peer, frame), zmq.NOBLOCK)
            else:
                self._socket.send(frame, zmq.NOBLOCK)
        except zmq.Again:
            self._stale = True
            return False
        except zmq.ZMQError as exc:
            if exc.errno == zmq.EHOSTUNREACH:
                self._on_unreachable(peer)
                return True  # nobody to deliver to: the frame is moot
            raise
        self._stale = True  # a send may consume the FD's signal for an incoming message
        self.sent += 1
        return True

    def forget_peer(self, peer: bytes) -> None:
        """Drop ``peer``'s backlog (it was dropped by the protocol)."""
        self._backlog.pop(peer, None)


def _readable(socket: zmq.Socket[bytes]) -> bool:
    events = socket.get(zmq.EVENTS)
    return isinstance(events, int) and bool(events & zmq.POLLIN)
