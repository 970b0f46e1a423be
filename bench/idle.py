"""Idle benchmark: the CPU and the wake-ups of a server that serves nobody.

``python -m bench.idle [--quick] [--workers 0,4] [--settle S] [--window S] [--out PATH]``

A server left running on a laptop must cost close to nothing while nobody calls it: its timers
(heartbeats, leases, the coordinator's watches) should sleep until their next deadline instead
of polling. The target (issue 23, item 3): idle CPU of ``serve`` and of ``serve --workers 4`` under
0.5 % of a core. For each worker count (0: plain ``serve``), this starts ``python -m actors
serve --endpoint ipc://TMP/s.sock --data TMP/data [--workers N]``, creates nothing, waits
``--settle`` s for the start-up work to finish, then measures over ``--window`` s. Then it
uses the server (``--after-use``): creates agents until their shards' owners include every
worker, calls each once, waits the given seconds (by default long enough for the pools to
close idle connections, `actors.cluster._pool.IDLE_CLOSE`) and measures again: a cluster that
has served calls keeps connections between its processes that a fresh one does not have yet.

- **CPU**: for every thread of the server's processes (the server, or the supervisor and its
  workers, found by their parent pid), the first field of ``/proc/PID/task/TID/schedstat``:
  the nanoseconds it ran, counted by the scheduler at every switch. ``utime``/``stime`` are
  sampled in 10 ms ticks: at 0.1 % of a core (1 ms per second) they read a tick or none.
- **wake-ups**: ``voluntary_ctxt_switches`` + ``nonvoluntary_ctxt_switches`` of the same threads
  (``/proc/PID/task/TID/status``) per second: a timer that sleeps until its deadline wakes a
  few times a second, one that polls wakes at its polling rate.

A thread that ends inside the window takes its counts with it (``threadsEnded`` says how many
did); a worker that restarts inside the window fails the run. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from actors._serve import READY_LINE
from actors.cluster._pool import IDLE_CLOSE
from bench._common import (
    BenchError,
    Stopped,
    Target,
    bench_parser,
    format_table,
    machine_info,
    option_changes,
    progress,
    publish_with_plot,
    record_steal,
    run_guarded,
    server_env,
    server_process,
    steal_seconds,
    steal_warning,
    target_rows,
)
from bench._scaling_load import resolve_routes
from wire import open_client

__all__ = ["CPU_LIMIT_PERCENT", "Settings", "main", "run_benchmark"]

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "idle.json"
#: The target: an idle server's CPU, all its processes together, in % of one core.
CPU_LIMIT_PERCENT = 0.5
#: Agents created at most while looking for one on every worker.
MAX_AGENTS = 256


@attrs.frozen(kw_only=True)
class Settings:
    #: Worker counts, one server each (0: plain ``serve``).
    workers: tuple[int, ...] = (0, 4)
    #: Seconds between the ready line and the window (start-up work finishing).
    settle: float = 10.0
    #: Seconds measured.
    window: float = 60.0
    #: Seconds between using the server and measuring it again (``None``: not used). Past two
    #: idle periods of the pools, which close an idle client after one to two of them.
    after_use: float | None = 2 * IDLE_CLOSE + 5
    quick: bool = False

    @classmethod
    def quick_run(cls) -> Settings:
        return cls(settle=3.0, window=5.0, after_use=1.0, quick=True)


@attrs.frozen
class ThreadCounts:
    """What one thread has used so far: nanoseconds on a CPU and context switches."""

    cpu_ns: int
    switches: int


# -- /proc ------------------------------------------------------------------------------------


def _thread_counts(pid: int) -> dict[int, ThreadCounts]:
    """Every live thread of ``pid``, by thread id (a thread that ends while read is skipped)."""
    counts = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as schedstat:
                cpu_ns = int(schedstat.read().split()[0])
            with open(f"/proc/{pid}/task/{tid}/status", encoding="utf-8") as status:
                lines = status.read().splitlines()
        except (FileNotFoundError, ProcessLookupError):
            continue
        switches = sum(
            int(line.split()[1])
            for line in lines
            if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"))
        )
        counts[int(tid)] = ThreadCounts(cpu_ns, switches)
    return counts


def _parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _children(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (a supervisor's workers)."""
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and _parent_pid(int(e)) == parent]


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def _server_pid(endpoint: str) -> int:
    """The pid of the server this process started on ``endpoint`` (``server_process`` yields
    its addresses only; its argv names the endpoint)."""
    for pid in _children(os.getpid()):
        if endpoint in _argv(pid):
            return pid
    raise BenchError(f"no child process serving {endpoint}")


