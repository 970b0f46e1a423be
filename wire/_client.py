"""The trio client: a DEALER socket, its pump, and calls that can be cancelled across the wire.

A caller waits parked on its own task (``wait_task_rescheduled``), so a result costs one
reschedule and no channel. If the caller's scope is cancelled while it waits, the abort
callback forgets the call and queues a ``cancel`` frame in the same step, so a late result finds
no caller to hand itself to and is dropped. If the result and the cancel cross (the result was
already handed over but the caller has not run yet), the caller re-checks its scope before
returning and raises ``Cancelled``: a cancelled caller never sees a result.

A relay that must not spend a task per call uses :meth:`Client.start_call` instead: the call's
end goes to a callback, from the receive path. It passes its caller's cancel on with
:meth:`Client.request_cancel`, which keeps the call tracked, so the callback still hears how it
really ended (a result, if the call finished first).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import outcome
import trio
import zmq

from wire._client_protocol import ClientProtocol, ClientState, Lost, Ready, Resolved, SendFrame
from wire._endpoints import EndpointSpec
from wire._errors import (
    CancelReason,
    DeadlineExceededError,
    PeerLostError,
    ResultInvalidError,
    UnavailableError,
    WireError,
)
from wire._messages import Welcome
from wire._proxy import AgentProxy, ServiceProxy, specs_from_describe, specs_of
from wire._pump import SocketPump
from wire._security import ClientSecurity
from wire._shapes import ShapeError, converter_for

__all__ = ["Client", "ClientStatistics", "open_client"]

_TICK = 0.1


@attrs.frozen(kw_only=True)
class ClientStatistics:
    #: Calls sent and not yet ended.
    pending_calls: int
    #: ``greeting``, ``ready``, ``lost`` or ``closed``.
    state: str
    #: Frames held back because the server was not reading.
    backlog_frames: int
    #: Calls started on this connection, ended or not (a pool tells an idle one by it).
    calls_started: int = 0


#: ``on_done(value, error)``: how a call started with :meth:`Client.start_call` ends.
OnDone = Callable[[Any, WireError | None], object]


class _Callback:
    """The handle of a call started with :meth:`Client.start_call` (a task's handle is the
    task itself)."""

    __slots__ = ("on_done",)

    def __init__(self, on_done: OnDone) -> None:
        self.on_done = on_done


#: How far ahead of the caller's own deadline a server's ``deadline-exceeded`` may arrive and
#: still be left to the caller's scope (the server counts the budget from the call's arrival,
#: so its deadline is never earlier; this covers clock reads a few ms apart).
_DEADLINE_LEEWAY = 0.05


class Client:
    """A connection to one server. Create with :func:`open_client`."""

    def __init__(self, socket: zmq.Socket[bytes], *, name: str) -> None:
        #: The run's clock (trio.current_time() looks it up through two more calls).
        self._now = trio.lowlevel.current_clock().current_time
        self._protocol = ClientProtocol(name=name, now=self._now())
        self._pump = SocketPump(socket, router=False, on_receive=self._on_receive)
        self._ready = trio.Event()
        self._specs: dict[str, EndpointSpec] = {}
        self._described: dict[str, Any] | None = None
        #: Set when the one system/describe call in flight ends (``None``: none in flight).
        self._describing: trio.Event | None = None
        self.welcome: Welcome | None = None

    # -- calls ------------------------------------------------------------------------------

    async def call(
        self,
        endpoint: str,
        args: Mapping[str, Any] | None = None,
        *,
        supersede: str | None = None,
        result: Any = Any,
    ) -> Any:
        """Call ``endpoint`` with wire-named ``args`` and return its result.

        The caller's effective deadline (``trio.fail_after``/``move_on_after``) travels with the
        call as its remaining budget. ``supersede`` names a latest-wins key: a newer call with
        the same key from this client cancels this one on the server (this call then raises
        :class:`~wire.CallCancelledError` with reason ``superseded``). ``result`` is the
        annotation the result must match.

        If cancelled, raises ``trio.Cancelled``; the server is told to cancel (reason
        ``caller``, or ``deadline`` when the deadline passed) and any late result is dropped.

        Raises:
            WireError: the typed error the server answered with, or ``peer-lost`` when the
                server stopped answering, ``overloaded`` when it is not reading,
                ``result-invalid`` when the result does not match ``result``.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        deadline = trio.current_effective_deadline()
        # Clamped: the deadline may pass between the check above and this reading (§6).
        deadline_ms = max(0.0, deadline - self._now()) * 1000 if deadline != math.inf else None
        task = trio.lowlevel.current_task()
        call_id, frame = self._protocol.start_call(
            task,
            endpoint,
            args if type(args) is dict else dict(args or {}),
            deadline_ms=deadline_ms,
            supersede=supersede,
        )
        self._send_call(call_id, frame)

        aborted = False

        def abort(raise_cancel: Any) -> trio.lowlevel.Abort:
            nonlocal aborted
            aborted = True
            reason = (
                CancelReason.DEADLINE if trio.current_time() >= deadline else CancelReason.CALLER
            )
            self.cancel_call(call_id, reason)
            return trio.lowlevel.Abort.SUCCEEDED

        error: WireError | None = None
        try:
            value = await trio.lowlevel.wait_task_rescheduled(abort)
        except WireError as exc:
            error = exc
        finally:
            if not aborted:
                self._pump.expecting -= 1  # woken by _apply, which counted us
        if error is not None:
            if isinstance(error, DeadlineExceededError) and (
                deadline - self._now() <= _DEADLINE_LEEWAY
            ):
                # The server enforced the budget our own deadline set, and its frame beat our
                # deadline's processing (read in the same drain, say). The deadline is the
                # caller's: let its scope end the call, as it would a local one.
                await trio.sleep_until(deadline)
            else:
                # An error handed over in the batch where the caller's scope was cancelled: the
                # caller sees its cancellation, as for a result.
                await trio.lowlevel.checkpoint_if_cancelled()
            raise error
        # The result may have been handed over in the same batch the caller's scope was
        # cancelled: never give it to a cancelled caller.
        await trio.lowlevel.checkpoint_if_cancelled()
        if result is Any:
            return value
        try:
            return converter_for(result)(value, "result")
        except ShapeError as exc:
            raise ResultInvalidError(f"{endpoint}: {exc}", details={"path": exc.path}) from None

    def start_call(
        self,
        endpoint: str,
        args: dict[str, Any],
        *,
        deadline_ms: float | None = None,
        encoded_result: bool = False,
        on_done: OnDone,
    ) -> int:
        """Send a call without waiting for it; return its id (for :meth:`cancel_call`).

        Its end is reported once, as ``on_done(value, None)`` or ``on_done(None, error)``, from
        the client's receive path (a lost or closed connection ends it with ``peer-lost`` or
        ``unavailable``), unless :meth:`cancel_call` gave it up first. ``on_done`` must not
        block or raise. ``deadline_ms`` is the budget the server enforces. With
        ``encoded_result`` the value is the msgpack bytes of the server's result, not decoded
        (a relay passes them on as they are). No task waits and no result shape is checked:
        this is for relays.

        Raises:
            WireError: the call could not be sent (``peer-lost``, ``unavailable``,
                ``too-large``, ``arguments-invalid``, ``overloaded``); ``on_done`` is not called.
        """
        call_id, frame = self._protocol.start_call(
            _Callback(on_done),
            endpoint,
            args,
            deadline_ms=deadline_ms,
            encoded_result=encoded_result,
        )
        self._send_call(call_id, frame)
        return call_id

    def cancel_call(self, call_id: int, reason: CancelReason) -> None:
        """Give up ``call_id``: the server is told to cancel it (``reason``), and its end is
        never reported (a late result is dropped). Nothing happens if it already ended."""
        cancel = self._protocol.abandon_call(call_id, reason)
        if cancel is not None:
            try:
                self._pump.send_nowait(b"", cancel, force=True)
            except trio.ClosedResourceError:
                pass  # the connection is gone; so is the server's interest in the call

    def request_cancel(self, call_id: int, reason: CancelReason) -> bool:
        """Ask the server to cancel ``call_id`` (started with :meth:`start_call`) and keep
        waiting for it: ``on_done`` still reports its one end, which may be a result (the
        call finished before the cancel reached it). A relay passes a cancel on this way and
        answers with what really happened. Returns ``False`` if the call already ended."""
        cancel = self._protocol.cancel_frame(call_id, reason)
        if cancel is None:
            return False
        try:
            self._pump.send_nowait(b"", cancel, force=True)
        except trio.ClosedResourceError:
            pass  # closing: the call ends unavailable, which on_done reports
        return True

    def _send_call(self, call_id: int, frame: bytes) -> None:
        try:
            self._pump.send_nowait(b"", frame)
        except (WireError, trio.ClosedResourceError) as exc:
            self._protocol.forget_call(call_id)
            if isinstance(exc, WireError):
                raise
            raise UnavailableError("client is closed") from None

    # -- proxies ----------------------------------------------------------------------------

    def agent(self, agent_id: str) -> Any:
        """Proxy for one agent: ``client.agent(id).sessionReferenceResolver.candidates(q)``."""
        return AgentProxy(self, agent_id)

    def remote(self, service: type) -> Any:
        """Typed proxy for a service class declared with ``@Remote`` methods.

        ``client.remote(SessionReferenceResolver).candidates(agent_id, query)``; results are
        checked against the class's annotations.
        """
        for spec in specs_of(service):
            self._specs[spec.name] = spec
        return ServiceProxy(self, service)

    def learn(self, specs: list[EndpointSpec]) -> None:
        """Make endpoint declarations known to dynamic proxies (avoids a describe call)."""
        for spec in specs:
            self._specs[spec.name] = spec

    async def spec(self, endpoint: str) -> EndpointSpec | None:
        """The declaration of ``endpoint``: learned, or fetched once through system/describe."""
        while endpoint not in self._specs and self._described is None:
            await self._describe()
        return self._specs.get(endpoint)

    async def _describe(self) -> None:
        """Fetch system/describe once for everybody: callers that need it while it is in
        flight wait for that call instead of each sending their own (a thousand concurrent
        first calls through a proxy would otherwise ask the server a thousand times). If the
        call fails or its caller is cancelled, the next waiter asks again."""
        pending = self._describing
        if pending is not None:
            await pending.wait()
            return
        done = self._describing = trio.Event()
        try:
            described = await self.call("system/describe")
            for spec in specs_from_describe(described):
                self._specs.setdefault(spec.name, spec)
            self._described = described
        finally:
            self._describing = None
            done.set()

    @property
    def ready(self) -> bool:
        """Whether the server welcomed us and is answering (a call now would be sent)."""
        return self._protocol.state is ClientState.READY

    def statistics(self) -> ClientStatistics:
        return ClientStatistics(
            pending_calls=self._protocol.pending_calls,
            state=self._protocol.state.value,
            backlog_frames=self._pump.held.frame_count(),
            calls_started=self._protocol.calls_started,
        )

    # -- driving ----------------------------------------------------------------------------

    def _on_receive(self, peer: bytes, frames: list[bytes]) -> None:
        if len(frames) != 1:
            return  # a ROUTER never sends this; ignore rather than trust it
        protocol = self._protocol
        frame = frames[0]
        # A relay's calls first (their values stay encoded; for any other client this returns
        # at once), then any other call's result, then everything else.
        result = protocol.receive_encoded(frame, self._pump.received_at)
        if result is None:
            result = protocol.receive_value(frame, self._pump.received_at)
            if result is None:
                self._apply(protocol.receive_decoded(frame, self._pump.received_at))
                return
        handle, value = result
        if handle is not None:  # else the call was given up
            self._resolve(handle, value, None)

    def _resolve(self, handle: Any, value: Any, error: WireError | None) -> None:
        """End a call with its value or error: a callback's, or its waiting task's."""
        if type(handle) is _Callback:
            handle.on_done(value, error)
            return
        self._pump.expecting += 1
        trio.lowlevel.reschedule(
            handle, outcome.Value(value) if error is None else outcome.Error(error)
        )

    def _apply(self, events: list[Any]) -> None:
        for event in events:
            if type(event) is Resolved:
                # Nearly every event: checked before the match, whose class patterns cost a
                # few attribute lookups each.
                self._resolve(event.handle, event.value, event.error)
                continue
            match event:
                case SendFrame(frame):
                    self._pump.send_nowait(b"", frame, force=True)
                case Ready(welcome):
                    self.welcome = welcome
                    self._ready.set()
                case Lost():
                    pass

    async def _timer(self) -> None:
        while True:
            # Asleep until a ping or the silence bound is due (an idle client wakes once per
            # heartbeat), and never more often than every tick.
            soonest = trio.current_time() + _TICK
            await trio.sleep_until(max(self._protocol.next_due(), soonest))
            now = trio.current_time()
            self._apply(self._protocol.tick(now, verified_at=self._pump.verified_empty_at(now)))

    async def _greet(self, connect_timeout: float) -> None:
        self._pump.send_nowait(b"", self._protocol.hello(trio.current_time()), force=True)
        with trio.move_on_after(connect_timeout):
            await self._ready.wait()
        if self._protocol.state is not ClientState.READY:
            raise UnavailableError(f"no welcome from the server within {connect_timeout:g} s")

    def _close(self) -> None:
        events = self._protocol.close()
        try:
            self._apply(events)
            self._pump.flush_now()
        except trio.ClosedResourceError:
            pass


