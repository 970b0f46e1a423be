"""The trio server: a ROUTER socket, its pump, and one task per call.

:class:`Server` drives :class:`~wire._server_protocol.ServerProtocol`: frames from the pump go
through the protocol, whose events start handler tasks, cancel their scopes and queue frames.
Each call's cancel scope is created, and registered with the protocol, before its task starts:
a cancel that arrives in the same batch as its call must find the scope (the pitfall the design
notes), and trio applies a cancel to a scope that has not been entered yet.

An endpoint with a synchronous fast path (:attr:`~wire._endpoints.Endpoint.run_inline`: the
actor system gives one to plain ``def`` ``@Remote`` methods) is first tried right in the receive
path: when it completes, its terminal frame is queued before the next frame is read, with no
task and no scope (a task start and a cancel scope are most of the server's per-call cost);
when it defers, the call takes the task path above; when it detaches (a relay handing the call
to another server), the call ends later from a callback (``wire/_detached.py``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import trio
import zmq

from wire._call_context import ServerCallContext, classify_failure, result_reply
from wire._codec import encode
from wire._detached import Detach, DetachedCall, Outcome, error_reply
from wire._endpoints import DEFERRED, Endpoint, EndpointSpec, Registry
from wire._errors import (
    ErrorCode,
    OverloadedError,
    UnauthorizedError,
    UnknownEndpointError,
    WireError,
)
from wire._io_threads import PreemptWhileFlooded, new_context
from wire._messages import Error, Result
from wire._metrics import CallMetrics
from wire._pump import SocketPump
from wire._security import AuthenticatedSocket, ServerSecurity, bind_private, close_private
from wire._server_events import (
    CallRecord,
    CancelCall,
    EncodedResult,
    Interrupted,
    PeerDropped,
    PeerGreeted,
    Send,
    ServerEvent,
    StartCall,
)
from wire._server_protocol import ServerLimits, ServerProtocol
from wire._server_socket import open_router
from wire._server_system import MetricsSource, ServerStatistics, observe_call, system_endpoints
from wire._server_timer import ServerTimer
from wire._staging import STAGED, CallStage

__all__ = ["Server", "ServerStatistics"]

log = logging.getLogger("wire.server")

#: Name of every handler task (a string: trio would otherwise format one per task).
_HANDLER_TASK_NAME = "wire.server.call"


class Server:
    """Serves a :class:`~wire._endpoints.Registry` on one or more ZeroMQ endpoints.

    Args:
        registry: The endpoints to serve; ``system/describe`` and ``system/stats`` are added.
        limits: Timers and limits announced in the welcome.
        context: The ZeroMQ context (default: the process-wide instance).
        call_metrics: Counts every call by endpoint and outcome (``serve --metrics``).
        metrics: More metric families of the process for ``system/metrics`` (its actors, ...).
    """

    def __init__(
        self,
        registry: Registry,
        *,
        limits: ServerLimits | None = None,
        context: zmq.Context[Any] | None = None,
        security: ServerSecurity | None = None,
        call_metrics: CallMetrics | None = None,
        metrics: MetricsSource | None = None,
    ) -> None:
        self.registry = registry
        self._call_metrics = call_metrics
        #: Whether calls are timed and counted, or logged: decided once per run, not per call.
        self._observing = call_metrics is not None
        self.limits = limits or ServerLimits()
        self._protocol = ServerProtocol(self.limits)
        # A CURVE server's ZAP handler is bound in its socket's context, one per context: a
        # secured server gets a context of its own unless one is given.
        self._own_context = security is not None and context is None
        self._context = context or (new_context() if self._own_context else zmq.Context.instance())
        #: CURVE, the ZAP allowlist and per-call authorization (wire/_security.py).
        self.security = security
        #: Per peer, its connection's client key (ZAP User-Id); ``_caller``: the message's.
        self._keys: dict[bytes, str | None] = {}
        self._caller: str | None = None
        self._socket: zmq.Socket[bytes] | None = None
        self._pump: SocketPump | None = None
        self._nursery: trio.Nursery | None = None
        self._handler_tasks = 0
        self._timer = ServerTimer(self._protocol, self._apply, self._verified_at)
        #: While a peer that does not read keeps sending, this process's I/O threads preempt.
        self._preemption = PreemptWhileFlooded()
        #: Calls read but not started: keyed ones, and those after them (wire/_staging.py).
        self._stage = CallStage(self._start, self._finish, lambda: self._now())
        self._calls_total = 0
        self._cancelled_total = 0
        self._idle = trio.Event()
        self._idle.set()
        self._stopping = False
        self._stopped = trio.Event()
        #: The run's clock, set by :meth:`run` (trio.current_time() takes two more calls).
        self._now: Callable[[], float] = trio.current_time
        self.addresses: list[str] = []
        served = system_endpoints(registry, self.statistics, call_metrics, metrics)
        for endpoint in served:
            if registry.get(endpoint.spec.name) is None:
                registry.add(endpoint)

    async def run(
        self, endpoints: str | Iterable[str], *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Bind, report the bound addresses through ``task_status``, serve until :meth:`aclose`.

        Resource handling: the socket is closed when this returns or is cancelled. Error
        handling: bad frames and failing handlers never end it; a bind failure raises
        ``zmq.ZMQError`` before ``task_status.started``.
        """
        self._now = trio.lowlevel.current_clock().current_time
        self._observing = self._call_metrics is not None or log.isEnabledFor(logging.DEBUG)
        try:
            socket, zap = open_router(self._context, self.limits, self.security)
        except zmq.ZMQError:
            if self._own_context:
                self._context.term()
            raise
        self._socket = socket
        try:
            for endpoint in [endpoints] if isinstance(endpoints, str) else endpoints:
                bind_private(socket, endpoint)  # ipc socket files owner-only
                self.addresses.append(socket.getsockopt_string(zmq.LAST_ENDPOINT))
            self._pump = SocketPump(
                socket,
                router=True,
                on_receive=self._on_receive,
                on_unreachable=lambda peer: self._apply(self._protocol.peer_unreachable(peer)),
                on_stuck=self._drop_stuck,
                on_flood=self._preemption.flooded,
                max_backlog=self.limits.max_backlog,
                max_backlog_bytes=self.limits.max_backlog_bytes,
                stage=self._stage,
            )
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._pump.run)
                nursery.start_soon(self._timer.run)
                nursery.start_soon(self._preemption.run)
                if zap is not None:
                    nursery.start_soon(zap.run)
                task_status.started(list(self.addresses))
                await self._stopped.wait()
                nursery.cancel_scope.cancel()
        finally:
            self._nursery = None
            close_private(socket, linger=200)  # and remove the ipc socket files it bound
            if zap is not None:
                zap.close()  # already closed if it ran; not if a bind failed first
            if self._own_context:
                self._context.term()

    async def aclose(self, grace: float = 5.0) -> None:
        """Shut down gracefully: cancel calls (reason ``shutdown``), send their terminal
        frames, say bye to every peer, then stop :meth:`run`.

        New calls during the drain are refused with ``unavailable``.
        """
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        self._apply(self._protocol.shutdown())
        if self._protocol.in_flight and self._idle.is_set():
            # Detached calls hold no task, yet are in flight until their holders answer.
            self._idle = trio.Event()
        with trio.move_on_after(grace):
            await self._idle.wait()
        if self._pump is not None:
            for send in self._protocol.goodbyes():
                self._pump.send_nowait(send.peer, send.frame, force=True)
            self._pump.flush_now()
        self._stopped.set()

    def statistics(self) -> ServerStatistics:
        return ServerStatistics(
            peers=self._protocol.peer_count,
            calls=self._protocol.calls_by_state(),
            handler_tasks=self._handler_tasks,
            calls_total=self._calls_total,
            cancelled_total=self._cancelled_total,
            backlog_frames=self._pump.held.frame_count() if self._pump else 0,
            backlog_bytes=self._pump.held.byte_count() if self._pump else 0,
            peers_gone=self._protocol.peers_gone(),
        )

    # -- protocol driving -------------------------------------------------------------------

    def _on_receive(self, peer: bytes, frames: list[bytes]) -> None:
        if len(frames) != 1:
            error = Error.of(
                None, ErrorCode.BAD_REQUEST, f"expected 1 frame per message, got {len(frames)}"
            )
            self._send(peer, encode(error))
            return
        if self.security is not None:
            self._note_caller(peer)
        # A fresh reading per message, not the drain's start: a call's deadline is its arrival
        # plus the budget it carries, and an earlier arrival time would end it before the
        # caller's own deadline.
        received = self._protocol.receive_call(peer, frames[0], self._now())
        if isinstance(received, CallRecord):
            self._offer(received)
        else:
            self._apply(received)

    def _note_caller(self, peer: bytes) -> None:
        """Remember the key of the connection that sent the message being handled. A peer
        identity that shows up with another key (a client that chose its own routing id) is
        a new peer: its predecessor's calls must not answer to it."""
        assert isinstance(self._socket, AuthenticatedSocket)
        key = self._socket.user_id
        if peer in self._keys and self._keys[peer] != key:
            self._apply(self._protocol.drop_peer(peer, "client key changed"))
        self._keys[peer] = key
        self._caller = key

    def _apply(self, events: list[ServerEvent]) -> None:
        for event in events:
            if type(event) is StartCall:
                # Checked before the match, whose class patterns cost a few attribute lookups
                # each (most calls come as records, not events: see _on_receive).
                self._offer(event.record)
                continue
            match event:
                case Send(peer, frame, droppable):
                    self._send(peer, frame, droppable=droppable)
                case CancelCall(record):
                    handle = record.handle
                    if handle is STAGED:
                        self._stage.shed(record)  # superseded (or else cancelled) unrun
                    elif handle is not None:
                        handle.cancel()
                        if self._pump is not None and type(handle) is trio.CancelScope:
                            self._pump.yield_requested = True  # let its task end first
                        if type(handle) is DetachedCall and not handle.ended:
                            # Its cancel was passed on: the timer bounds the wait for the answer.
                            self._timer.expire_later(handle)
                case PeerGreeted(peer, hello):
                    self._timer.wake()  # its first ping is due within a heartbeat
                    fields = {"peer": peer.hex(), "client": hello.name}
                    log.debug("peer %s greeted (%s)", peer.hex(), hello.name, extra=fields)
                case PeerDropped(peer, reason, discard_frames):
                    self._keys.pop(peer, None)
                    fields = {"peer": peer.hex(), "reason": reason}
                    log.info("peer %s dropped: %s", peer.hex(), reason, extra=fields)
                    if self._pump is not None and discard_frames:
                        self._pump.forget_peer(peer)

    def _offer(self, record: CallRecord) -> None:
        """Start an admitted call, unless the stage keeps it for later."""
        # Counted here, once, where it is admitted: a staged call shed before it starts was
        # in flight as well (protocol §5.3 step 4; ``callsTotal`` of §15).
        self._calls_total += 1
        if self._observing:
            record.received_at = self._now()
        if not self._stage.offer(record):
            self._start(record)

    def _drop_stuck(self, peer: bytes) -> None:
        """``peer`` stopped reading and its backlog is full: drop it, and its backlog even
        when the protocol no longer knows it (frames for a stranger are moot)."""
        frames, size = (self._pump.held.held_for(peer) if self._pump else None) or (0, 0)
        fields = {"peer": peer.hex(), "held_frames": frames, "held_bytes": size}
        log.warning(
            "peer %s is not reading: %d frames, %d bytes held", *fields.values(), extra=fields
        )
        events = self._protocol.drop_peer(peer, "not reading")
        if events:
            self._apply(events)  # PeerDropped forgets its backlog
        elif self._pump is not None:
            self._pump.forget_peer(peer)

    def _send(self, peer: bytes, frame: bytes, *, droppable: bool = False) -> None:
        if self._pump is None:
            return
        try:
            self._pump.send_nowait(peer, frame, force=True, droppable=droppable)
        except trio.ClosedResourceError:
            # A handler outlived the shutdown grace period; its peer was told bye already.
            log.info("dropped a frame for %s: the server socket is closed", peer.hex())

    def _refusal(self, spec: EndpointSpec) -> str | None:
        """Why the caller may not call ``spec`` (``None``: it may). Decided by the key of the
        connection that carried this very call (``_start`` runs while that message is
        handled), never by anything the frame says."""
        security = self.security
        if security is None or security.authorize is None:
            return None
        return security.authorize(self._caller, spec)

    def _not_reading(self, peer: bytes) -> WireError | None:
        """Why a call of ``peer`` is refused while its replies are held back (its pipe is
        full): running it would only add a reply to the held ones, and encoding replies nobody
        reads is what let a peer that stops reading take the server's time from the others."""
        held = self._pump.held.held_for(peer) if self._pump is not None else None
        if held is None:
            return None
        return OverloadedError(
            f"not reading: {held[0]} frames ({held[1]} bytes) for this peer are held back",
            details={"heldFrames": held[0], "heldBytes": held[1]},
        )

    def _start(self, record: CallRecord) -> None:
        call = record.call
        endpoint = self.registry.get(call.endpoint)
        failure: WireError | None = None
        args: dict[str, Any] = {}
        if self._stopping:
            failure = WireError("server is shutting down", code=ErrorCode.UNAVAILABLE)
        elif (
            self._pump is not None
            and self._pump.held.by_peer  # nearly always empty: no peer's replies are held
            and (held := self._not_reading(record.peer)) is not None
        ):
            failure = held
        elif endpoint is None:
            failure = UnknownEndpointError(f"unknown endpoint {call.endpoint!r}")
        elif self.security is not None and (refusal := self._refusal(endpoint.spec)) is not None:
            failure = UnauthorizedError(refusal, details={"endpoint": call.endpoint})
        else:
            try:
                args = endpoint.bind(call.args)
            except WireError as exc:
                failure = exc
        if failure is not None or endpoint is None:
            assert failure is not None
            self._finish(record, error_reply(call.id, failure))
            return
        if endpoint.run_inline is not None and self._run_inline(record, endpoint, args):
            return
        reservation = None
        if endpoint.on_arrival is not None:
            reservation = endpoint.on_arrival(args)
        # Created (and registered as the call's handle) before the task starts: a cancel in the
        # same batch as the call finds it, and trio applies it when the task enters the scope.
        scope = record.handle = _scope_for(record)
        context = ServerCallContext(self._protocol, record, reservation)
        invoke = functools.partial(endpoint.handler, context, args)
        self._spawn(record, endpoint.spec, invoke, scope, admit=not endpoint.admits_itself)

    def _spawn(
        self,
        record: CallRecord,
        spec: EndpointSpec,
        invoke: Callable[[], Awaitable[Any]],
        scope: trio.CancelScope,
        *,
        admit: bool,
    ) -> None:
        assert self._nursery is not None
        self._handler_tasks += 1
        if self._idle.is_set():
            self._idle = trio.Event()
        self._nursery.start_soon(
            self._run_call, record, spec, invoke, scope, admit, name=_HANDLER_TASK_NAME
        )
        if self._pump is not None:
            # The handler will likely queue its reply in its first step: the pump waits a pass
            # for it rather than sleeping and being woken.
            self._pump.expecting += 1

    def _run_inline(self, record: CallRecord, endpoint: Endpoint, args: dict[str, Any]) -> bool:
        """Run a synchronous handler to completion right here; ``False`` if it deferred.

        No task and no cancel scope: the call is over before this pump pass reads the next
        frame, so a cancel for it finds it finished (and is ignored, as for any cancel that
        crosses its terminal frame).
        """
        assert endpoint.run_inline is not None
        outcome: Result | EncodedResult | Error
        try:
            value = endpoint.run_inline(ServerCallContext(self._protocol, record, None), args)
            if value is DEFERRED:
                return False  # nothing happened: the task path starts from scratch
            if not endpoint.admits_itself:
                self._protocol.call_started(record)
            if type(value) is Detach:
                self._detach(record, endpoint.spec, value)
                return True
            outcome = result_reply(record.call.id, value)
        except WireError as exc:
            outcome = error_reply(record.call.id, exc)
        except Exception as exc:
            outcome = error_reply(record.call.id, classify_failure(exc, endpoint.spec))
        self._finish(record, outcome)
        return True

    def _detach(self, record: CallRecord, spec: EndpointSpec, request: Detach) -> None:
        """Hand the running call to ``request.begin``; it ends through the :class:`DetachedCall`
        (a cancel reaches it as ``record.handle``)."""
        resume = functools.partial(self._resume, spec)
        call = DetachedCall(record, end=self._end_detached, resume=resume, now=self._now)
        record.handle = call
        if record.deadline is not None:
            self._timer.expire_later(call)
        try:
            request.begin(call)
        except WireError as exc:
            call.fail(exc)
        except Exception as exc:
            call.fail(classify_failure(exc, spec))

    def _end_detached(self, call: DetachedCall, outcome: Outcome) -> None:
        self._timer.forget(call)
        # The record and the call refer to each other: unlinked, both die now, not as cyclic
        # garbage (a relay's collector was a fifth of its CPU and stalled every call).
        record = call.record
        record.handle = None
        self._finish(record, outcome)

    def _resume(
        self, spec: EndpointSpec, call: DetachedCall, handler: Callable[[], Awaitable[Any]]
    ) -> None:
        """Move a detached call onto the task path: later cancels reach its scope."""
        self._timer.forget(call)
        record = call.record
        scope = record.handle = _scope_for(record)
        if self._nursery is None:
            self._finish(record, Interrupted.CANCELLED)
            return
        self._spawn(record, spec, handler, scope, admit=False)

    async def _run_call(
        self,
        record: CallRecord,
        spec: EndpointSpec,
        invoke: Callable[[], Awaitable[Any]],
        scope: trio.CancelScope,
        admit: bool,
    ) -> None:
        if self._pump is not None:
            self._pump.expecting -= 1
        outcome: Outcome = Interrupted.CANCELLED
        try:
            with scope:
                if admit:
                    self._protocol.call_started(record)
                value = await invoke()
                outcome = result_reply(record.call.id, value)
            if scope.cancelled_caught and (
                record.deadline is not None and trio.current_time() >= record.deadline
            ):
                outcome = Interrupted.DEADLINE
        except WireError as exc:
            outcome = error_reply(record.call.id, exc)
        except Exception as exc:
            outcome = error_reply(record.call.id, classify_failure(exc, spec))
        finally:
            self._handler_tasks -= 1
        self._finish(record, outcome)

    def _finish(self, record: CallRecord, outcome: Outcome) -> None:
        if isinstance(outcome, Interrupted) or (
            isinstance(outcome, Error) and outcome.code == ErrorCode.CANCELLED
        ):
            self._cancelled_total += 1
        if self._observing:
            observe_call(self._call_metrics, record, outcome, self._now())
        frame = self._protocol.finish_call(record, outcome)
        if frame is not None:
            self._send(record.peer, frame)
        if self._protocol.in_flight == 0 and self._handler_tasks == 0:
            self._idle.set()

    def _verified_at(self, now: float) -> float:
        return self._pump.verified_empty_at(now) if self._pump is not None else now


def _scope_for(record: CallRecord) -> trio.CancelScope:
    """The cancel scope a call's handler task runs in: it ends at the call's deadline."""
    if record.deadline is None:
        return trio.CancelScope()
    return trio.CancelScope(deadline=record.deadline)
