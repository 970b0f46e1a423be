"""One worker process: a normal runtime on a private endpoint, serving only its shards.

The worker joins the supervisor's coordinator (over the control endpoint), claims its shards
(`keep_shards`), and serves the actor system through a gated registry: a call for an agent in a
shard it does not own answers ``moved`` naming the owner. Its own actor-to-actor calls
(``prepare`` reading other sessions, ``agents/create`` titling the new session) go to the
owner of the target agent, here or in another worker. It exits on SIGTERM (graceful drain,
like ``agent-actors serve``) or when its supervisor is gone; a lost lease does not end it: it
fences itself (no ack past the lease deadline minus a margin: `_ack_guard`) and rejoins under
a new lease (``_keeper.py``).
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from actors._config import Config
from actors._query_limits import limit_queries
from actors._serve import Runtime, call_local, open_runtime, runtime_metrics
from actors._system import ActorSystem
from actors.cluster._binding import ShardBinder, held_shards_of
from actors.cluster._coordinator import Member
from actors.cluster._coordinator_etcd import EtcdCoordinator
from actors.cluster._etcd_cluster import open_worker_coordinator
from actors.cluster._gate import CREATE_ENDPOINT, ShardGate, gated_registry
from actors.cluster._keeper import keep_shards
from actors.cluster._pool import ClientPool
from actors.cluster._router import call_owner
from actors.cluster._shards import shard_of
from actors.cluster._storage import Placement
from actors.store import keyed_session_id
from wire import Server
from wire._errors import MovedError

__all__ = ["run_worker"]

log = logging.getLogger("actors.cluster")

#: How often a worker checks that its supervisor is still its parent (seconds).
_PARENT_CHECK = 0.5
#: How long a stopping worker spends flushing and unlocking its shards' sessions before it
#: leaves the cluster anyway (seconds; its lease going frees the shards either way).
_CLOSE_GRACE = 5.0


def _router(
    system: ActorSystem, gate: ShardGate, pool: ClientPool, *, gate_creates: bool = False
) -> Callable[[str, dict[str, Any]], Awaitable[Any]]:
    """Actor-to-actor calls: local when this worker owns the agent, else to its owner. With
    ``gate_creates`` (storage bindings are recorded), ``sessions/create`` is routed too: a new
    session gets an id in a shard this worker owns, a given id goes to its shard's owner."""

    async def route(endpoint: str, args: dict[str, Any]) -> Any:
        target = system.registry.get(endpoint)
        lookup = target is not None and any(p.lookup == "agent" for p in target.spec.params)
        agent_id = args.get("agentId") if lookup else None
        mutates = target is not None and target.spec.mutates
        if gate_creates and endpoint == CREATE_ENDPOINT and target is not None:
            agent_id = args.get("sessionId")
            if agent_id is None:
                # A keyed create names its session by its key, so every retry comes here.
                agent_id = keyed_session_id(args) or gate.fresh_session_id()
                args = {**args, "sessionId": agent_id}
            mutates = True
        if not isinstance(agent_id, str) or target is None:
            return await call_local(system, endpoint, args)
        try:
            shard = gate.enter(agent_id, mutates=mutates)
        except MovedError:
            return await call_owner(
                pool,
                lambda: gate.view,
                gate.wait_changed,
                endpoint,
                args,
                agent_id,
                result=target.spec.result,
            )
        try:
            return await call_local(system, endpoint, args)
        finally:
            gate.leave(shard)

    return route


def _creates(
    system: ActorSystem, gate: ShardGate, pool: ClientPool
) -> Callable[[str, dict[str, Any]], Awaitable[Any]]:
    """``sessions/create`` called over the wire: a given ``sessionId`` must be in a shard this
    worker owns (else ``moved``: the caller routes by it); without one, the new session gets an
    id in an owned shard (or, owning none, is created by the owner of a fresh id's shard)."""
    route = _router(system, gate, pool, gate_creates=True)

    async def create(endpoint: str, args: dict[str, Any]) -> Any:
        session_id = args.get("sessionId")
        if session_id is None:
            return await route(endpoint, args)  # it picks the id (`gate.fresh_session_id`)
        shard = gate.enter(session_id, mutates=True)
        try:
            return await call_local(system, endpoint, args)
        finally:
            gate.leave(shard)

    return create


def _ack_guard(gate: ShardGate) -> Callable[[str], None]:
    """The storage hook run after an append is durable and before its ack (self-fencing)."""

    def guard(session_id: str) -> None:
        # Past the lease deadline minus the margin another worker may own the shard: the
        # append is on disk but must not be acknowledged (`ShardGate.may_ack` fences the gate).
        if not gate.may_ack(session_id, time.monotonic()):
            shard = shard_of(session_id, gate.shard_count)
            raise gate.fenced_error(session_id, shard)

    return guard


