"""The socket pump over a real inproc DEALER/ROUTER pair."""

from __future__ import annotations

import trio
import zmq

from wire._pump import SocketPump


async def _order_of_reads(ask_yield: bool) -> list[str]:
    """Ten messages wait on the socket; the callback for the third wakes a task. The order in
    which the messages were read and the woken task ran."""
    context = zmq.Context.instance()
    router = context.socket(zmq.ROUTER)
    dealer = context.socket(zmq.DEALER)
    address = f"inproc://pump-{ask_yield}-{id(router)}"
    router.bind(address)
    dealer.connect(address)
    order: list[str] = []
    woken = trio.Event()
    pump: SocketPump

    def on_receive(peer: bytes, frames: list[bytes]) -> None:
        order.append(frames[0].decode())
        if frames[0] == b"m3":
            woken.set()
            if ask_yield:
                pump.yield_soon()

    async def woken_task() -> None:
        await woken.wait()
        order.append("woken")

    pump = SocketPump(router, router=True, on_receive=on_receive)
    try:
        for i in range(1, 11):
            dealer.send(f"m{i}".encode())
        with trio.fail_after(10):
            while router.poll(0) == 0:
                await trio.sleep(0.001)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(woken_task)
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(pump.run)
                while len(order) < 11:
                    await trio.sleep(0.001)
                nursery.cancel_scope.cancel()
    finally:
        dealer.close(linger=0)
        router.close(linger=0)
    return order


async def test_a_yield_request_lets_the_woken_task_run_before_the_next_message() -> None:
    """A callback that woke a task and asked the pump to yield (the server does so for a
    cancelled handler) sees that task run before the pump reads the next message."""
    order = await _order_of_reads(ask_yield=True)
    assert order == ["m1", "m2", "m3", "woken", "m4", "m5", "m6", "m7", "m8", "m9", "m10"]


async def test_without_a_yield_request_the_drain_reads_on() -> None:
    """Control for the test above: without the request, every waiting message is read in
    the same drain, before the woken task runs."""
    order = await _order_of_reads(ask_yield=False)
    assert order.index("woken") == 10
