"""The peer frameworks the load benchmark measures side by side with agent-actors.

One module per peer, each with the same two functions:

- ``serve(address)``: bind ``tcp://127.0.0.1:0`` (a free loopback port) or ``ipc:///path``,
  print :data:`READY_PREFIX` and the address it bound, then echo until SIGTERM ends the process;
- ``drive(job, go)``: the client half, run inside a load-generator process: connect, warm up,
  wait for ``go()``, keep ``job.concurrency`` echo calls in flight until the window closes, and
  return the :class:`~bench._load_jobs.Samples`.

Every peer echoes the payload bytes unchanged, in the way its own documentation shows.
``python -m bench.peers NAME ADDRESS`` runs a peer's server.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

import attrs

__all__ = ["PEERS", "READY_PREFIX", "Peer", "load_peer"]

READY_PREFIX = "bench-peer: serving on"


@attrs.frozen(kw_only=True)
class Peer:
    name: str
    #: How tables and plots name it.
    label: str
    #: The distribution to install (all are in the ``bench`` extra).
    distribution: str
    #: The module the peer needs; when it cannot be imported the peer is skipped.
    requires: str
    #: How the client keeps many calls in flight (stated in the report).
    concurrency_model: str

    def missing(self) -> str | None:
        """Why this peer cannot run here, or ``None``."""
        if importlib.util.find_spec(self.requires) is None:
            return f"{self.distribution} is not installed (pip install -e '.[bench]')"
        return None


PEERS: dict[str, Peer] = {
    peer.name: peer
    for peer in (
        Peer(
            name="raw",
            label="raw pyzmq+msgpack",
            distribution="pyzmq",
            requires="zmq",
            concurrency_model="one blocking DEALER per process keeping a window of calls",
        ),
        Peer(
            name="zerorpc",
            label="zerorpc",
            distribution="zerorpc",
            requires="zerorpc",
            concurrency_model="one zerorpc.Client per process, one gevent greenlet per call",
        ),
        Peer(
            name="grpc",
            label="gRPC aio",
            distribution="grpcio",
            requires="grpc",
            concurrency_model="one grpc.aio channel per process, one asyncio task per call",
        ),
        Peer(
            name="rpyc",
            label="RPyC",
            distribution="rpyc",
            requires="rpyc",
            concurrency_model="one connection per process, rpyc.async_ calls with callbacks",
        ),
        Peer(
            name="pyro5",
            label="Pyro5",
            distribution="Pyro5",
            requires="Pyro5",
            concurrency_model="one proxy (connection) and thread per call in flight",
        ),
    )
}


def load_peer(name: str) -> ModuleType:
    """The module of peer ``name`` (``bench.peers._NAME``)."""
    if name not in PEERS:
        raise KeyError(f"unknown peer {name!r} (known: {', '.join(PEERS)})")
    return importlib.import_module(f"bench.peers._{name}")
