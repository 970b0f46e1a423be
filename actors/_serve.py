"""Running a server: the session store, the actor system, its services and the wire server,
under one nursery.

``serve`` is what ``agent-actors serve`` runs. SIGINT and SIGTERM shut it down gracefully:
calls in flight are cancelled with a terminal frame (reason ``shutdown``), every peer is told
bye, the sockets close, every session writer is flushed and its lock released, and the process
exits 0.
"""

from __future__ import annotations

import functools
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from actors._builtin_services import Agents, Diagnostics
from actors._config import Config
from actors._query_limits import limit_queries
from actors._reference_services import SessionFileReferences, SessionReferenceResolver
from actors._remote import RemoteService
from actors._session_service import Sessions
from actors._store_services import SessionServices, build_session_services
from actors._system import ActorSystem
from actors.file_references import FileReferenceService
from actors.session_log import WRITES
from actors.session_references import LocalSpillStore, SourceSnapshot
from wire import (
    METRICS_SPEC,
    SYSTEM_SPECS,
    CallContext,
    CallMetrics,
    MetricsSource,
    Server,
    SessionNotFoundError,
    counter,
    describe_endpoints,
    gauge,
    histogram_family,
    metrics_snapshot,
    serve_metrics,
)
from wire._security import ServerSecurity

__all__ = [
    "BUILTIN_SERVICES",
    "METRICS_LINE",
    "READY_LINE",
    "Runtime",
    "announce_metrics",
    "describe_builtin",
    "open_runtime",
    "runtime_metrics",
    "serve",
]

log = logging.getLogger("actors.serve")

#: Printed (then the bound addresses) once the server accepts calls; the demo and tests wait
#: for it.
READY_LINE = "agent-actors: serving on"
#: Printed (then the metrics URL) before the ready line when ``--metrics`` is given.
METRICS_LINE = "agent-actors: metrics on"


def announce_metrics(address: tuple[str, int]) -> None:
    """Say where the metrics are (the port, when 0 was asked for, is known only now)."""
    host, port = address
    shown = f"[{host}]" if ":" in host else host
    print(f"{METRICS_LINE} http://{shown}:{port}/metrics", flush=True)


#: The services every server hosts (what :func:`open_runtime` registers).
BUILTIN_SERVICES: tuple[type[RemoteService], ...] = (
    Agents,
    Diagnostics,
    SessionFileReferences,
    SessionReferenceResolver,
    Sessions,
)


def describe_builtin() -> dict[str, Any]:
    """What ``system/describe`` of a server of this package says, without starting one (its
    servers always keep metrics: ``system/metrics``)."""
    specs = [spec for service in BUILTIN_SERVICES for spec in service.__remote_endpoints__]
    return {"protocol": 1, **describe_endpoints([*SYSTEM_SPECS, METRICS_SPEC, *specs])}


@attrs.frozen(kw_only=True)
class Runtime:
    """Everything a server process hosts, assembled and running."""

    system: ActorSystem
    sessions: SessionServices
    files: FileReferenceService
    references: SessionReferenceResolver


class _LocalContext:
    """The call context of an actor-to-actor call made inside this process."""

    peer = b""
    call_id = 0
    reservation = None

    def running(self) -> None:
        """Local calls have no wire state to report."""


async def call_local(system: ActorSystem, endpoint: str, args: dict[str, Any]) -> Any:
    """Call ``endpoint`` in this process exactly as a remote caller would (validation,
    activation, mailbox admission), so actors reach each other through one interface."""
    target = system.registry.get(endpoint)
    if target is None:
        raise LookupError(f"no local endpoint {endpoint!r}")
    context: CallContext = _LocalContext()
    return await target.handler(context, target.bind(args))


