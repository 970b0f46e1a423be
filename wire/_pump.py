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
holds the socket's FD and an eventfd, which :meth:`SocketPump.send_nowait` writes (a wake cycle
costs about 13 µs more than a plain reschedule; 55 µs with the portable fallback, a cancel scope
around ``wait_readable``). When the owner has just started or woken tasks that are about to
queue frames (:attr:`SocketPump.expecting`), the pump yields to them for a pass instead.

Flow control: a send that would block (the peer's high-water mark is reached) is kept in a
per-peer backlog and retried, never dropped (``wire/_backlog.py``). When a backlog passes
``max_backlog`` frames or ``max_backlog_bytes`` bytes the peer is reported through
``on_stuck`` (the server drops such a slow consumer; the client fails the call with
``overloaded``). Once a large backlog is gone, the pump hands the freed heap back to the
system (:func:`~wire._memory.release_memory`); until then freed heap is kept for reuse.

Sharing the server's time: each drain may take a budget of frames and start that many tasks;
when a drain's work (inline, and in the tasks it started) outlasts ``PASS_BUDGET``, a server's
pump halves the budget, so another peer's call read next waits behind a few handlers, not
behind a batch of a greedy peer's expensive calls. A drain that cancelled a running handler
starts nothing more (the calls it reads wait in the owner's stage) and the next pass only
yields, so the handler ends first; but it reads on, or a storm of cancels waits unread for ms.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio
import zmq

from wire._backlog import HeldFrames
from wire._limits import DEFAULT_MAX_BACKLOG, DEFAULT_MAX_BACKLOG_BYTES
from wire._memory import keep_heap_for_reuse, release_memory
from wire._pump_tuning import (
    BACKLOG_RETRY,
    HELD_BUDGET,
    INTAKE_LIMIT,
    MAX_IDLE_YIELDS,
    MIN_BUDGET,
    PASS_BUDGET,
    PROBED_RECEIVES,
    RECEIVE_BATCH,
)
from wire._waker import Waker

if TYPE_CHECKING:
    from wire._staging import CallStage

__all__ = ["SocketPump"]

# Plain ints: ``int & IntFlag`` (pyzmq's constants) runs Python-level enum code per probe.
_NOBLOCK = int(zmq.NOBLOCK)
_MORE = int(zmq.SNDMORE | zmq.NOBLOCK)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
# The sugar layer's ``Socket.send`` is a Python wrapper (type checks, routing-id options) that
# costs more than the send itself; the backend method takes the same bytes and flags. The same
# holds for ``get``, which the drain calls for ``EVENTS`` before it receives.
_BASE_SEND: Callable[..., Any] = getattr(zmq.Socket.__mro__[1], "send", zmq.Socket.send)
_BASE_GET: Callable[..., Any] = getattr(zmq.Socket.__mro__[1], "get", zmq.Socket.get)


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
        on_stuck: ``(peer)`` when ``peer``'s backlog passed ``max_backlog`` or
            ``max_backlog_bytes``.
        on_flood: ``()`` once per drain that read a message from a peer whose frames are held
            (it keeps sending and does not read).
        max_backlog: Frames kept per peer while its pipe is full.
        max_backlog_bytes: Bytes kept per peer while its pipe is full.
        stage: Where the owner holds back calls it read: they do not use a drain's budget
            (a drain reads on, up to ``INTAKE_LIMIT`` messages), and each pass starts a
            budget of them.
    """

    def __init__(
        self,
        socket: zmq.Socket[bytes],
        *,
        router: bool,
        on_receive: Callable[[bytes, list[bytes]], None],
        on_unreachable: Callable[[bytes], None] = lambda peer: None,
        on_stuck: Callable[[bytes], None] = lambda peer: None,
        on_flood: Callable[[], None] = lambda: None,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
        max_backlog_bytes: int = DEFAULT_MAX_BACKLOG_BYTES,
        stage: CallStage | None = None,
    ) -> None:
        self._socket = socket
        self._stage = stage
        self._router = router
        self._on_receive = on_receive
        self._on_unreachable = on_unreachable
        self._outgoing: collections.deque[tuple[bytes, bytes]] = collections.deque()
        self.held = HeldFrames(
            max_frames=max_backlog, max_bytes=max_backlog_bytes, on_stuck=on_stuck
        )
        self._on_flood = on_flood
        #: Whether the last drain read a message from a peer whose frames are held.
        self._flooded = False
        #: Peer → held frames (the dict itself: the hot path tests and reads it directly).
        self._backlog = self.held.by_peer
        #: How a sleeping pump is woken: the waker (Linux), else the scope around its wait.
        self._waker: Waker | None = None
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
        #: Set by the owner when a handler it just cancelled should run before more is read.
        self.yield_requested = False
        #: Frames a drain may take and tasks it may start (see ``PASS_BUDGET``; a server's
        #: peers share its time, a client's one peer has nobody to share it with), when the
        #: last drain that used it all started, and whether the pump slept since.
        self._budget = RECEIVE_BATCH
        self._limited_at = -math.inf
        self._slept = False
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
            refusal = self.held.refusal(peer)
            if refusal is not None:
                raise refusal
        self._outgoing.append((peer, _DroppableFrame(frame) if droppable else frame))
        if self._sleeping:  # nearly every frame is queued while the pump is awake
            self._wake()

    def _wake(self) -> None:
        if self._sleeping:
            self._sleeping = False
            if self._waker is not None:
                self._waker.wake()
            elif self._wake_scope is not None:
                self._wake_scope.cancel()

    async def run(self) -> None:
        """Pump until cancelled. Only one task may run this.

        Raises:
            trio.BusyResourceError: another task already runs this pump.
        """
        if self._running:
            raise trio.BusyResourceError("another task is already pumping this socket")
        self._running = True
        keep_heap_for_reuse()  # once per process: large messages must not fault in pages
        self._clock = trio.lowlevel.current_clock().current_time
        fd = self._socket.FD
        self._waker = Waker.create(fd)
        idle_yields = 0
        deferred = 0  # passes in a row that left the socket unread
        stage = self._stage
        try:
            while True:
                if self.yield_requested:  # the handler cancelled may run after us in a batch
                    self.yield_requested = False
                    await trio.lowlevel.checkpoint()
                    continue
                if self.held.trim_due:
                    # Here, between passes: no flush in progress still holds freed frames.
                    self.held.trim_due = False
                    release_memory()
                if self._outgoing or self._backlog:
                    self._flush()
                if self._stale:
                    if (
                        self.expecting < self._budget
                        or not self._router
                        or deferred >= MAX_IDLE_YIELDS
                    ):
                        deferred = 0
                        limited = self._drain()
                        if self._outgoing:
                            # Replies produced while draining (inline handlers, protocol
                            # answers): send them now, not after a scheduler pass, then look
                            # at the socket again (a send may have consumed the FD's signal),
                            # unless the drain used a budget that slow work had cut or left
                            # tasks to run first (the flush left the socket stale anyway).
                            self._flush()
                            if (
                                not limited or self._full_budget_inline()
                            ) and not self.yield_requested:
                                self._drain()
                    else:
                        # A batch of tasks we started has not run yet: read more only once it
                        # has, so a call that arrives now waits behind one batch of handlers,
                        # not behind every call a greedy peer managed to send (a few passes at
                        # most: a miscounted ``expecting`` must not stop the reading).
                        deferred += 1
                elif stage is not None and stage.waiting():
                    # Nothing new to read: start what waits, once the tasks started last have
                    # run (or a few passes on, as for reading).
                    if self.expecting < self._budget or deferred >= MAX_IDLE_YIELDS:
                        deferred = 0
                        stage.release(self._budget)
                    else:
                        deferred += 1
                if (
                    self._outgoing
                    or self._stale
                    or self.held.trim_due
                    or (stage is not None and stage.waiting())
                ):
                    # Frames queued while draining, a drain that stopped before EVENTS showed
                    # it empty, or a trim due: go round again after letting other tasks run.
                    idle_yields = 0
                    await trio.lowlevel.checkpoint()
                    continue
                if self.expecting > 0 and idle_yields < MAX_IDLE_YIELDS:
                    # Tasks we just started or woke will likely queue frames in the next batch:
                    # a pass is cheaper than sleeping and being woken by them.
                    idle_yields += 1
                    await trio.lowlevel.checkpoint()
                    continue
                # Nothing to send and EVENTS (read after the last socket operation) showed
                # nothing to receive: sleep. Waiting is itself a schedule point, so a handler
                # woken by what we just received (a cancelled one, say) runs without us.
                idle_yields = 0
                self.yield_requested = False  # sleeping lets a cancelled handler run as well
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
        self._slept = True  # the time until the next drain says nothing about handlers
        waker = self._waker
        if waker is None:
            with trio.CancelScope() as scope:
                if self._backlog:
                    scope.deadline = trio.current_time() + BACKLOG_RETRY
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
                with trio.move_on_after(BACKLOG_RETRY):
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

    def _drain(self) -> bool:
        """Receive every ready message, up to the budget; whether it stopped on the budget.

        Clears ``_stale`` when ``EVENTS`` showed nothing more to read; a drain that ended on
        ``zmq.Again`` or on the budget leaves it set, so the next pass checks again.
        """
        socket = self._socket
        recv = socket.recv
        router = self._router
        on_receive = self._on_receive
        stage = self._stage
        if stage is not None:
            stage.held_in_drain = 0
            stage.hold = False
            # Before _fit_budget resets it: the last drain stopped on its budget.
            stage.behind = self._limited_at != -math.inf and not self._slept
        count = 0
        now = self.received_at = self._clock()
        if router:
            self._fit_budget(now)
        budget = limit = self._budget
        held = self._backlog if router else None
        flooded = False
        started_limit = self.expecting + budget if router else math.inf
        limited = False
        try:
            while count < limit:
                if count < PROBED_RECEIVES:
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
                if held and not flooded and peer in held:
                    flooded = True  # keep this pass short: see HELD_BUDGET
                    budget = min(budget, HELD_BUDGET)
                    limit = min(limit, max(count, budget))
                on_receive(peer, frames)
                if self.yield_requested:
                    if stage is None:
                        break  # a cancelled handler ends first: cancel-to-quiescence
                    stage.hold = True  # read on, start nothing more (see the docstring)
                elif stage is not None and stage.held_in_drain:
                    limit = min(budget + stage.held_in_drain, INTAKE_LIMIT)
                if self.expecting >= started_limit:
                    break
            limited = count >= limit or self.expecting >= started_limit
        except zmq.Again:
            self.drained_at = now
        self.received += count
        if stage is not None and stage.waiting() and not stage.hold:
            ran = count - stage.held_in_drain
            if stage.release(max(0, budget - ran)) + ran >= budget:
                limited = True
        if limited:
            self._limited_at = now
        self._flooded = flooded
        if flooded:
            self._on_flood()
        return limited

    def _full_budget_inline(self) -> bool:
        """Whether the last drain ran its calls inline on an uncut budget, none from a flooding
        peer (or this is a client's pump): then a second drain in the same pass is cheap and
        keeps throughput."""
        if not self._router:
            return True
        return self.expecting == 0 and self._budget == RECEIVE_BATCH and not self._flooded

    def _fit_budget(self, now: float) -> None:
        """Fit the drain budget to how long the last drain that used it all took, with the
        tasks it started, up to ``now`` (see ``PASS_BUDGET``)."""
        budget = self._budget
        if self._slept or self._limited_at == -math.inf:
            # The last drain read all there was, or the pump waited for work since: grow back,
            # not at once (a greedy peer's next calls may be on their way).
            spent = 0.0
        else:
            spent = now - self._limited_at
        self._slept = False
        self._limited_at = -math.inf
        if spent > PASS_BUDGET and budget > MIN_BUDGET:
            self._budget = budget // 2
        elif spent < PASS_BUDGET / 2 and budget < RECEIVE_BATCH:
            self._budget = budget * 2

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
            self.held.retry(self._send)
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
                if peer in backlogs:
                    if type(frame) is not _DroppableFrame:
                        self.held.hold(peer, frame)
                    continue
            try:
                if router:
                    # With ROUTER_MANDATORY the first part fails if the peer is unroutable or
                    # its pipe is full; once it is accepted the rest of the message is too.
                    send(socket, peer, _MORE)
                send(socket, frame, _NOBLOCK)
            except zmq.Again:
                if type(frame) is not _DroppableFrame:
                    self.held.hold(peer, frame)
                continue
            except zmq.ZMQError as exc:
                if exc.errno == zmq.EHOSTUNREACH:
                    self._on_unreachable(peer)
                    continue  # nobody to deliver to: the frame is moot
                raise
            sent += 1
        self.sent += sent

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
                self.held.forget(peer)  # every frame held for it is as moot as this one
                self._on_unreachable(peer)
                return True  # nobody to deliver to: the frame is moot
            raise
        self.sent += 1
        return True

    def forget_peer(self, peer: bytes) -> None:
        """Drop ``peer``'s backlog and the frames queued for it (it was dropped by the
        protocol): left queued, they would refill a backlog that nothing drains any more."""
        self.held.forget(peer)
        outgoing = self._outgoing
        if any(queued == peer for queued, _ in outgoing):
            kept = [item for item in outgoing if item[0] != peer]
            outgoing.clear()  # in place: a flush in progress keeps popping this deque
            outgoing.extend(kept)
        if self.held.trim_due:
            self._wake()
