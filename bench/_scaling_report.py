"""The scaling benchmark's figures: one run's sample, the report over all runs, the plot.

Pure functions over the generators' reports and the server's CPU counters (no processes), so
the arithmetic is tested on synthetic numbers (``tests/bench/test_scaling.py``).
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from typing import Any

from bench._common import Target, machine_info
from bench._scaling_load import ENDPOINTS

__all__ = [
    "AGENTS",
    "FLOOR_MODES",
    "MEDIAN_KEYS",
    "MODES",
    "build_report",
    "plot",
    "summarize_sample",
]

MODES = ("hop", "direct")
#: The floor relay's loops (``bench/_relay_floor.py``) and the mode each one's samples go under.
FLOOR_MODES = {"blocking": "floor", "pumps": "floorPumps"}
AGENTS = 64
#: Per-sample figures whose medians are reported (µs per call unless named otherwise).
MEDIAN_KEYS = (
    "callsPerSecond",
    "serverCpuUsPerCall",
    "serverBusyCpuUsPerCall",
    "supervisorBusyCpuUsPerCall",
    "workersBusyCpuUsPerCall",
    "workersIoCpuUsPerCall",
    "workersPreemptionsPerCall",
    "generatorCpuUsPerCall",
    "busiestWorkerAgentShare",
    "latencyP50Us",
    "latencyP99Us",
)


def _per_call(seconds: float, calls: int) -> float | None:
    return seconds / calls * 1e6 if calls else None


def summarize_sample(
    reports: list[dict[str, Any]],
    before: tuple[float, float, float, int],
    after: tuple[float, float, float, int],
    window: float,
    idle: tuple[float, float],
) -> dict[str, Any]:
    """One run's figures from the generators' reports and the server's CPU counters.

    Args:
        reports: Each generator's ``{calls, errors, seconds, cpuSeconds}``.
        before: Supervisor and workers' CPU seconds at the start of the window, the
            workers' ZeroMQ I/O threads' CPU seconds, and the workers' preemptions.
        after: The same at its end.
        window: Wall-clock seconds between the two readings.
        idle: Supervisor and workers' idle CPU rates (seconds per second).
    """
    calls = sum(r["calls"] for r in reports)
    seconds = max(r["seconds"] for r in reports)
    supervisor = after[0] - before[0]
    workers = after[1] - before[1]
    supervisor_busy = max(0.0, supervisor - idle[0] * window)
    workers_busy = max(0.0, workers - idle[1] * window)
    return {
        "calls": calls,
        "errors": sum(r["errors"] for r in reports),
        "callsPerSecond": calls / seconds if seconds else 0.0,
        "serverCpuSeconds": supervisor + workers,
        "serverCpuUsPerCall": _per_call(supervisor + workers, calls),
        "serverIdleCpuRate": idle[0] + idle[1],
        "serverBusyCpuUsPerCall": _per_call(supervisor_busy + workers_busy, calls),
        "supervisorBusyCpuUsPerCall": _per_call(supervisor_busy, calls),
        "workersBusyCpuUsPerCall": _per_call(workers_busy, calls),
        # Of the workers' CPU, what their ZeroMQ I/O threads spent (the rest is the trio
        # threads), and how often their threads were preempted: where CPU per call grows
        # when more workers share the cores.
        "workersIoCpuUsPerCall": _per_call(after[2] - before[2], calls),
        "workersPreemptionsPerCall": (after[3] - before[3]) / calls if calls else None,
        "generatorCpuUsPerCall": _per_call(sum(r["cpuSeconds"] for r in reports), calls),
        # The busiest worker's share of the agents: with the spread "agents" it caps the
        # throughput at 1 / share times one worker's.
        "busiestWorkerAgentShare": _busiest_share(reports[0].get("agentsPerWorker")),
        # From queueing a call to reading its reply, under this load (the C loop measures it;
        # with several generators, the worst one's).
        "latencyP50Us": _worst(reports, "latencyP50Us"),
        "latencyP99Us": _worst(reports, "latencyP99Us"),
    }


def _worst(reports: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in reports if r.get(key) is not None]
    return max(values) if values else None


def _busiest_share(agents_per_worker: list[int] | None) -> float | None:
    return agents_per_worker[0] / sum(agents_per_worker) if agents_per_worker else None


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator is not None and denominator else None


def _paired(runs: list[dict[str, Any]], base: list[dict[str, Any]], key: str) -> float | None:
    """The median over the repeats of ``runs[i][key] / base[i][key]``.

    Runs are interleaved, so the samples of one repeat ran minutes apart at most; a host that
    slows down over the benchmark (one full run here lost 40 % of its speed from the first
    repeat to the last) moves both sides of each ratio, where a ratio of medians could pair
    a fast repeat with a slow one."""
    values = [
        ratio
        for run, one in zip(runs, base, strict=True)
        if (ratio := _ratio(run.get(key), one.get(key))) is not None
    ]
    return statistics.median(values) if values else None


def _against_floor(
    hop: list[dict[str, Any]],
    floor: list[dict[str, Any]],
    pumps: list[dict[str, Any]] | None,
) -> dict[str, float | None]:
    """The supervisor's CPU per relayed call against the floor relay's, blocking and on pumps
    (their whole CPU: they have no idle work), paired per repeat."""

    def against(runs: list[dict[str, Any]] | None) -> float | None:
        if not runs:
            return None
        paired = [
            ratio
            for h, f in zip(hop, runs, strict=True)
            if (ratio := _ratio(h["supervisorBusyCpuUsPerCall"], f["serverCpuUsPerCall"]))
            is not None
        ]
        return statistics.median(paired) if paired else None

    return {
        "supervisorCpuUsPerCall": _median(hop, "supervisorBusyCpuUsPerCall"),
        "floorCpuUsPerCall": _median(floor, "serverCpuUsPerCall"),
        "supervisorVsFloor": against(floor),
        "pumpsFloorCpuUsPerCall": _median(pumps, "serverCpuUsPerCall") if pumps else None,
        "supervisorVsPumpsFloor": against(pumps),
    }


def build_report(
    settings: argparse.Namespace, samples: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """The JSON report: settings, every sample, medians, ratios and the issue's targets."""
    medians: dict[str, dict[str, Any]] = {}
    for key, runs in samples.items():
        medians[key] = {name: _median(runs, name) for name in MEDIAN_KEYS}
        medians[key]["errors"] = sum(r["errors"] for r in runs)
    ratios: dict[str, dict[str, float | None]] = {}
    targets: list[Target] = []
    first = settings.workers[0]
    for kind in ENDPOINTS:
        for mode in MODES:
            one = samples[f"{kind}/{mode}/{first}"]
            for workers in settings.workers:
                runs = samples[f"{kind}/{mode}/{workers}"]
                ratios[f"{kind}/{mode}/{workers}"] = {
                    "throughputVsOne": _paired(runs, one, "callsPerSecond"),
                    "cpuPerCallVsOne": _paired(runs, one, "serverCpuUsPerCall"),
                    "busyCpuPerCallVsOne": _paired(runs, one, "serverBusyCpuUsPerCall"),
                }
        for workers in settings.workers:
            hop = samples[f"{kind}/hop/{workers}"]
            direct = samples[f"{kind}/direct/{workers}"]
            extra = [
                h["serverBusyCpuUsPerCall"] - d["serverBusyCpuUsPerCall"]
                for h, d in zip(hop, direct, strict=True)
                if h["serverBusyCpuUsPerCall"] is not None
                and d["serverBusyCpuUsPerCall"] is not None
            ]
            ratios[f"{kind}/hopVsDirect/{workers}"] = {
                "throughput": _paired(hop, direct, "callsPerSecond"),
                "cpuPerCall": _paired(hop, direct, "serverCpuUsPerCall"),
                "busyCpuPerCall": _paired(hop, direct, "serverBusyCpuUsPerCall"),
                "extraBusyCpuUsPerCall": statistics.median(extra) if extra else None,
            }
            floor = samples.get(f"{kind}/{FLOOR_MODES['blocking']}/{workers}")
            if floor:
                pumps = samples.get(f"{kind}/{FLOOR_MODES['pumps']}/{workers}")
                ratios[f"{kind}/hopVsFloor/{workers}"] = _against_floor(hop, floor, pumps)
        # Issue 7 §4, with clients routing by the shard map (no extra hop).
        for workers in settings.workers[1:]:
            flat = ratios[f"{kind}/direct/{workers}"]["busyCpuPerCallVsOne"]
            targets.append(
                Target(
                    name=f"{kind} direct: server CPU/call, {workers} vs {first} worker(s)",
                    value=flat,
                    limit=1.10,
                    comparison="<=",
                    unit="x",
                )
            )
        if 2 in settings.workers and first == 1:
            targets.append(
                Target(
                    name=f"{kind} direct: throughput, 2 vs 1 worker",
                    value=ratios[f"{kind}/direct/2"]["throughputVsOne"],
                    limit=1.5,
                    comparison=">=",
                    unit="x",
                )
            )
    return {
        "benchmark": "scaling",
        "machine": machine_info(),
        "settings": {
            "workers": settings.workers,
            "duration": settings.duration,
            "repeats": settings.repeats,
            "inFlight": settings.in_flight,
            "generators": settings.generators,
            "generator": settings.generator,
            "spread": settings.spread,
            "ioThreads": settings.io_threads,
            "relayFloor": bool(getattr(settings, "relay_floor", False)),
            "agents": AGENTS,
            "durability": "flush",
        },
        "samples": samples,
        "medians": medians,
        "ratios": ratios,
        "targets": [t.as_json() for t in targets],
        "allPassed": all(t.passed for t in targets),
    }