def _role(pid: int, server: int, workers: int) -> str:
    """``server`` or ``supervisor`` for the process started, a worker's ``--id`` (``w1``...)."""
    if pid == server:
        return "supervisor" if workers else "server"
    argv = _argv(pid)
    if "--id" in argv[:-1]:
        return argv[argv.index("--id") + 1]
    return f"child {pid}"


# -- the run ----------------------------------------------------------------------------------


def _label(workers: int) -> str:
    return f"serve --workers {workers}" if workers else "serve"


def _run_label(run: dict[str, Any]) -> str:
    """``serve --workers 4``, or ``serve --workers 4, after use``."""
    label = _label(run["workers"])
    return f"{label}, after use" if run.get("phase") == "used" else label


def _measure(server: int, workers: int, window: float) -> dict[str, Any]:
    """Every process's CPU and wake-ups over ``window`` s, with nothing asked of the server."""
    processes = [server, *_children(server)]
    if len(processes) != workers + 1:
        raise BenchError(f"{_label(workers)}: {len(processes) - 1} worker processes, not {workers}")
    before = {pid: _thread_counts(pid) for pid in processes}
    started = time.perf_counter()
    time.sleep(window)
    after = {pid: _thread_counts(pid) for pid in processes}
    elapsed = time.perf_counter() - started
    if sorted(_children(server)) != sorted(processes[1:]):
        raise BenchError(f"{_label(workers)}: a worker exited or restarted during the window")
    entries: list[dict[str, Any]] = []
    for pid in processes:
        old, new = before[pid], after[pid]
        zero = ThreadCounts(0, 0)
        cpu_ns = sum(now.cpu_ns - old.get(tid, zero).cpu_ns for tid, now in new.items())
        switches = sum(now.switches - old.get(tid, zero).switches for tid, now in new.items())
        entries.append(
            {
                "role": _role(pid, server, workers),
                "cpuPercent": round(cpu_ns / (elapsed * 1e9) * 100, 4),
                "wakeupsPerSecond": round(switches / elapsed, 2),
                "threads": len(new),
                "threadsEnded": len(old.keys() - new.keys()),
            }
        )
    entries.sort(
        key=lambda e: (e["role"] not in ("server", "supervisor"), len(e["role"]), e["role"])
    )
    return {
        "workers": workers,
        "windowSeconds": round(elapsed, 3),
        "processes": entries,
        "totalCpuPercent": round(sum(e["cpuPercent"] for e in entries), 4),
        "totalWakeupsPerSecond": round(sum(e["wakeupsPerSecond"] for e in entries), 2),
    }


async def _use(endpoint: str, cwd: str) -> dict[str, int]:
    """Create agents until every worker owns one of them (one agent on a plain server), and
    call each once; how many agents that took and how many workers they reached."""
    async with open_client(endpoint, name="bench.idle") as client:
        cluster = (await client.call("system/describe")).get("cluster") or {}
        workers = set(cluster.get("workers", {}).values())  # their endpoints
        reached: set[str] = set()
        agents: list[str] = []
        while len(agents) < MAX_AGENTS and (not agents or reached != workers):
            created = await client.call("agents/create", {"cwd": cwd})
            agents.append(created["agentId"])
            if workers:
                reached.update(resolve_routes(cluster, agents[-1:]).values())
        for agent in agents:
            await client.call("diagnostics/echo", {"agentId": agent, "payload": "idle"})
    return {"agentsCreated": len(agents), "workersReached": len(reached)}


def _announce(label: str, run: dict[str, Any]) -> None:
    progress(
        f"{label}: {run['totalCpuPercent']:.3f} % of a core, "
        f"{run['totalWakeupsPerSecond']:.1f} wake-ups/s"
    )


