"""Load benchmark: agent-actors under many clients and many agents, beside its Python peers.

``python -m bench.load [--quick] [--transport tcp|ipc] [--processes N] [--in-flight 1,8,...
| --per-process M,...] [--agents K] [--duration S] [--peers raw,zerorpc,grpc,rpyc,pyro5]
[--no-typescript] [--sessions-from DIR] [--typists 64,128,256] [--keystroke-duration S]
[--only keystroke] [--time-limit S] [--out PATH]`` (``--help`` lists every option)

One server at a time (agent-actors, then again for its TypeScript client, then each peer) runs
in its own process on loopback; the load comes from N client processes with M calls in flight
each, spread over K agents. Workloads: echo of 64 B and 64 KiB (every stack), keystroke-rate
completion with latest-wins cancellation (the reference completion at each level of typists,
with goodput and recovery: issue 23's overload levels), prepare over real DSH session logs, and
cancel-to-quiescence probes, idle and under load (from the Python and the TypeScript client).
``docs/benchmarks.md`` explains every number.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
import zmq

from bench import _load_typescript as typescript
from bench._common import (
    BenchError,
    Stopped,
    bench_parser,
    in_flight_levels,
    machine_info,
    option_changes,
    progress,
    publish,
    record_steal,
    run_guarded,
    steal_seconds,
)
from bench._load_generator import time_limit
from bench._load_plots import plot_report
from bench._load_profile import py_spy
from bench._load_report import (
    PAYLOADS,
    echo_ratios,
    evaluate_targets,
    render_tables,
    typescript_ratios,
)
from bench._load_runs import run_ours, run_peer, run_typescript
from bench._load_sessions import FIXTURES
from bench._load_settings import DEFAULT_OUT, LoadSettings
from bench._load_workloads import CALLS, DEFAULT_COMPLETION
from bench.peers import PEERS
from wire import WireError

__all__ = ["LoadSettings", "main", "run_load"]


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def run_load(
    settings: LoadSettings, *, profile_dir: Path = DEFAULT_OUT.parent, profile_stem: str = "load"
) -> dict[str, Any]:
    """Run every stack one after the other; return the report (see ``docs/benchmarks.md``).

    Profiles (``settings.profile``) are written to ``profile_dir/STEM-profile-STACK.txt``.
    """
    started_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    clock = time.perf_counter()
    steal = steal_seconds()
    config = attrs.asdict(settings) | {
        "cwd": str(settings.cwd),
        "sessions_from": None if settings.sessions_from is None else str(settings.sessions_from),
    }
    report: dict[str, Any] = {
        "benchmark": "load",
        "startedAt": started_at,
        "config": {
            "quick": settings.quick,
            "transport": settings.transport,
            "processes": settings.processes,
            "agents": settings.agents,
            "durationSeconds": settings.duration,
            "targetInFlight": settings.target_in_flight,
            "typists": list(settings.typists),
            "keystrokeDurationSeconds": settings.keystroke_duration,
            "only": settings.only,
            "settings": config,
        },
        "machine": machine_info(),
        "profileDir": str(profile_dir),
        "profileStem": profile_stem,
        "stacks": {
            "ours": {
                "label": "agent-actors (def)",
                "version": _version("agent-actors"),
                "concurrencyModel": "one wire client per process, one trio task per call; "
                "the server runs the def handler inline",
                "status": "pending",
            },
            "oursAsync": {
                "label": "agent-actors (async def)",
                "version": _version("agent-actors"),
                "concurrencyModel": "one wire client per process, one trio task per call; "
                "the server runs the async def handler in a task of its own",
                "status": "pending",
            },
        },
        "echo": {
            key: {
                "payloadBytes": size,
                "inFlight": []
                if settings.only
                else list(settings.in_flight if key == "64B" else settings.in_flight_large),
                "stacks": {},
            }
            for key, size in PAYLOADS.items()
        },
    }
    if settings.typescript:
        report["stacks"][typescript.STACK] = typescript.describe()
    for name in settings.peers:
        peer = PEERS[name]
        report["stacks"][name] = {
            "label": peer.label,
            "version": _version(peer.distribution),
            "concurrencyModel": peer.concurrency_model,
            "status": "pending",
        }
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp, time_limit(settings.time_limit):
        for name, stack in report["stacks"].items():
            if name == "oursAsync" and settings.only:
                stack |= {"status": "skipped", "reason": f"--only {settings.only}"}
                continue
            if name == "oursAsync":
                # Measured by run_ours against the same server as ``ours``.
                stack["status"] = report["stacks"]["ours"]["status"]
                if "reason" in report["stacks"]["ours"]:
                    stack["reason"] = report["stacks"]["ours"]["reason"]
                continue
            if name == "ours":
                reason = None
            elif name == typescript.STACK:
                reason = typescript.prepare_client()
            else:
                reason = PEERS[name].missing()
            if reason:
                stack |= {"status": "skipped", "reason": reason}
                progress(f"{name}: skipped: {reason}")
                continue
            try:
                if name == "ours":
                    run_ours(report, settings, tmp)
                elif name == typescript.STACK:
                    run_typescript(report, settings, tmp)
                else:
                    run_peer(report, settings, tmp, name)
            except (BenchError, WireError, zmq.ZMQError, trio.TooSlowError, OSError) as exc:
                stack |= {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
                progress(f"{name}: failed: {exc}")
                continue
            stack["status"] = "measured"
    report["ratios"] = echo_ratios(report["echo"])
    report["typescriptRatios"] = typescript_ratios(report["echo"])
    report["targets"] = evaluate_targets(report)
    report["allPassed"] = all(t["passed"] for t in report["targets"])
    report["elapsedSeconds"] = round(time.perf_counter() - clock, 3)
    # Another busy process on the machine skews every figure: the load average tells, and so
    # does the host's steal for a busy neighbour of this VM.
    report["machine"]["loadAverageAtEnd"] = list(os.getloadavg())
    record_steal(report["machine"], steal, time.perf_counter() - clock)
    return report


def _levels_or_none(text: str) -> tuple[int, ...]:
    return () if text.strip() == "none" else in_flight_levels(text)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    return () if names == ("none",) else names


def _parser() -> argparse.ArgumentParser:
    parser = bench_parser(
        "python -m bench.load",
        __doc__,
        out=DEFAULT_OUT,
        quick_help="a smoke run of well under 30 s",
        out_help="JSON report; PNGs go beside it",
    )
    add = parser.add_argument
    add("--transport", choices=("tcp", "ipc"), help="loopback transport (default tcp)")
    add("--processes", type=int, help="load-generator processes N (default 2)")
    add(
        "--in-flight",
        type=in_flight_levels,
        help="echo 64 B levels: calls in flight in all, N x M (default 1,8,32,128,256)",
    )
    add(
        "--per-process",
        type=in_flight_levels,
        metavar="M,...",
        help="echo 64 B levels as calls in flight per process M (instead of --in-flight)",
    )
    add(
        "--in-flight-large",
        type=_levels_or_none,
        help="echo 64 KiB levels, or none (default 16,128)",
    )
    add("--duration", type=float, help="seconds per phase (default 3)")
    add("--agents", type=int, help="agents K the calls are spread over (default 8)")
    add("--cwd", type=Path, help="the agents' working directory (default: this project)")
    add(
        "--sessions-from",
        metavar="DIR|none",
        help="raw DSH logs (*.jsonl) served and referenced by prepare, copied into a temporary "
        f"directory (default: the real fixtures, {FIXTURES})",
    )
    add("--peers", type=_names, help=f"peers to run, or none (default {','.join(PEERS)})")
    add(
        "--typescript",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the TypeScript client (clients/typescript) as a stack: echo and cancel "
        "probes; built with npm when dist/ is missing or stale, skipped without Node.js "
        "(default on)",
    )
    add(
        "--typists",
        type=in_flight_levels,
        metavar="T,...",
        help="simulated typists: one keystroke phase with fileReferences/list + candidates per "
        "level, e.g. 64,128,256 (default 64; the stand-in runs at the first level)",
    )
    add(
        "--keystroke-duration",
        type=float,
        metavar="S",
        help="seconds per keystroke phase (default 6; issue 23's overload levels use 60)",
    )
    add(
        "--only",
        choices=("keystroke",),
        help="keystroke: only agent-actors' keystroke levels (no echo, cancel probes, stand-in, "
        "prepare, peers or TypeScript client)",
    )
    add(
        "--completion",
        type=_names,
        help=f"calls per keystroke (default {','.join(DEFAULT_COMPLETION)}; known: "
        f"{', '.join(CALLS)})",
    )
    add(
        "--cancel-duration",
        type=float,
        metavar="S",
        help="seconds of cancel probes, on an idle server and again under echo load (default 20)",
    )
    add("--target-in-flight", type=int, help="level where targets are read (default 128)")
    add("--time-limit", type=float, help="seconds after which no phase starts (default 1800)")
    add("--retries", type=int, help="re-runs of an echo phase disturbed by others (default 2)")
    add(
        "--profile",
        type=_names,
        help="stacks whose server py-spy records at the target level, e.g. ours,raw, or none "
        "(default ours when py-spy is installed)",
    )
    add("--plots", type=Path, help="directory for the PNGs (default: beside the JSON)")
    return parser


_FIELDS = (
    "transport",
    "processes",
    "in_flight",
    "in_flight_large",
    "duration",
    "agents",
    "cwd",
    "peers",
    "typescript",
    "typists",
    "keystroke_duration",
    "only",
    "completion",
    "cancel_duration",
    "target_in_flight",
    "profile",
    "retries",
    "time_limit",
)
_POSITIVE = (
    "processes",
    "duration",
    "agents",
    "keystroke_duration",
    "cancel_duration",
    "target_in_flight",
    "time_limit",
)


def _settings(parser: argparse.ArgumentParser, args: argparse.Namespace) -> LoadSettings:
    settings = LoadSettings.quick_run() if args.quick else LoadSettings()
    if args.per_process is not None:
        if args.in_flight is not None:
            parser.error("give --in-flight or --per-process, not both")
        args.in_flight = tuple(m * (args.processes or settings.processes) for m in args.per_process)
    changes = option_changes(parser, args, _FIELDS, positive=_POSITIVE)
    if changes.get("retries", 0) < 0:
        parser.error("--retries must not be negative")
    unknown = [p for p in changes.get("peers", ()) if p not in PEERS]
    if unknown:
        parser.error(f"unknown peers {', '.join(unknown)} (known: {', '.join(PEERS)})")
    stacks = ("ours", "oursAsync", typescript.STACK, *PEERS)
    if any(p not in stacks for p in changes.get("profile", ())):
        parser.error(f"--profile takes stacks among {', '.join(stacks)}")
    if changes.get("profile") and py_spy() is None:
        parser.error("--profile needs py-spy (pip install -e '.[bench]')")
    if any(c not in CALLS for c in changes.get("completion", ())):
        parser.error(f"--completion takes names among {', '.join(CALLS)}")
    if "in_flight" in changes and "target_in_flight" not in changes:
        changes["target_in_flight"] = 128 if 128 in changes["in_flight"] else max(args.in_flight)
    if changes.get("only"):
        # The other stacks only run echo and cancel probes.
        changes |= {"peers": (), "typescript": False, "profile": ()}
    if args.sessions_from is not None:
        changes["sessions_from"] = (
            None if args.sessions_from == "none" else Path(args.sessions_from)
        )
    return attrs.evolve(settings, **changes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    settings = _settings(parser, args)
    out: Path = args.out
    expected = (BenchError, WireError, zmq.ZMQError, trio.TooSlowError, OSError)
    report = run_guarded(
        "bench.load",
        lambda: run_load(settings, profile_dir=out.parent, profile_stem=out.stem),
        expected,
    )
    if isinstance(report, Stopped):
        return report.status
    plots = plot_report(report, args.plots or out.parent, stem=out.stem)
    report["plots"] = [str(p) for p in plots]
    return publish(out, report, table=render_tables(report), plots=plots)


if __name__ == "__main__":
    sys.exit(main())
