"""Client.request_cancel: a cancel passed on by a relay, which still hears how the call ended."""

from __future__ import annotations

import trio

from tests.wire._detached_support import Done, settle, start
from wire import (
    CallCancelledError,
    Cancel,
    CancelReason,
    Result,
    decode,
    encode,
    open_client,
)
from wire._client_protocol import Resolved
from wire._server_events import CancelCall, StartCall
from wire.testing import ProtocolPair


def test_cancel_frame_keeps_the_call_and_its_late_result() -> None:
    """cancel_frame gives the cancel to send while the call stays pending: the server's
    cancel reaches the call and a result that crossed it still resolves the handle."""
    pair = ProtocolPair()
    pair.greet()
    call_id, frame = pair.client.start_call("h", "a/b", {})
    [start_event] = [e for e in pair.to_server(frame) if isinstance(e, StartCall)]
    cancel = pair.client.cancel_frame(call_id, CancelReason.SUPERSEDED)
    assert cancel is not None
    assert decode(cancel, max_frame_bytes=1 << 20) == Cancel(
        id=call_id, reason=CancelReason.SUPERSEDED
    )
    assert pair.client.pending_calls == 1
    assert pair.to_server(cancel) == [CancelCall(start_event.record)]
    late = pair.server.finish_call(start_event.record, Result(id=call_id, value="applied"))
    assert late is not None
    [resolved] = pair.client.receive(late, now=0.0)
    assert resolved == Resolved("h", value="applied")
    assert pair.client.cancel_frame(call_id, CancelReason.CALLER) is None
    assert pair.client.receive(encode(Result(id=call_id, value="again")), now=0.0) == []


async def test_request_cancel_reports_the_handlers_cancelled_end(
    nursery: trio.Nursery, ipc: str
) -> None:
    """request_cancel cancels the server-side handler and on_done still reports its one end,
    the cancelled error with the reason passed; once ended, it returns False."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        async with open_client(bound) as client:
            done = Done()
            call_id = client.start_call("t/sleep", {"seconds": 30}, on_done=done)
            await relay.echo_running.wait()
            assert client.request_cancel(call_id, CancelReason.SHUTDOWN)
            await done.event.wait()
            [(value, error)] = done.calls
            assert value is None and isinstance(error, CallCancelledError)
            assert error.reason is CancelReason.SHUTDOWN and error.state == "running"
            await settle(server)
            assert relay.echo_endings == ["cancelled"]
            assert not client.request_cancel(call_id, CancelReason.CALLER)
            assert client.statistics().pending_calls == 0
        await server.aclose()


async def test_request_cancel_reports_a_result_that_came_first(
    nursery: trio.Nursery, ipc: str
) -> None:
    """A call that finishes although its cancel reached the server is reported with its
    result: the relay passing the cancel on learns that the call took effect."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        async with open_client(bound) as client:
            done = Done()
            call_id = client.start_call("d/hold", {}, on_done=done)
            await relay.begun.wait()
            assert client.request_cancel(call_id, CancelReason.CALLER)
            with trio.fail_after(5):
                while relay.cancels != [CancelReason.CALLER]:
                    await trio.sleep(0.005)
            assert done.calls == []
            relay.calls[0].succeed("applied")
            await done.event.wait()
            assert done.calls == [("applied", None)]
        await server.aclose()