async def _close_shard(runtime: Runtime, gate: ShardGate, shard: int) -> None:
    """Passivate the shard's actors and close its session states (flush, unlock)."""
    count = gate.shard_count

    def in_shard(agent_id: str) -> bool:
        return shard_of(agent_id, count) == shard

    await runtime.system.passivate_matching(in_shard)
    for state in runtime.sessions.directory.live_states():
        if in_shard(state.session_id):
            await state.aclose()


async def run_worker(
    *,
    worker_id: str,
    control: str,
    endpoint: str,
    config: Config,
    data_dir: Path,
    shard_count: int,
    ttl: float,
    sessions_dir: Path | None = None,
    writable: bool = False,
    placement: Placement | None = None,
    on_ready: Callable[[list[str]], None] | None = None,
    parent_pipe: bool = False,
) -> None:
    """Serve as worker ``worker_id`` until SIGTERM or the supervisor's exit (a lost lease
    makes it fence itself and rejoin, see ``_keeper.py``).

    ``parent_pipe``: stdin is a pipe whose other end only the supervisor holds, so its end of
    file says the supervisor is gone (no timer wakes an idle worker to ask).

    ``placement`` is the host and storage it joins an etcd cluster as (default: local mode on
    this host's ``data_dir``)."""
    parent = os.getppid()
    gate = ShardGate(worker_id, shard_count)
    placement = placement or Placement.build(data_dir=data_dir)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with (
            # The supervisor's control endpoint, or etcd (``serve --coordinator etcd://…``).
            open_worker_coordinator(
                control,
                worker_id=worker_id,
                shard_count=shard_count,
                placement=placement,
            ) as coordinator,
            trio.open_nursery() as nursery,
        ):
            pool = ClientPool(nursery, name=f"agent-actors worker {worker_id}")
            # Only etcd records storage bindings: there a shard is bound to this storage
            # before the first byte of one of its sessions is written here (`_binding.py`).
            binder = (
                ShardBinder(coordinator, gate, placement.storage_id)
                if isinstance(coordinator, EtcdCoordinator)
                else None
            )
            binds = binder is not None
            async with open_runtime(
                config,
                data_dir,
                sessions_dir=sessions_dir,
                writable=writable,
                route=lambda system: _router(system, gate, pool, gate_creates=binds),
                epoch_of=gate.epoch_for,
                ack_guard=_ack_guard(gate),
                before_write=binder.before_write if binder is not None else None,
            ) as runtime:
                if binder is not None:
                    binder.held_shards = held_shards_of(runtime.sessions.directory, shard_count)
                registry = gated_registry(
                    limit_queries(runtime.system.registry, config.max_query_length),
                    gate,
                    route_creates=_creates(runtime.system, gate, pool) if binds else None,
                )
                # Its runtime's families, for the supervisor's one view (``serve --metrics``).
                server = Server(registry, limits=config.wire, metrics=runtime_metrics(runtime))
                addresses = await nursery.start(server.run, [endpoint])
                member = Member(worker_id=worker_id, endpoint=addresses[0])

                def forget_gone(view: Any) -> None:
                    if binder is not None:
                        binder.observe(view)
                    live = {m.endpoint for m in view.members}
                    for known in pool.endpoints():
                        if known not in live:
                            pool.close(known)

                keeper = trio.CancelScope()

                async def keep() -> None:
                    with keeper:
                        await keep_shards(
                            coordinator,
                            gate,
                            member,
                            ttl=ttl,
                            close_shard=functools.partial(_close_shard, runtime, gate),
                            on_view=forget_gone,
                            after_claim=binder.after_claim if binder is not None else None,
                        )
                    stop.set()

                stop = trio.Event()
                nursery.start_soon(keep)
                if on_ready is not None:
                    on_ready(addresses)

                async def on_signal() -> None:
                    async for signum in signals:
                        log.info("worker %s: %s", worker_id, signal.Signals(signum).name)
                        stop.set()
                        return

                async def watch_parent() -> None:
                    if parent_pipe:
                        await _end_of_stdin()
                    else:
                        # No event tells a child its parent died: polling getppid is the
                        # portable way when no pipe from the parent was handed over.
                        while os.getppid() == parent:  # noqa: ASYNC110
                            await trio.sleep(_PARENT_CHECK)
                    print(f"worker {worker_id}: supervisor gone", file=sys.stderr, flush=True)
                    stop.set()

                nursery.start_soon(on_signal)
                nursery.start_soon(watch_parent)
                await stop.wait()
                await server.aclose()
                # Leaving frees every shard at once: flush and unlock their sessions first, as a
                # hand-over does before its release, so the next owner never finds one still
                # locked (or with writes still buffered) here.
                with trio.move_on_after(_CLOSE_GRACE):
                    for shard in gate.owned:
                        await _close_shard(runtime, gate, shard)
                keeper.cancel()
                pool.close_all()
                nursery.cancel_scope.cancel()


async def _end_of_stdin() -> None:
    """Until stdin reaches end of file; anything written to it is read and ignored."""
    fd = sys.stdin.fileno()
    while True:
        await trio.lowlevel.wait_readable(fd)
        if not os.read(fd, 4096):
            return