def _run_one(workers: int, settings: Settings, env: dict[str, str]) -> list[dict[str, Any]]:
    """Start the server for ``workers``, let it settle, measure it; then use it, wait and
    measure it again; it is stopped on leaving."""
    label = _label(workers)
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as tmp:
        endpoint = f"ipc://{tmp}/s.sock"
        argv = [sys.executable, "-m", "actors", "serve", "--endpoint", endpoint]
        argv += ["--data", f"{tmp}/data", *(["--workers", str(workers)] if workers else [])]
        progress(f"{label}: starting")
        with server_process(argv, ready_prefix=READY_LINE, cwd=ROOT, env=env):
            server = _server_pid(endpoint)
            progress(f"{label}: ready; settling {settings.settle:g} s")
            time.sleep(settings.settle)
            progress(f"{label}: measuring {settings.window:g} s")
            runs = [{"phase": "fresh", **_measure(server, workers, settings.window)}]
            _announce(label, runs[0])
            if settings.after_use is not None:
                used = trio.run(_use, endpoint, tmp)
                progress(
                    f"{label}: {used['agentsCreated']} agents on {used['workersReached']} "
                    f"workers called; waiting {settings.after_use:g} s, then measuring "
                    f"{settings.window:g} s"
                )
                time.sleep(settings.after_use)
                runs.append({"phase": "used", **used, **_measure(server, workers, settings.window)})
                _announce(f"{label}, after use", runs[1])
        return runs


def run_benchmark(settings: Settings) -> dict[str, Any]:
    """One server per worker count, one after the other; returns the report."""
    started_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    clock, steal, machine = time.perf_counter(), steal_seconds(), machine_info()
    env = server_env(ROOT)
    runs = [run for workers in settings.workers for run in _run_one(workers, settings, env)]
    elapsed = time.perf_counter() - clock
    record_steal(machine, steal, elapsed)
    targets = [
        Target(
            name=f"idle CPU of {_run_label(run)} <= {CPU_LIMIT_PERCENT:g} % of a core",
            value=run["totalCpuPercent"],
            limit=CPU_LIMIT_PERCENT,
            comparison="<=",
            unit=" %",
        )
        for run in runs
    ]
    return {
        "benchmark": "idle",
        "startedAt": started_at,
        "elapsedSeconds": round(elapsed, 3),
        "config": {
            "quick": settings.quick,
            "workers": list(settings.workers),
            "settleSeconds": settings.settle,
            "windowSeconds": settings.window,
            "afterUseSeconds": settings.after_use,
            "command": "python -m actors serve --endpoint ipc://TMP/s.sock --data TMP/data "
            "[--workers N]",
            "cpu": "sum over threads of /proc/PID/task/TID/schedstat field 1 (ns on CPU)",
            "wakeups": "voluntary + nonvoluntary ctxt switches of the same threads",
        },
        "machine": machine,
        "runs": runs,
        "targets": [t.as_json() for t in targets],
        "allPassed": all(t.passed for t in targets),
    }


# -- output -----------------------------------------------------------------------------------


def render_table(report: dict[str, Any]) -> str:
    config, machine = report["config"], report["machine"]
    after_use = config.get("afterUseSeconds")
    used = "" if after_use is None else f"; again {after_use:g} s after calls reached every worker"
    header = (
        f"idle server: nothing created, {config['settleSeconds']:g} s to settle, then "
        f"{config['windowSeconds']:g} s measured{used}\n"
        f"{machine['cpuCount']} CPUs ({machine['cpuModel']}), Python {machine['python']}, "
        f"load average at the start {machine['loadAverage'][0]:.2f}"
    )
    warning = steal_warning(machine)
    if warning is not None:
        header += f"\n{warning}"
    rows = [["server", "process", "% of a core", "wake-ups/s", "threads"]]
    for run in report["runs"]:
        label = _run_label(run)
        for entry in run["processes"]:
            rows.append(
                [
                    label,
                    entry["role"],
                    f"{entry['cpuPercent']:.3f}",
                    f"{entry['wakeupsPerSecond']:.1f}",
                    str(entry["threads"]),
                ]
            )
        total = [f"{run['totalCpuPercent']:.3f}", f"{run['totalWakeupsPerSecond']:.1f}", ""]
        rows.append([label, "total", *total])
    targets = format_table(target_rows(report["targets"]))
    return f"{header}\n\n{format_table(rows)}\n\n{targets}"