@asynccontextmanager
async def open_runtime(
    config: Config,
    data_dir: Path,
    *,
    sessions_dir: Path | None = None,
    writable: bool = False,
    route: Callable[[ActorSystem], Callable[[str, dict[str, Any]], Awaitable[Any]]] | None = None,
    epoch_of: Callable[[str], int | None] | None = None,
    ack_guard: Callable[[str], None] | None = None,
    before_write: Callable[[str], Awaitable[None]] | None = None,
) -> AsyncIterator[Runtime]:
    """Assemble and run the store, the services and the actor system (no sockets).

    ``route(system)``, when given, returns the function actor-to-actor calls go through
    (``prepare`` reading other sessions, ``agents/create``) instead of :func:`call_local`; a
    scale-out worker routes calls for agents it does not own to their owner.

    Fencing (a clustered worker; both default to None, and single-process serving pays
    nothing):

    - ``epoch_of(session_id)`` is the fencing epoch under which this process may write that
      session (its shard claim's epoch), or None when not clustered. A writer opening a log
      under an epoch first appends an epoch-open record, and every record it writes carries
      the epoch; readers drop lower-epoch records that follow a higher epoch-open
      (`actors.session_log._epochs`).
    - ``ack_guard(session_id)`` is called after an append is durable (per the durability
      mode) and before it is acknowledged; if it raises (e.g. ``UnavailableError`` past the
      lease deadline), the append call fails with that error instead of returning seqs.
    - ``before_write(session_id)`` is awaited before the first byte of a session is written
      (its creation, or its first open for write); if it raises, nothing is written (a worker
      binds the session's shard to its storage there, ``actors/cluster/_binding.py``).

    Resource handling: on exit every background task is cancelled and the store is closed
    under a shield (writers flushed, locks released).
    """
    await trio.Path(data_dir).mkdir(parents=True, exist_ok=True)
    sessions = await trio.to_thread.run_sync(
        lambda: build_session_services(
            data_dir,
            sessions_dir=sessions_dir,
            writable=writable,
            durability=config.durability,
            batch_delay=config.batch_delay,
            inline_writes=config.inline_writes,
            epoch_of=epoch_of,
            ack_guard=ack_guard,
            before_write=before_write,
        )
    )
    files = FileReferenceService(config.file_references)
    file_references = SessionFileReferences(files, default_cwd=Path.cwd())
    sessions.directory.add_event_listener(file_references.on_session_event)
    system = ActorSystem(
        sessions.directory,
        [*sessions.services, file_references, Diagnostics(publish_dir=data_dir / "diagnostics")],
        idle_timeout=config.idle_timeout,
    )

    call = route(system) if route is not None else functools.partial(call_local, system)

    async def read_surface(session_id: str) -> SourceSnapshot:
        try:
            surface = await call("sessions/snapshot", {"agentId": session_id})
        except SessionNotFoundError as exc:
            # Upstream's session-query wording (session-reference §1.1), which READ_FAILED
            # quotes as its inner message.
            raise SessionNotFoundError(
                f'session "{session_id}" not found', details=exc.details
            ) from exc
        return SourceSnapshot.from_surface(surface)

    system.add_service(Agents(call))
    references = SessionReferenceResolver(
        cache=sessions.cache,
        root_ids=sessions.directory.root_ids,
        config=config.session_references,
        read_surface=read_surface,
        spill_store=LocalSpillStore(data_dir / "spill"),
    )
    system.add_service(references)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(sessions.run)
            await nursery.start(files.run)
            await nursery.start(system.run)
            yield Runtime(system=system, sessions=sessions, files=files, references=references)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await sessions.aclose()


def runtime_metrics(runtime: Runtime) -> MetricsSource:
    """The families of a runtime for ``system/metrics``: its actors, its writes, its file and
    candidate indexes (each process reports its own; a supervisor adds its workers' up)."""

    async def snapshot() -> dict[str, Any]:
        actors = runtime.system.statistics()
        files = runtime.files.statistics()
        placement = runtime.sessions.directory.placement
        return {
            "actors_active": gauge("Agents with a live actor.", (), [((), actors.active_agents)]),
            "actor_activations_total": counter(
                "Actor activations (a passivated agent that comes back counts again).",
                (),
                [((), actors.activations)],
            ),
            "actor_passivations_total": counter(
                "Actors passivated after their idle timeout.", (), [((), actors.passivations)]
            ),
            "appended_events_total": counter(
                "Events appended to session logs.", (), [((), WRITES.events)]
            ),
            "append_batches_total": counter(
                "Batches written to session logs (one write each).", (), [((), WRITES.batches)]
            ),
            "append_writes_total": counter(
                "Append batches written, by where: on the event loop (inline) or in a worker "
                "thread (a large batch, a slow disk, a network file system, inlineWrites off).",
                ("where",),
                [(("inline",), placement.inline_writes), (("thread",), placement.thread_writes)],
            ),
            "fsync_duration_seconds": histogram_family(
                "Seconds the fsync of each written batch took.", (), [((), WRITES.fsync_seconds)]
            ),
            "file_index_builds_total": counter(
                "File indexes built for fileReferences/list.", (), [((), files.builds)]
            ),
            "file_index_entries": gauge(
                "Files and directories in the file indexes held.", (), [((), files.entries)]
            ),
            "candidate_index_updates_total": counter(
                "Updates of the session-candidate index, by kind (build or in place).",
                ("kind",),
                [
                    (("build",), runtime.references.index_builds),
                    (("in-place",), runtime.references.index_updates),
                ],
            ),
        }

    return snapshot


async def serve(
    endpoints: Sequence[str],
    config: Config,
    data_dir: Path,
    *,
    sessions_dir: Path | None = None,
    writable: bool = False,
    on_ready: Callable[[list[str]], None] | None = None,
    security: ServerSecurity | None = None,
    metrics: tuple[str, int] | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until SIGINT or SIGTERM, then shut down gracefully.

    ``security`` enables CURVE, the client allowlist and per-call roles (``actors._keys``).
    ``metrics`` (host, port) serves Prometheus metrics and probes over HTTP there
    (``wire.serve_metrics``); the server then counts its calls.
    """
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_runtime(
            config, data_dir, sessions_dir=sessions_dir, writable=writable
        ) as runtime:
            registry = limit_queries(runtime.system.registry, config.max_query_length)
            calls = CallMetrics() if metrics is not None else None
            source = runtime_metrics(runtime)
            server = Server(
                registry, limits=config.wire, security=security, call_metrics=calls, metrics=source
            )
            serving = False
            async with trio.open_nursery() as nursery:
                addresses = await nursery.start(server.run, list(endpoints))
                serving = True
                if metrics is not None:
                    host, port = metrics
                    snapshot = functools.partial(metrics_snapshot, server.statistics, calls, source)
                    announce_metrics(
                        await nursery.start(serve_metrics, host, port, snapshot, lambda: serving)
                    )
                if on_ready is not None:
                    on_ready(addresses)
                task_status.started(addresses)
                async for signum in signals:
                    name = signal.Signals(signum).name
                    log.warning("%s: shutting down", name, extra={"signal": name})
                    serving = False
                    await server.aclose()
                    nursery.cancel_scope.cancel()
                    break