@asynccontextmanager
async def open_client(
    endpoint: str,
    *,
    name: str = "agent-actors",
    connect_timeout: float = 5.0,
    context: zmq.Context[Any] | None = None,
    security: ClientSecurity | None = None,
) -> AsyncIterator[Client]:
    """Connect to the server at ``endpoint`` and say hello.

    Resource handling: the socket and the background tasks live exactly as long as the
    ``async with`` block; on exit calls still in flight fail with ``unavailable`` and the
    server is told bye. Error handling: background failures never raise into the block; they
    fail the calls in flight with ``peer-lost``.

    Raises:
        UnavailableError: no welcome within ``connect_timeout`` seconds.
    """
    socket = (context or zmq.Context.instance()).socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 200)
    socket.setsockopt(zmq.SNDHWM, 10_000)
    socket.setsockopt(zmq.RCVHWM, 10_000)
    if security is not None:
        # CURVE: the server's public key is pinned; a server that cannot prove it holds the
        # matching secret key never completes the handshake (and never gets a frame).
        security.configure(socket)
    try:
        socket.connect(endpoint)
        client = Client(socket, name=name)
        # The block's own exception is carried out of the nursery and re-raised there, so the
        # caller sees it as raised (not wrapped in an ExceptionGroup): the background tasks
        # never raise, so the nursery has nothing of its own to add.
        escaped: BaseException | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_pump_or_fail, client)
            nursery.start_soon(client._timer)
            try:
                await client._greet(connect_timeout)
                yield client
            except BaseException as exc:
                escaped = exc
            finally:
                client._close()
                nursery.cancel_scope.cancel()
        if escaped is not None:
            raise escaped
    finally:
        socket.close(linger=200)


async def _pump_or_fail(client: Client) -> None:
    try:
        await client._pump.run()
    except zmq.ZMQError as exc:
        client._apply(client._protocol.lose(PeerLostError(f"socket failed: {exc}")))
