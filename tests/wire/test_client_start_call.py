"""Client.start_call and Client.cancel_call: calls whose end goes to a callback."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
import trio
import zmq

from tests.wire._detached_support import Done, settle, start
from wire import (
    CancelReason,
    PeerLostError,
    UnavailableError,
    UnknownEndpointError,
    open_client,
)
from wire._codec import encode
from wire._errors import DeadlineExceededError
from wire._messages import Welcome


async def test_start_call_reports_values_and_typed_errors(
    nursery: trio.Nursery, inproc_or_ipc: str
) -> None:
    """on_done gets (value, None) for a result and (None, typed error) for an error frame,
    each exactly once."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, inproc_or_ipc)
        async with open_client(bound) as client:
            assert client.ready
            ok, missing = Done(), Done()
            first = client.start_call("t/echo", {"value": {"k": [1]}}, on_done=ok)
            second = client.start_call("t/nope", {}, on_done=missing)
            assert first != second
            await ok.event.wait()
            await missing.event.wait()
            assert ok.calls == [({"k": [1]}, None)]
            [(value, error)] = missing.calls
            assert value is None
            assert isinstance(error, UnknownEndpointError)
            assert error.message == "unknown endpoint 't/nope'"
            # A detached endpoint answered later through start_call.
            held = Done()
            client.start_call("d/hold", {}, on_done=held)
            await relay.begun.wait()
            assert held.calls == []
            relay.calls[0].succeed("relayed")
            await held.event.wait()
            assert held.calls == [("relayed", None)]
            assert await client.call("t/echo", {"value": 1}) == 1
            assert ok.calls == [({"k": [1]}, None)] and len(missing.calls) == 1
            assert client.statistics().pending_calls == 0
        assert not client.ready
        await server.aclose()


async def test_start_call_deadline_is_enforced_by_the_server(
    nursery: trio.Nursery, ipc: str
) -> None:
    """start_call's deadline_ms travels with the call: on_done gets DeadlineExceededError."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        async with open_client(bound) as client:
            done = Done()
            client.start_call("t/sleep", {"seconds": 30}, deadline_ms=150, on_done=done)
            await done.event.wait()
            [(value, error)] = done.calls
            assert value is None and isinstance(error, DeadlineExceededError)
            await settle(server)
            assert relay.echo_endings == ["cancelled"]
        await server.aclose()


async def test_cancel_call_cancels_the_handler_and_reports_nothing(
    nursery: trio.Nursery, ipc: str
) -> None:
    """cancel_call ends the server-side handler cancelled and on_done is never called."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        async with open_client(bound) as client:
            done = Done()
            call_id = client.start_call("t/sleep", {"seconds": 30}, on_done=done)
            await relay.echo_running.wait()
            assert client.statistics().pending_calls == 1
            client.cancel_call(call_id, CancelReason.CALLER)
            assert client.statistics().pending_calls == 0
            await settle(server)
            assert relay.echo_endings == ["cancelled"]
            assert server.statistics().cancelled_total == 1
            # The cancelled frame was sent before this result, on the same connection.
            assert await client.call("t/echo", {"value": 2}) == 2
            client.cancel_call(call_id, CancelReason.CALLER)  # already given up: no-op
            assert await client.call("t/echo", {"value": 3}) == 3
            assert done.calls == []
        await server.aclose()


async def test_closing_the_client_ends_started_calls_unavailable(
    nursery: trio.Nursery, ipc: str
) -> None:
    """Leaving open_client with a started call in flight reports it once as unavailable, and
    the server cancels its handler."""
    with trio.fail_after(10):
        server, relay, bound = await start(nursery, ipc)
        done = Done()
        async with open_client(bound) as client:
            client.start_call("t/sleep", {"seconds": 30}, on_done=done)
            await relay.echo_running.wait()
            assert done.calls == []
        [(value, error)] = done.calls
        assert value is None and isinstance(error, UnavailableError)
        with pytest.raises(UnavailableError):
            client.start_call("t/echo", {"value": 1}, on_done=Done())
        await settle(server)
        assert relay.echo_endings == ["cancelled"]
        assert done.calls == [(value, error)]
        await server.aclose()


async def _garbage_server(sock: zmq.Socket[bytes], started: trio.Event) -> None:
    """Welcome the client, then answer its first call with an undecodable frame."""

    async def receive() -> list[bytes]:
        while True:
            try:
                return sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                await trio.sleep(0.002)

    peer, _hello = await receive()
    welcome = Welcome(
        heartbeat_ms=1000, peer_timeout_ms=3000, max_frame_bytes=1 << 20, max_in_flight=64
    )
    sock.send_multipart([peer, encode(welcome)])
    started.set()
    peer, _call = await receive()
    sock.send_multipart([peer, b"\xc1garbage"])


async def test_a_lost_connection_ends_started_calls_peer_lost(tmp_path: Path) -> None:
    """A server that sends garbage loses the connection: a started call's on_done gets
    PeerLostError and the client is no longer ready."""
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    address = f"ipc://{tmp_path}/fake.sock"
    sock.bind(address)
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                welcomed = trio.Event()
                nursery.start_soon(_garbage_server, sock, welcomed)
                async with open_client(address) as client:
                    await welcomed.wait()
                    assert client.ready
                    done = Done()
                    client.start_call("t/echo", {"value": 1}, on_done=done)
                    await done.event.wait()
                    [(value, error)] = done.calls
                    assert value is None and isinstance(error, PeerLostError)
                    assert not client.ready
    finally:
        sock.close(linger=0)


async def test_an_encoded_result_is_handed_over_as_the_servers_bytes(
    nursery: trio.Nursery, ipc: str
) -> None:
    """With encoded_result, on_done gets the result value as the msgpack bytes the server
    sent (not decoded), while errors still arrive typed."""
    with trio.fail_after(10):
        server, _, bound = await start(nursery, ipc)
        async with open_client(bound) as client:
            ok, missing = Done(), Done()
            value = {"k": [1, b"\x00", "é"], "n": None}
            client.start_call("t/echo", {"value": value}, encoded_result=True, on_done=ok)
            client.start_call("t/nope", {}, encoded_result=True, on_done=missing)
            await ok.event.wait()
            await missing.event.wait()
            [(encoded, error)] = ok.calls
            assert error is None and isinstance(encoded, bytes)
            assert msgpack.unpackb(encoded, raw=False) == value
            [(nothing, failure)] = missing.calls
            assert nothing is None and isinstance(failure, UnknownEndpointError)
            # Calls without the flag on the same connection still get decoded values.
            assert await client.call("t/echo", {"value": value}) == value
        await server.aclose()
