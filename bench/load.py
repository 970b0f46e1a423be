"""Load benchmark: agent-actors under many clients and many agents, beside its Python peers.

``python -m bench.load [--quick] [--transport tcp|ipc] [--processes N] [--in-flight 1,8,...]
[--duration S] [--agents K] [--peers raw,zerorpc,grpc,rpyc,pyro5] [--out PATH]``

One server at a time (agent-actors, then each peer) runs in its own process on loopback; the
load comes from N client processes with M calls in flight each. Workloads: echo of 64 B and
64 KiB (every stack), keystroke-rate completion with latest-wins cancellation, prepare (once
served), and cancel-to-quiescence probes, idle and under load. ``docs/benchmarks.md`` explains
every number.
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

from bench._common import (
    BenchError,
    explain_failure,
    machine_info,
    progress,
    sigterm_as_interrupt,
    write_json,
)
from bench._load_profile import py_spy
from bench._load_report import (
    PAYLOADS,
    echo_ratios,
    evaluate_targets,
    plot_report,
    render_tables,
)
from bench._load_runs import run_ours, run_peer
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
    config = attrs.asdict(settings) | {"cwd": str(settings.cwd)}
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
            "settings": config,
        },
        "machine": machine_info(),
        "profileDir": str(profile_dir),
        "profileStem": profile_stem,
        "stacks": {
            "ours": {
                "label": "agent-actors",
                "version": _version("agent-actors"),
                "concurrencyModel": "one wire client per process, one trio task per call",
                "status": "pending",
            }
        },
        "echo": {
            key: {
                "payloadBytes": size,
                "inFlight": list(settings.in_flight if key == "64B" else settings.in_flight_large),
                "stacks": {},
            }
            for key, size in PAYLOADS.items()
        },
    }
    for name in settings.peers:
        peer = PEERS[name]
        report["stacks"][name] = {
            "label": peer.label,
            "version": _version(peer.distribution),
            "concurrencyModel": peer.concurrency_model,
            "status": "pending",
        }
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        for name, stack in report["stacks"].items():
            reason = None if name == "ours" else PEERS[name].missing()
            if reason:
                stack |= {"status": "skipped", "reason": reason}
                progress(f"{name}: skipped: {reason}")
                continue
            try:
                if name == "ours":
                    run_ours(report, settings, tmp)
                else:
                    run_peer(report, settings, tmp, name)
            except (BenchError, WireError, zmq.ZMQError, trio.TooSlowError, OSError) as exc:
                stack |= {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
                progress(f"{name}: failed: {exc}")
                continue
            stack["status"] = "measured"
    report["ratios"] = echo_ratios(report["echo"])
    report["targets"] = evaluate_targets(report)
    report["allPassed"] = all(t["passed"] for t in report["targets"])
    report["elapsedSeconds"] = round(time.perf_counter() - clock, 3)
    # Another busy process on the machine skews every figure: the load average tells.
    report["machine"]["loadAverageAtEnd"] = list(os.getloadavg())
    return report


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,8,128, got {text!r}") from None
    if not levels or any(n < 1 for n in levels):
        raise argparse.ArgumentTypeError("calls in flight must be positive")
    return tuple(sorted(set(levels)))


def _levels_or_none(text: str) -> tuple[int, ...]:
    return () if text.strip() == "none" else _levels(text)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    return () if names == ("none",) else names


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.load", description=(__doc__ or "").split("\n")[0]
    )
    add = parser.add_argument
    add("--quick", action="store_true", help="a smoke run of well under 30 s")
    add("--transport", choices=("tcp", "ipc"), help="loopback transport (default tcp)")
    add("--processes", type=int, help="load-generator processes N (default 2)")
    add("--in-flight", type=_levels, help="echo 64 B levels (default 1,8,32,128,256)")
    add(
        "--in-flight-large",
        type=_levels_or_none,
        help="echo 64 KiB levels, or none (default 16,128)",
    )
    add("--duration", type=float, help="seconds per phase (default 3)")
    add("--agents", type=int, help="agents K the calls are spread over (default 8)")
    add("--cwd", type=Path, help="the agents' working directory (default: this project)")
    add("--peers", type=_names, help=f"peers to run, or none (default {','.join(PEERS)})")
    add("--typists", type=int, help="simulated typists (default 64)")
    add(
        "--completion",
        type=_names,
        help=f"calls per keystroke (default {','.join(DEFAULT_COMPLETION)}; known: "
        f"{', '.join(CALLS)})",
    )
    add("--target-in-flight", type=int, help="level where targets are read (default 128)")
    add("--retries", type=int, help="re-runs of an echo phase disturbed by others (default 2)")
    add(
        "--profile",
        type=_names,
        help="stacks whose server py-spy records at the target level, e.g. ours,raw",
    )
    add("--out", type=Path, default=DEFAULT_OUT, help="JSON report; PNGs go beside it")
    add("--plots", type=Path, help="directory for the PNGs (default: beside the JSON)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    settings = LoadSettings.quick_run() if args.quick else LoadSettings()
    fields = (
        "transport",
        "processes",
        "in_flight",
        "in_flight_large",
        "duration",
        "agents",
        "cwd",
        "peers",
        "typists",
        "completion",
        "target_in_flight",
        "profile",
        "retries",
    )
    changes = {f: getattr(args, f) for f in fields if getattr(args, f) is not None}
    for key in ("processes", "duration", "agents", "typists", "target_in_flight"):
        if key in changes and changes[key] <= 0:
            parser.error(f"--{key.replace('_', '-')} must be positive")
    if changes.get("retries", 0) < 0:
        parser.error("--retries must not be negative")
    unknown = [p for p in changes.get("peers", ()) if p not in PEERS]
    if unknown:
        parser.error(f"unknown peers {', '.join(unknown)} (known: {', '.join(PEERS)})")
    if any(p not in ("ours", *PEERS) for p in changes.get("profile", ())):
        parser.error(f"--profile takes stacks among ours, {', '.join(PEERS)}")
    if changes.get("profile") and py_spy() is None:
        parser.error("--profile needs py-spy (pip install -e '.[bench]')")
    if any(c not in CALLS for c in changes.get("completion", ())):
        parser.error(f"--completion takes names among {', '.join(CALLS)}")
    if "in_flight" in changes and "target_in_flight" not in changes:
        changes["target_in_flight"] = 128 if 128 in changes["in_flight"] else max(args.in_flight)
    settings = attrs.evolve(settings, **changes)
    out: Path = args.out
    try:
        with sigterm_as_interrupt():
            report = run_load(settings, profile_dir=out.parent, profile_stem=out.stem)
    except BaseException as exc:
        expected = (BenchError, WireError, zmq.ZMQError, trio.TooSlowError, OSError)
        status = explain_failure("bench.load", exc, expected)
        if status is None:
            raise
        return status
    plots = plot_report(report, args.plots or out.parent, stem=out.stem)
    report["plots"] = [str(p) for p in plots]
    write_json(out, report)
    print(render_tables(report))
    print(f"\nreport: {out}")
    for path in plots:
        print(f"plot:   {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