def plot(report: dict[str, Any], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(16, 4.8), layout="constrained")
    FigureCanvasAgg(figure)
    left, middle, right = figure.subplots(1, 3)
    workers = report["settings"]["workers"]
    hop_ratios: list[float] = []
    for kind in ENDPOINTS:
        for mode in MODES:
            rows = [report["medians"][f"{kind}/{mode}/{w}"] for w in workers]
            style = "-o" if mode == "direct" else "--s"
            label = f"{kind} {mode}"
            left.plot(workers, [r["callsPerSecond"] for r in rows], style, label=label)
            middle.plot(workers, [r["serverBusyCpuUsPerCall"] for r in rows], style, label=label)
        hops = [report["ratios"][f"{kind}/hopVsDirect/{w}"] for w in workers]
        throughput = [h["throughput"] for h in hops]
        cpu = [h["busyCpuPerCall"] for h in hops]
        right.plot(workers, throughput, "-o", label=f"{kind} throughput")
        right.plot(workers, cpu, "--s", label=f"{kind} CPU/call")
        hop_ratios += [r for r in throughput + cpu if r is not None]
        floors = [report["ratios"].get(f"{kind}/hopVsFloor/{w}") for w in workers]
        for key, style, what in (
            ("supervisorVsFloor", ":^", "blocking"),
            ("supervisorVsPumpsFloor", ":v", "pumps"),
        ):
            vs_floor = [f.get(key) if f else None for f in floors]
            if all(r is not None for r in vs_floor):
                label = f"{kind} supervisor ÷ {what} floor, CPU"
                right.plot(workers, vs_floor, style, label=label)
                hop_ratios += [r for r in vs_floor if r is not None]
    left.set(xlabel="workers", ylabel="calls/s (median)", title="Throughput", xticks=workers)
    # Log scale: echo (tens of µs) and candidates (hundreds) share the panel, and a flat line
    # (the target) reads as flat for both.
    middle.set_yscale("log")
    middle.set(
        xlabel="workers",
        ylabel="server CPU µs per call, idle subtracted (median, log scale)",
        title="Server CPU per call",
        xticks=workers,
    )
    right.axhline(1.0, color="grey", linewidth=0.8)
    right.set(
        xlabel="workers",
        ylabel="hop ÷ direct; supervisor ÷ floor relay",
        title="Cost of the extra hop",
        xticks=workers,
    )
    # Headroom above the highest ratio for the legend, which otherwise covers the lines.
    right.set_ylim(0, 2.2 * max(hop_ratios, default=1.0))
    for axis in (left, middle, right):
        axis.grid(alpha=0.3)
    left.legend()
    middle.legend()
    right.legend(loc="upper left", fontsize="x-small")
    settings = report["settings"]
    figure.suptitle(
        f"agent-actors scale-out ({os.cpu_count()} cores, {settings['generator']} load "
        f"generator, {settings['inFlight']} calls in flight)"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
