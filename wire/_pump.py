"""The one task that owns a ZeroMQ socket.

pyzmq has no trio integration and a zmq socket is not safe to share between tasks, so exactly
one task, :meth:`SocketPump.run`, touches the socket. It drains every ready message per wake,
re-checks ``EVENTS`` after socket operations before it sleeps (the socket's FD is
edge-triggered: it only signals a *change*), and sleeps on the FD or until another task queues
an outgoing frame.

The pump moves frames and makes no protocol decisions. Received messages go to a synchronous
callback, which runs in the pump task itself, so a received call costs no extra scheduler hop.
Outgoing frames are queued with :meth:`SocketPump.send_nowait` from any task and sent together
on the pump's next pass, in a tight loop.

Waking the pump when a frame is queued: on Linux the pump sleeps on a private epoll set that
holds the socket's FD and an eventfd, and :meth:`SocketPump.send_nowait` writes the eventfd.
That costs one ``write`` and is picked up by trio's I/O poll on its next pass. The portable
alternative, cancelling a cancel scope around ``wait_readable``, costs a scope per sleep and an
exception unwinding through the wait (measured on a 2-CPU VM: a wake cycle costs about 55 µs
more than a plain reschedule that way, about 13 µs more through the eventfd); it is the
fallback where epoll or eventfd is missing. And when the owner has just started or woken tasks
that are about to queue frames (it says so through :attr:`SocketPump.expecting`), the pump
yields to them for a pass instead of going to sleep at all.

Flow control: a send that would block (the peer's high-water mark is reached) is kept in a
per-peer backlog and retried, never dropped. When a backlog passes ``max_backlog`` frames the
peer is reported through ``on_stuck`` (the server drops such a slow consumer; the client fails
the call with ``overloaded``).
"""

from __future__ import annotations

import collections
import math
import os
import select
from collections.abc import Callable
from typing import Any

import trio
import zmq

from wire._errors import OverloadedError

__all__ = ["SocketPump"]

#: Frames received per drain before the pump sends what they produced and yields to let
#: handlers run. Small enough that a peer keeping many calls in flight gets replies while the
#: rest are still being read, so both processes work at once: with a whole window per drain
#: (512 before), client and server took turns, and 128 echo calls in flight ran at half the
#: rate (measured on a 2-CPU VM: about 16,000 against 31,000 calls/s with 32 or 64).
_RECEIVE_BATCH = 32
#: How often a pump with a backlog retries sends that would have blocked (seconds).
_BACKLOG_RETRY = 0.002
#: Messages per drain that are preceded by an ``EVENTS`` check. ``EVENTS`` costs a few µs and
#: a receive that finds nothing (``zmq.Again``) about twice that, so a drain asks ``EVENTS``
#: for the first messages (a lone call stays cheap) and then receives until ``zmq.Again``.
_PROBED_RECEIVES = 2
#: Passes in a row the pump yields for :attr:`SocketPump.expecting` before it sleeps anyway: a
#: miscounted ``expecting`` costs a few passes, never a busy loop.
_MAX_IDLE_YIELDS = 3

# Plain ints: pyzmq's constants are enum flags, and ``int & IntFlag`` runs Python-level enum
# code on every probe.
_NOBLOCK = int(zmq.NOBLOCK)
_MORE = int(zmq.SNDMORE | zmq.NOBLOCK)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
# The sugar layer's ``Socket.send`` is a Python wrapper (type checks, routing-id options) that
# costs more than the send itself; the backend method takes the same bytes and flags. The same
# holds for ``get``, which the drain calls for ``EVENTS`` before it receives.
_BASE_SEND: Callable[..., Any] = getattr(zmq.Socket.__mro__[1], "send", zmq.Socket.send)
_BASE_GET: Callable[..., Any] = getattr(zmq.Socket.__mro__[1], "get", zmq.Socket.get)


class _Waker:
    """An epoll set holding the socket's FD and an eventfd: waiting on the set wakes for socket
    activity or for :meth:`wake`, without a cancel scope."""

    def __init__(self, socket_fd: int) -> None:
        self.eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.epoll = select.epoll()
        try:
            self.epoll.register(socket_fd, select.EPOLLIN)
            self.epoll.register(self.eventfd, select.EPOLLIN)
        except BaseException:
            self.close()
            raise
        self.fd = self.epoll.fileno()
        #: Whether the eventfd holds a wake that was not consumed yet.
        self.pending = False

    @classmethod
    def create(cls, socket_fd: int) -> _Waker | None:
        """A waker, or ``None`` where epoll or eventfd is missing (not Linux)."""
        if not (hasattr(select, "epoll") and hasattr(os, "eventfd")):
            return None
        return cls(socket_fd)

    def wake(self) -> None:
        if not self.pending:
            self.pending = True
            os.eventfd_write(self.eventfd, 1)

    def consume(self) -> None:
        if self.pending:
            self.pending = False
            try:
                os.eventfd_read(self.eventfd)
            except BlockingIOError:
                pass

    def close(self) -> None:
        self.epoll.close()
        os.close(self.eventfd)


