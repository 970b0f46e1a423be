"""A peer that floods a server and does not read takes short passes of the server's time: once
a drain reads a message from a peer whose replies are held back, it reads a few more at most
(``HELD_BUDGET``) and the owner hears of the flood. A peer that is held back but silent costs
the others nothing: their drains keep the whole budget.

Real ZeroMQ sockets (inproc) inside one process: a ROUTER pump that answers every message with
a frame, and raw DEALERs that never read.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from contextlib import contextmanager

import trio
import trio.lowlevel
import zmq

from wire._pump import SocketPump
from wire._pump_tuning import HELD_BUDGET, RECEIVE_BATCH


class Answering:
    """A ROUTER pump that answers each message with a 1 KiB frame; per drain, which peers'
    messages it read (keyed by the drain's start time, read once per drain)."""

    def __init__(self, router: zmq.Socket[bytes]) -> None:
        self.drains: dict[float, list[bytes]] = collections.defaultdict(list)
        self.floods = 0
        self.pump = SocketPump(router, router=True, on_receive=self.receive, on_flood=self.flooded)

    def receive(self, peer: bytes, frames: list[bytes]) -> None:
        self.drains[self.pump.received_at].append(peer)
        self.pump.send_nowait(peer, b"x" * 1024)

    def flooded(self) -> None:
        self.floods += 1

    def largest_drain_reading(self, peer: bytes) -> int:
        return max(len(peers) for peers in self.drains.values() if peer in peers)


@contextmanager
def sockets(name: str) -> Iterator[tuple[zmq.Socket[bytes], list[zmq.Socket[bytes]]]]:
    context = zmq.Context.instance()
    router: zmq.Socket[bytes] = context.socket(zmq.ROUTER)
    router.setsockopt(zmq.ROUTER_MANDATORY, 1)
    router.setsockopt(zmq.SNDHWM, 1)
    router.bind(f"inproc://{name}")
    peers: list[zmq.Socket[bytes]] = []
    # Neither reads: the first's replies are held after two, the other's pipe takes 1,001.
    for identity, hwm in ((b"held", 1), (b"other", 1000)):
        dealer: zmq.Socket[bytes] = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.IDENTITY, identity)
        dealer.setsockopt(zmq.RCVHWM, hwm)
        dealer.connect(f"inproc://{name}")
        peers.append(dealer)
    try:
        yield router, peers
    finally:
        for socket in [*peers, router]:
            socket.close(linger=0)


async def holding_back(
    nursery: trio.Nursery, router: zmq.Socket[bytes], held: zmq.Socket[bytes]
) -> Answering:
    """A running pump on ``router`` that holds replies back for ``held``: it sent until they
    were, and what it sent is read; the drains and floods seen so far are forgotten."""
    answering = Answering(router)
    nursery.start_soon(answering.pump.run)
    while not answering.pump.held.held_for(b"held"):
        held.send(b"call")
        await trio.sleep(0.01)
    await trio.sleep(0.05)
    answering.drains.clear()
    answering.floods = 0
    return answering


async def burst(socket: zmq.Socket[bytes], count: int, answering: Answering) -> None:
    """``count`` messages at once (the pump does not run meanwhile), then wait until read."""
    before = sum(len(peers) for peers in answering.drains.values())
    for _ in range(count):
        socket.send(b"call")
    while sum(len(peers) for peers in answering.drains.values()) < before + count:
        await trio.sleep(0.01)


async def test_a_held_back_peer_that_keeps_sending_gets_short_drains(
    nursery: trio.Nursery,
) -> None:
    with sockets("flood-passes") as (router, [held, _]), trio.fail_after(30):
        answering = await holding_back(nursery, router, held)
        await burst(held, 200, answering)
        assert answering.largest_drain_reading(b"held") <= HELD_BUDGET
        assert answering.floods > 0


async def test_a_held_back_peer_that_is_silent_leaves_the_others_the_whole_budget(
    nursery: trio.Nursery,
) -> None:
    """(Cutting every drain short while anything was held cost the other clients a third of
    their throughput for as long as one stuck client stayed connected.)"""
    with sockets("silent-held") as (router, [held, other]), trio.fail_after(30):
        answering = await holding_back(nursery, router, held)
        await burst(other, 200, answering)
        assert answering.largest_drain_reading(b"other") > HELD_BUDGET
        assert answering.largest_drain_reading(b"other") <= RECEIVE_BATCH
        assert answering.floods == 0
        assert answering.pump.held.held_for(b"held")  # still held back all along
        assert not answering.pump.held.held_for(b"other")