def plot_report(path: Path, report: dict[str, Any]) -> None:
    """Two panels of bars per process, grouped by server: % of a core (with the target line
    over the totals) and wake-ups per second."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(12, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    cpu, wakeups = figure.subplots(1, 2)
    ticks: list[float] = []
    labels: list[str] = []
    x = 0.0
    for index, run in enumerate(report["runs"]):
        color = f"C{index}"
        bars = [(e["role"], e["cpuPercent"], e["wakeupsPerSecond"]) for e in run["processes"]]
        bars.append(("total", run["totalCpuPercent"], run["totalWakeupsPerSecond"]))
        xs = [x + i for i in range(len(bars))]
        for axes, values in ((cpu, [b[1] for b in bars]), (wakeups, [b[2] for b in bars])):
            drawn = axes.bar(xs, values, color=color, label=_run_label(run))
            drawn.patches[-1].set_hatch("//")  # the total
            axes.bar_label(drawn, fmt="%.3g", fontsize="x-small")
        ticks += xs
        labels += [b[0] for b in bars]
        x += len(bars) + 1
    cpu.axhline(CPU_LIMIT_PERCENT, linestyle="--", color="grey", label="target (total)")
    cpu.set_ylabel("% of one core")
    cpu.set_title("idle CPU (schedstat)")
    wakeups.set_ylabel("wake-ups per second")
    wakeups.set_title("wake-ups (context switches)")
    for axes in (cpu, wakeups):
        axes.set_xticks(ticks, labels, rotation=45, ha="right", fontsize="small")
        axes.set_ylim(bottom=0)
        axes.grid(True, axis="y", alpha=0.3)
        axes.legend(fontsize="small")
    config = report["config"]
    figure.suptitle(
        f"idle server, {config['windowSeconds']:g} s window after {config['settleSeconds']:g} s"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)


# -- the command line -------------------------------------------------------------------------


def _worker_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of worker counts: {text!r}") from None
    if not counts or min(counts) < 0:
        raise argparse.ArgumentTypeError(f"worker counts are 0 or more: {text!r}")
    return counts


#: ``--after-use none``: the server is measured fresh only.
_NOT_USED = -1.0


def _after_use(text: str) -> float:
    if text == "none":
        return _NOT_USED
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds or none: {text!r}") from None
    if not seconds >= 0:  # also NaN
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return seconds


def _proc_problem() -> str | None:
    """Why this machine cannot be measured (``None``: it can)."""
    if not sys.platform.startswith("linux"):
        return f"needs Linux's /proc (per-thread schedstat); this is {sys.platform}"
    if not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat").exists():
        return "needs /proc/PID/task/TID/schedstat, which this kernel does not provide"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = bench_parser(
        "python -m bench.idle", __doc__, out=DEFAULT_OUT, quick_help="3 s to settle, 5 s measured"
    )
    parser.add_argument(
        "--workers", type=_worker_counts, help="worker counts, 0 = plain serve (default 0,4)"
    )
    parser.add_argument("--settle", type=float, help="seconds before measuring (default 10)")
    parser.add_argument("--window", type=float, help="seconds measured (default 60)")
    parser.add_argument(
        "--after-use",
        type=_after_use,
        help="seconds between calling every worker and measuring again, or none "
        f"(default {Settings().after_use:g}; quick 1)",
    )
    args = parser.parse_args(argv)
    problem = _proc_problem()
    if problem is not None:
        print(f"python -m bench.idle: {problem}", file=sys.stderr)
        return 2
    changes = option_changes(
        parser, args, ("workers", "settle", "window", "after_use"), positive=("window",)
    )
    if changes.get("after_use") == _NOT_USED:
        changes["after_use"] = None
    if changes.get("settle", 0) < 0:
        parser.error("--settle must not be negative")
    settings = attrs.evolve(Settings.quick_run() if args.quick else Settings(), **changes)
    report = run_guarded("bench.idle", lambda: run_benchmark(settings), (BenchError, OSError))
    if isinstance(report, Stopped):
        return report.status
    return publish_with_plot(args.out, report, plot=plot_report, render=render_table)


if __name__ == "__main__":
    sys.exit(main())
