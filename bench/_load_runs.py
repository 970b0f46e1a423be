"""The phases of a load benchmark run, stack by stack, written into the report as they end.

agent-actors gets every workload (echo at each level, cancel probes, keystroke completion with
the stand-in and, at each level of typists, with the reference endpoints, prepare; only the
keystroke levels with ``--only keystroke``); its TypeScript client gets echo and the
cancel probes against a server of its own; each peer gets the echo workload. Echo phases that
other programs disturbed are run again (see :func:`_undisturbed_phase`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs
import trio

from actors._serve import READY_LINE
from bench import _load_typescript as typescript
from bench._common import BenchError, progress, server_process
from bench._load_generator import ServerMonitor, find_child, run_phase, split_concurrency
from bench._load_jobs import Job, require_loopback
from bench._load_levels import keystroke_jobs, run_keystroke_levels
from bench._load_ours import setup_server
from bench._load_profile import Recording, summarize_collapsed
from bench._load_report import PAYLOADS
from bench._load_sessions import SourceSessions, place_sessions
from bench._load_settings import ROOT, LoadSettings
from bench._load_workloads import REAL_COMPLETION, missing_endpoints
from bench.peers import READY_PREFIX

__all__ = ["run_ours", "run_peer", "run_typescript"]


def _address(settings: LoadSettings, tmp: str, name: str) -> str:
    return "tcp://127.0.0.1:0" if settings.transport == "tcp" else f"ipc://{tmp}/{name}.sock"


#: The echo endpoint of each agent-actors echo stack: the targets are read on ``ours``, the
#: ``def`` handler (the peers' echo handlers are plain functions too; gRPC aio's is a
#: coroutine), and ``oursAsync`` is reported beside it.
ECHO_CALLS = {"ours": "diagnostics/echoSync", "oursAsync": "diagnostics/echo"}
_ECHO_CALL_OF = {**ECHO_CALLS, typescript.STACK: typescript.ECHO_CALL}


def _echo_jobs(
    stack: str, address: str, settings: LoadSettings, level: int, payload: int, agents: list[str]
) -> list[Job]:
    calls = (_ECHO_CALL_OF.get(stack, "diagnostics/echo"),)
    return [
        Job(
            stack=stack,
            calls=calls,
            address=address,
            worker=i,
            concurrency=m,
            duration=settings.duration,
            payload_bytes=payload,
            agents=agents,
            warmup_calls=settings.warmup_calls,
            seed=settings.seed,
        )
        for i, m in enumerate(split_concurrency(level, settings.processes))
    ]


def _run_echo(
    report: dict[str, Any],
    stack: str,
    address: str,
    monitor: ServerMonitor,
    settings: LoadSettings,
    agents: list[str],
) -> None:
    for key, size in PAYLOADS.items():
        levels = settings.in_flight if key == "64B" else settings.in_flight_large
        if not levels:
            continue
        phases = report["echo"][key]["stacks"].setdefault(stack, [])
        for level in levels:
            progress(f"{stack}: echo {key}, {level} in flight, {settings.duration:g} s")
            jobs = _echo_jobs(stack, address, settings, level, size, agents)
            phases.append({"inFlight": level, **_undisturbed_phase(jobs, monitor, settings)})
        if key == "64B" and stack in settings.profile:
            # Its own phase: py-spy's sampling must not slow the measurement the targets read.
            level = settings.target_in_flight
            progress(f"{stack}: echo 64B, {level} in flight, under py-spy")
            jobs = _echo_jobs(stack, address, settings, level, size, agents)
            _profiled_phase(report, stack, jobs, monitor, settings.duration)


def _undisturbed_phase(
    jobs: list[Job], monitor: ServerMonitor, settings: LoadSettings
) -> dict[str, Any]:
    """Run a phase; while other programs took more than ``settings.disturbed_cpus`` CPUs
    during it, run it again (at most ``settings.retries`` times) and keep the quietest."""
    best: dict[str, Any] | None = None
    attempts = 0
    for attempt in range(1 + settings.retries):
        attempts += 1
        phase = run_phase(jobs, monitor) | {"keptAttempt": attempt + 1}
        if best is None or phase["otherCpuSeconds"] < best["otherCpuSeconds"]:
            best = phase
        if phase["otherCpuSeconds"] <= settings.disturbed_cpus * settings.duration:
            break
        progress(
            f"  other programs used {phase['otherCpuSeconds']:.2f} CPU s of the "
            f"{settings.duration:g} s window; "
            + ("running it again" if attempt < settings.retries else "keeping the quietest")
        )
    assert best is not None
    return best | {"attempts": attempts}


def _profiled_phase(
    report: dict[str, Any], stack: str, jobs: list[Job], monitor: ServerMonitor, duration: float
) -> dict[str, Any]:
    """Run a phase while py-spy records the server; the summary goes to ``report["profiles"]``."""
    out = Path(report["profileDir"]) / f"{report['profileStem']}-profile-{stack}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    recording: list[Recording] = []
    try:
        phase = run_phase(
            jobs, monitor, at_start=lambda: recording.append(Recording(monitor.pid, duration, out))
        )
        error = recording[0].finish() if recording else "the phase never started"
    finally:
        for r in recording:
            r.stop()
    entry: dict[str, Any] = {
        "inFlight": sum(j.concurrency for j in jobs),
        "callsPerSecond": phase["callsPerSecond"],
    }
    if error:
        entry["error"] = error
    else:
        entry |= {"raw": str(out), **summarize_collapsed(out.read_text(encoding="utf-8"))}
    report.setdefault("profiles", {})[stack] = entry
    return phase


def run_ours(report: dict[str, Any], settings: LoadSettings, tmp: str) -> None:
    """Start ``python -m actors serve`` and run every agent-actors workload against it."""
    data = Path(tmp) / "data"
    argv = [sys.executable, "-m", "actors", "serve"]
    argv += ["--endpoint", _address(settings, tmp, "ours"), "--data", str(data)]
    sources = _place_sources(report, settings, Path(tmp), data)
    if sources is not None:
        argv += ["--sessions", str(sources.root)]
    progress("ours: starting `python -m actors serve`")
    with server_process(argv, ready_prefix=READY_LINE, cwd=ROOT) as addresses:
        address = require_loopback(addresses[0])
        monitor = ServerMonitor(find_child(argv))
        agents, served = trio.run(setup_server, address, settings.agents, str(settings.cwd))
        everything = settings.only is None
        for stack in ECHO_CALLS if everything else ():
            _run_echo(report, stack, address, monitor, settings, agents)
        base = Job(
            stack="ours",
            address=address,
            agents=agents,
            warmup_calls=settings.warmup_calls,
            seed=settings.seed,
            key_interval=settings.key_interval,
            handler_seconds=settings.handler_seconds,
        )
        if everything:
            _run_cancel(report, settings, base, monitor, agents, key="cancel")
            _run_keystroke(
                report, settings, base, monitor, served, calls=settings.completion, key="keystroke"
            )
        # The reference completion at every level of typists; its first level is also the
        # report's ``keystrokeReferences`` (once the reference endpoints are served).
        levels = run_keystroke_levels(report, settings, base, monitor, served)
        if levels and everything and settings.completion != REAL_COMPLETION:
            report["keystrokeReferences"] = levels[0]
        if everything:
            _run_prepare(report, settings, base, monitor, served, sources)


def _place_sources(
    report: dict[str, Any], settings: LoadSettings, tmp: Path, data: Path
) -> SourceSessions | None:
    """Copy and index the real session logs ``prepare`` references (``report["sessions"]``)."""
    origin = settings.sessions_from
    if origin is None:
        report["sessions"] = {"skipped": "no session logs asked for (--sessions-from none)"}
        return None
    if not origin.is_dir():
        report["sessions"] = {"skipped": f"DSH session logs not found at {origin}"}
        return None
    progress(f"ours: copying and indexing the session logs of {origin}")
    try:
        sources = place_sessions(origin, tmp / "dsh-sessions", data)
    except (BenchError, OSError) as exc:
        report["sessions"] = {"skipped": f"{type(exc).__name__}: {exc}"}
        return None
    report["sessions"] = sources.describe()
    return sources


def _run_keystroke(
    report: dict[str, Any],
    settings: LoadSettings,
    base: Job,
    monitor: ServerMonitor,
    served: list[str],
    *,
    calls: tuple[str, ...],
    key: str,
) -> None:
    missing = missing_endpoints(calls, served)
    if missing:
        report[key] = {"skipped": f"the server does not serve {', '.join(missing)}"}
        return
    typists = settings.typists[0]
    progress(
        f"ours: keystroke ({', '.join(calls)}), {typists} typists, "
        f"{settings.keystroke_duration:g} s"
    )
    jobs = keystroke_jobs(base, settings, typists, calls)
    report[key] = {
        "completionCalls": list(calls),
        "typists": typists,
        "keyIntervalSeconds": list(settings.key_interval),
        "handlerSeconds": list(settings.handler_seconds),
        **run_phase(jobs, monitor),
    }


def _run_prepare(
    report: dict[str, Any],
    settings: LoadSettings,
    base: Job,
    monitor: ServerMonitor,
    served: list[str],
    sources: SourceSessions | None,
) -> None:
    name = "sessionReferenceResolver/prepare"
    if missing_endpoints([name], served):
        report["prepare"] = {"skipped": f"the server does not serve {name} yet"}
        return
    if sources is None:
        reason = report["sessions"]["skipped"]
        report["prepare"] = {"skipped": f"no real-size session logs: {reason}"}
        return
    progress(
        f"ours: prepare over {len(sources.ids)} real session logs, "
        f"{settings.prepare_in_flight} in flight"
    )
    jobs = [
        attrs.evolve(
            base,
            worker=i,
            concurrency=m,
            calls=(name,),
            sources=sources.ids,
            duration=settings.duration,
        )
        for i, m in enumerate(split_concurrency(settings.prepare_in_flight, settings.processes))
    ]
    report["prepare"] = {
        "inFlight": settings.prepare_in_flight,
        "sources": sources.describe(),
        **run_phase(jobs, monitor),
    }


def _run_cancel(
    report: dict[str, Any],
    settings: LoadSettings,
    base: Job,
    monitor: ServerMonitor,
    agents: list[str],
    *,
    key: str,
) -> None:
    """Cancel probes from ``base.stack``'s client, idle and beside its own echo load, written
    to ``report[key]``."""
    stack = base.stack
    probe = attrs.evolve(base, workload="cancel-probe", duration=settings.cancel_duration)
    progress(
        f"{stack}: cancel-to-quiescence probes on an idle server, {settings.cancel_duration} s"
    )
    idle = run_phase([attrs.evolve(probe, probe_settle=0.005)], monitor)
    level = settings.target_in_flight
    progress(f"{stack}: cancel probes beside echo 64 B at {level} in flight")
    # The probe's sleep must be past the queue of echo calls before it is cancelled.
    load = _echo_jobs(stack, base.address, settings, level, 64, agents)
    load = [attrs.evolve(j, duration=settings.cancel_duration) for j in load]
    loaded_probe = attrs.evolve(probe, worker=len(load), probe_settle=0.05)
    loaded = run_phase([*load, loaded_probe], monitor)
    report[key] = {
        "idle": _cancel_entry(idle, 0.005, ""),
        "underLoad": _cancel_entry(loaded, 0.05, f" (echo 64 B, {level} in flight)")
        | {"echoCallsPerSecond": loaded["callsPerSecond"]},
    }


def _cancel_entry(phase: dict[str, Any], settle: float, note: str) -> dict[str, Any]:
    empty = {"count": 0, "p50Us": None, "p90Us": None, "p99Us": None, "p999Us": None}
    return {
        "latency": phase["series"].get("cancelToQuiescence", empty | {"maxUs": None, "cdf": []}),
        "settleSeconds": settle,
        "cancelledWhileQueued": phase["counters"].get("cancelledWhileQueued", 0),
        "loadNote": note,
    }


def run_typescript(report: dict[str, Any], settings: LoadSettings, tmp: str) -> None:
    """Start ``python -m actors serve`` and run the TypeScript client's workloads against it:
    echo at each level, then the cancel probes (``report["cancelTypescript"]``)."""
    stack = typescript.STACK
    argv = [sys.executable, "-m", "actors", "serve"]
    argv += ["--endpoint", _address(settings, tmp, stack), "--data", str(Path(tmp) / stack)]
    progress(f"{stack}: starting `python -m actors serve`")
    with server_process(argv, ready_prefix=READY_LINE, cwd=ROOT) as addresses:
        address = require_loopback(addresses[0])
        monitor = ServerMonitor(find_child(argv))
        agents, _ = trio.run(setup_server, address, settings.agents, str(settings.cwd))
        _run_echo(report, stack, address, monitor, settings, agents)
        base = Job(
            stack=stack,
            address=address,
            agents=agents,
            warmup_calls=settings.warmup_calls,
            seed=settings.seed,
        )
        _run_cancel(report, settings, base, monitor, agents, key="cancelTypescript")


def run_peer(report: dict[str, Any], settings: LoadSettings, tmp: str, name: str) -> None:
    """Start peer ``name``'s echo server and run the echo workload against it."""
    argv = [sys.executable, "-m", "bench.peers", name, _address(settings, tmp, name)]
    progress(f"{name}: starting its echo server")
    with server_process(argv, ready_prefix=READY_PREFIX, cwd=ROOT) as addresses:
        monitor = ServerMonitor(find_child(argv))
        _run_echo(report, name, require_loopback(addresses[0]), monitor, settings, [])
