"""Running a server: the actor system, its services and the wire server, under one nursery.

``serve`` is what ``agent-actors serve`` runs. SIGINT and SIGTERM shut it down gracefully:
calls in flight are cancelled with a terminal frame (reason ``shutdown``), every peer is told
bye, the sockets close, and the process exits 0.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from actors._agents import InMemoryAgentDirectory
from actors._builtin_services import Agents, Diagnostics
from actors._config import Config
from actors._system import ActorSystem
from wire import Server

__all__ = ["build_system", "serve"]

#: Printed (then the bound addresses) once the server accepts calls; the demo and tests wait
#: for it.
READY_LINE = "agent-actors: serving on"


def build_system(config: Config) -> tuple[ActorSystem, InMemoryAgentDirectory]:
    directory = InMemoryAgentDirectory()
    system = ActorSystem(
        directory,
        [Agents(directory), Diagnostics()],
        idle_timeout=config.idle_timeout,
    )
    return system, directory


async def serve(
    endpoints: Sequence[str],
    config: Config,
    data_dir: Path,
    *,
    on_ready: Callable[[list[str]], None] | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until SIGINT or SIGTERM, then shut down gracefully."""
    await trio.Path(data_dir).mkdir(parents=True, exist_ok=True)
    system, _ = build_system(config)
    server = Server(system.registry, limits=config.wire)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(system.run)
            addresses = await nursery.start(server.run, list(endpoints))
            if on_ready is not None:
                on_ready(addresses)
            task_status.started(addresses)
            async for signum in signals:
                print(
                    f"agent-actors: {signal.Signals(signum).name}: shutting down",
                    file=sys.stderr,
                    flush=True,
                )
                await server.aclose()
                nursery.cancel_scope.cancel()
                break