class _DroppableFrame(bytes):
    """A frame that is dropped, not held, when its peer's pipe is full (a subclass, so the
    common path tells it apart only where a send would block)."""


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
        #: How a sleeping pump is woken: the waker (Linux), else the scope around its wait.
        self._waker: _Waker | None = None
        self._wake_scope: trio.CancelScope | None = None
        self._sleeping = False
        self._running = False
        self._closed = False
        #: trio time at which a drain last found nothing more to read (read when that drain
        #: started: the clock is read once per drain, and an earlier time is the safe side
        #: for liveness checks).
        self.drained_at = -math.inf
        #: trio time at which the current (or last) drain started: the arrival time of every
        #: message it hands to ``on_receive`` (one clock read per drain, not per message).
        self.received_at = -math.inf
        #: Whether a socket operation happened since ``EVENTS`` last showed nothing to read.
        self._stale = True
        self._clock: Callable[[], float] = trio.current_time
        #: Tasks the owner started or woke that have not run yet and may queue frames when they
        #: do. The owner increments it before the task is scheduled and decrements it when the
        #: task runs; while it is positive the pump yields instead of sleeping on the FD.
        self.expecting = 0
        #: Frames sent and received, for statistics.
        self.sent = 0
        self.received = 0

    def send_nowait(
        self, peer: bytes, frame: bytes, *, force: bool = False, droppable: bool = False
    ) -> None:
        """Queue ``frame`` for ``peer`` (``b""`` on a DEALER); never blocks. A ``droppable``
        frame is dropped instead of held when the peer's pipe is full or already backlogged.

        Raises:
            OverloadedError: ``peer``'s backlog is full (unless ``force``: cancels must go out).
            trio.ClosedResourceError: the pump has stopped.
        """
        if self._closed:
            raise trio.ClosedResourceError("socket pump is closed")
        if not force and self._backlog:
            backlog = self._backlog.get(peer)
            if backlog is not None and len(backlog) >= self._max_backlog:
                raise OverloadedError(
                    "peer is not reading: send backlog is full",
                    details={"limit": self._max_backlog},
                )
        self._outgoing.append((peer, _DroppableFrame(frame) if droppable else frame))
        if self._sleeping:
            self._sleeping = False
            if self._waker is not None:
                self._waker.wake()
            elif self._wake_scope is not None:
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
        self._clock = trio.lowlevel.current_clock().current_time
        fd = self._socket.FD
        self._waker = _Waker.create(fd)
        idle_yields = 0
        try:
            while True:
                if self._outgoing or self._backlog:
                    self._flush()
                if self._stale:
                    self._drain()
                    if self._outgoing:
                        # Replies produced while draining (inline handlers, protocol
                        # answers): send them now, not after a scheduler pass, then look at
                        # the socket again (a send may have consumed the FD's signal).
                        self._flush()
                        self._drain()
                if self._outgoing or self._stale:
                    # Frames queued while draining, or a drain that stopped before EVENTS
                    # showed it empty: go round again after letting other tasks run.
                    idle_yields = 0
                    await trio.lowlevel.checkpoint()
                    continue
                if self.expecting > 0 and idle_yields < _MAX_IDLE_YIELDS:
                    # Tasks we just started or woke will likely queue frames in the next batch:
                    # a pass is cheaper than sleeping and being woken by them.
                    idle_yields += 1
                    await trio.lowlevel.checkpoint()
                    continue
                # Nothing to send and EVENTS (read after the last socket operation) showed
                # nothing to receive: sleep. Waiting is itself a schedule point, so a handler
                # woken by what we just received (a cancelled one, say) runs without us.
                idle_yields = 0
                await self._sleep(fd)
        finally:
            self._closed = True
            self._sleeping = False
            self._wake_scope = None
            if self._waker is not None:
                trio.lowlevel.notify_closing(self._waker.fd)
                self._waker.close()
                self._waker = None

    async def _sleep(self, fd: int) -> None:
        """Wait for socket activity, a queued frame, or the backlog's retry time.

        Called only when EVENTS was read after the last socket operation and showed nothing to
        receive (``_stale`` is false): the FD signals changes only.
        """
        waker = self._waker
        if waker is None:
            with trio.CancelScope() as scope:
                if self._backlog:
                    scope.deadline = trio.current_time() + _BACKLOG_RETRY
                self._wake_scope = scope
                self._sleeping = True
                try:
                    await trio.lowlevel.wait_readable(fd)
                finally:
                    self._sleeping = False
                    self._wake_scope = None
            self._stale = True
            return
        self._sleeping = True
        try:
            if self._backlog:
                with trio.move_on_after(_BACKLOG_RETRY):
                    await trio.lowlevel.wait_readable(waker.fd)
            else:
                await trio.lowlevel.wait_readable(waker.fd)
        finally:
            self._sleeping = False
            waker.consume()
        # Woken by the socket or by a queued frame (whose send makes the socket stale anyway).
        self._stale = True

    def flush_now(self) -> None:
        """Send what is queued without waiting (used during shutdown)."""
        self._flush()

    def _drain(self) -> int:
        """Receive every ready message (up to a batch).

        Clears ``_stale`` when ``EVENTS`` showed nothing more to read; a drain that ended on
        ``zmq.Again`` or on the batch limit leaves it set, so the next pass checks again.
        """
        socket = self._socket
        recv = socket.recv
        router = self._router
        on_receive = self._on_receive
        count = 0
        now = self.received_at = self._clock()
        try:
            while count < _RECEIVE_BATCH:
                if count < _PROBED_RECEIVES:
                    if not _BASE_GET(socket, _EVENTS) & _POLLIN:
                        self._stale = False
                        self.drained_at = now
                        break
                peer = recv(_NOBLOCK) if router else b""
                # A Frame (copy=False) tells whether more parts follow without a getsockopt.
                part = recv(_NOBLOCK, False)
                frames = [part.bytes]
                while part.more:
                    part = recv(_NOBLOCK, False)
                    frames.append(part.bytes)
                count += 1
                on_receive(peer, frames)
        except zmq.Again:
            self.drained_at = now
        self.received += count
        return count

    def verified_empty_at(self, now: float) -> float:
        """When the socket was last known to hold nothing unread: ``now`` while the pump
        sleeps on it (it would have woken), else the end of its last drain.

        Liveness checks measure a peer's silence up to this time, not up to ``now``: when this
        process is too busy to run its pump, frames may be waiting unread, and that is no
        evidence that the peer went quiet.
        """
        return now if self._sleeping else self.drained_at

    def _flush(self) -> None:
        if self._backlog:
            self._retry_backlog()
        outgoing = self._outgoing
        if not outgoing:
            return
        # A send may consume the FD's signal for an incoming message.
        self._stale = True
        socket = self._socket
        send = _BASE_SEND
        backlogs = self._backlog
        router = self._router
        sent = 0
        while outgoing:
            peer, frame = outgoing.popleft()
            if backlogs:
                backlog = backlogs.get(peer)
                if backlog is not None:
                    self._hold(peer, backlog, frame)
                    continue
            try:
                if router:
                    # With ROUTER_MANDATORY the first part fails if the peer is unroutable or
                    # its pipe is full; once it is accepted the rest of the message is too.
                    send(socket, peer, _MORE)
                send(socket, frame, _NOBLOCK)
            except zmq.Again:
                if type(frame) is not _DroppableFrame:
                    self._hold(peer, backlogs.setdefault(peer, collections.deque()), frame)
                continue
            except zmq.ZMQError as exc:
                if exc.errno == zmq.EHOSTUNREACH:
                    self._on_unreachable(peer)
                    continue  # nobody to deliver to: the frame is moot
                raise
            sent += 1
        self.sent += sent

    def _hold(self, peer: bytes, backlog: collections.deque[bytes], frame: bytes) -> None:
        if type(frame) is _DroppableFrame:
            return
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
        self._stale = True
        try:
            if self._router:
                _BASE_SEND(self._socket, peer, _MORE)
            _BASE_SEND(self._socket, frame, _NOBLOCK)
        except zmq.Again:
            return False
        except zmq.ZMQError as exc:
            if exc.errno == zmq.EHOSTUNREACH:
                self._on_unreachable(peer)
                return True  # nobody to deliver to: the frame is moot
            raise
        self.sent += 1
        return True

    def forget_peer(self, peer: bytes) -> None:
        """Drop ``peer``'s backlog and the frames queued for it (it was dropped by the
        protocol): left queued, they would refill a backlog that nothing drains any more."""
        self._backlog.pop(peer, None)
        outgoing = self._outgoing
        if any(queued == peer for queued, _ in outgoing):
            kept = [item for item in outgoing if item[0] != peer]
            outgoing.clear()  # in place: a flush in progress keeps popping this deque
            outgoing.extend(kept)
