"""Scale-out benchmark: throughput and server CPU per call with 1, 2 and 4 workers.

``python -m bench.scaling [--quick] [--workers 1,2,4] [--duration S] [--repeats R]
[--in-flight N] [--generators G] [--out PATH]``

For each worker count it starts ``agent-actors serve --workers N`` (a supervisor and N worker
processes on ipc endpoints under a temporary data directory), creates 64 agents spread over
the shards, and drives two endpoints, ``diagnostics/echo`` (64 B payload) and
``sessionReferenceResolver/candidates`` (empty query), in two routing modes:

- ``hop``: every call goes to the supervisor, which forwards it to the owning worker (one
  extra hop);
- ``direct``: the load generator routes by the shard map of ``system/describe`` and calls the
  owning worker itself (``actors.cluster._direct``, zero hops).

The load runs in separate processes (``--generators``, default 1), each keeping ``--in-flight``
calls outstanding round-robin over the agents for ``--duration`` seconds. Server CPU is the
user+system time of the supervisor and all its workers over the measured window (from
``/proc``), divided by the calls completed. Runs are interleaved (every mode and worker count
once per repeat) and the medians of the repeats are reported, with ratios against one worker
in the same run. ``bench/results/scaling.{json,png}`` hold the last full run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from actors._serve import READY_LINE
from bench._common import machine_info, progress, write_json

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "scaling.json"
ENDPOINTS = {
    "echo": ("diagnostics/echo", {"payload": "x" * 64}),
    "candidates": ("sessionReferenceResolver/candidates", {"query": ""}),
}
MODES = ("hop", "direct")
AGENTS = 64


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _family(root: int) -> list[int]:
    """``root`` and its children (the supervisor and its workers)."""
    pids = [root]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == root:
                        pids.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return pids


def _server_cpu(root: int) -> float:
    return sum(_cpu_seconds(pid) for pid in _family(root))


# -- the load generator (its own process) -----------------------------------------------------


async def _generate(
    address: str, mode: str, kind: str, agents: list[str], duration: float, in_flight: int
) -> dict[str, Any]:
    from actors.cluster._direct import open_cluster_client
    from wire import open_client

    endpoint, base = ENDPOINTS[kind]
    done = 0
    errors = 0

    async def drive(call: Any) -> dict[str, Any]:
        nonlocal done, errors
        deadline = trio.current_time() + duration

        async def task(i: int) -> None:
            nonlocal done, errors
            k = i
            while trio.current_time() < deadline:
                try:
                    await call(endpoint, {**base, "agentId": agents[k % len(agents)]})
                    done += 1
                except Exception:
                    errors += 1
                k += in_flight

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for i in range(in_flight):
                nursery.start_soon(task, i)
        return {"calls": done, "errors": errors, "seconds": time.perf_counter() - started}

    if mode == "direct":
        async with open_cluster_client(address) as direct:
            return await drive(direct.call)
    async with open_client(address) as client:
        return await drive(client.call)


def _generator_main(argv: list[str]) -> int:
    address, mode, kind, agents_file, duration, in_flight, start_at = argv
    agents = json.loads(Path(agents_file).read_text())
    # Start together: every generator sleeps until the same wall-clock instant.
    time.sleep(max(0.0, float(start_at) - time.time()))
    report = trio.run(_generate, address, mode, kind, agents, float(duration), int(in_flight))
    print(json.dumps(report), flush=True)
    return 0


# -- the driver -------------------------------------------------------------------------------


def _start_cluster(workers: int, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    address = f"ipc://{tmp}/public.sock"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "actors",
            "serve",
            "--endpoint",
            address,
            "--data",
            str(tmp / "data"),
            "--workers",
            str(workers),
            "--durability",
            "flush",
        ],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if not line.startswith(READY_LINE):
        process.kill()
        raise RuntimeError(f"supervisor did not start: {line!r}")
    return process, address


async def _create_agents(address: str, tmp: Path) -> list[str]:
    from wire import open_client

    async with open_client(address) as client:
        return [
            (
                await client.call(
                    "agents/create",
                    {"agentId": f"bench-{i}", "cwd": str(tmp), "title": f"Agent {i}"},
                )
            )["agentId"]
            for i in range(AGENTS)
        ]


def _idle_cpu_rate(root: int, seconds: float = 2.0) -> float:
    """Server CPU seconds per second with no load (timers, heartbeats, the coordinator's
    watch long polls): subtracted from the loaded window for the idle-corrected figure."""
    before = _server_cpu(root)
    time.sleep(seconds)
    return (_server_cpu(root) - before) / seconds


def _run_load(
    address: str,
    mode: str,
    kind: str,
    agents_file: Path,
    settings: argparse.Namespace,
    root: int,
    idle_rate: float,
) -> dict[str, Any]:
    start_at = time.time() + 1.0
    generators = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.scaling",
                "--generate",
                address,
                mode,
                kind,
                str(agents_file),
                str(settings.duration),
                str(settings.in_flight),
                str(start_at),
            ],
            stdout=subprocess.PIPE,
            cwd=ROOT,
        )
        for _ in range(settings.generators)
    ]
    time.sleep(max(0.0, start_at - time.time()))
    cpu_before = _server_cpu(root)
    window = time.perf_counter()
    reports = [json.loads(g.communicate()[0].decode()) for g in generators]
    cpu_after = _server_cpu(root)
    window = time.perf_counter() - window
    calls = sum(r["calls"] for r in reports)
    seconds = max(r["seconds"] for r in reports)
    busy = max(0.0, cpu_after - cpu_before - idle_rate * window)
    return {
        "calls": calls,
        "errors": sum(r["errors"] for r in reports),
        "callsPerSecond": calls / seconds,
        "serverCpuSeconds": cpu_after - cpu_before,
        "serverCpuUsPerCall": (cpu_after - cpu_before) / calls * 1e6 if calls else None,
        "serverIdleCpuRate": idle_rate,
        "serverBusyCpuUsPerCall": busy / calls * 1e6 if calls else None,
    }


def run(settings: argparse.Namespace) -> dict[str, Any]:
    samples: dict[str, list[dict[str, Any]]] = {}
    for repeat in range(settings.repeats):
        for workers in settings.workers:
            with tempfile.TemporaryDirectory(prefix="aa-scale-") as name:
                tmp = Path(name)
                process, address = _start_cluster(workers, tmp)
                try:
                    agents = trio.run(_create_agents, address, tmp)
                    agents_file = tmp / "agents.json"
                    agents_file.write_text(json.dumps(agents))
                    idle_rate = _idle_cpu_rate(process.pid)
                    for kind in ENDPOINTS:
                        for mode in MODES:
                            key = f"{kind}/{mode}/{workers}"
                            result = _run_load(
                                address, mode, kind, agents_file, settings, process.pid, idle_rate
                            )
                            samples.setdefault(key, []).append(result)
                            progress(
                                f"repeat {repeat + 1} {key}: "
                                f"{result['callsPerSecond']:.0f} calls/s, "
                                f"{result['serverCpuUsPerCall']:.0f} µs CPU/call"
                            )
                finally:
                    process.send_signal(signal.SIGTERM)
                    try:
                        process.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        process.kill()
    medians: dict[str, dict[str, float]] = {}
    for key, runs in samples.items():
        medians[key] = {
            "callsPerSecond": statistics.median(r["callsPerSecond"] for r in runs),
            "serverCpuUsPerCall": statistics.median(r["serverCpuUsPerCall"] for r in runs),
            "serverBusyCpuUsPerCall": statistics.median(r["serverBusyCpuUsPerCall"] for r in runs),
            "errors": sum(r["errors"] for r in runs),
        }
    ratios: dict[str, dict[str, float]] = {}
    for kind in ENDPOINTS:
        for mode in MODES:
            one = medians[f"{kind}/{mode}/{settings.workers[0]}"]
            for workers in settings.workers:
                m = medians[f"{kind}/{mode}/{workers}"]
                ratios[f"{kind}/{mode}/{workers}"] = {
                    "throughputVsOne": m["callsPerSecond"] / one["callsPerSecond"],
                    "cpuPerCallVsOne": m["serverCpuUsPerCall"] / one["serverCpuUsPerCall"],
                    "busyCpuPerCallVsOne": m["serverBusyCpuUsPerCall"]
                    / one["serverBusyCpuUsPerCall"],
                }
        for workers in settings.workers:
            hop = medians[f"{kind}/hop/{workers}"]
            direct = medians[f"{kind}/direct/{workers}"]
            ratios[f"{kind}/hopVsDirect/{workers}"] = {
                "throughput": hop["callsPerSecond"] / direct["callsPerSecond"],
                "cpuPerCall": hop["serverCpuUsPerCall"] / direct["serverCpuUsPerCall"],
                "busyCpuPerCall": hop["serverBusyCpuUsPerCall"] / direct["serverBusyCpuUsPerCall"],
            }
    return {
        "benchmark": "scaling",
        "machine": machine_info(),
        "settings": {
            "workers": settings.workers,
            "duration": settings.duration,
            "repeats": settings.repeats,
            "inFlight": settings.in_flight,
            "generators": settings.generators,
            "agents": AGENTS,
            "durability": "flush",
        },
        "samples": samples,
        "medians": medians,
        "ratios": ratios,
    }


def plot(report: dict[str, Any], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(12, 4.8), layout="constrained")
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2)
    workers = report["settings"]["workers"]
    for kind in ENDPOINTS:
        for mode in MODES:
            rows = [report["medians"][f"{kind}/{mode}/{w}"] for w in workers]
            style = "-o" if mode == "direct" else "--s"
            left.plot(workers, [r["callsPerSecond"] for r in rows], style, label=f"{kind} {mode}")
            right.plot(
                workers, [r["serverBusyCpuUsPerCall"] for r in rows], style, label=f"{kind} {mode}"
            )
    left.set(xlabel="workers", ylabel="calls/s (median)", title="Throughput", xticks=workers)
    right.set(
        xlabel="workers",
        ylabel="server CPU µs per call, idle subtracted (median)",
        title="Server CPU per call",
        xticks=workers,
    )
    for axis in (left, right):
        axis.grid(alpha=0.3)
        axis.legend()
    figure.suptitle(f"agent-actors scale-out ({os.cpu_count()} cores)")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--generate"]:
        return _generator_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1 repeat of 2 s (a smoke run)")
    parser.add_argument("--workers", default="1,2,4", help="worker counts (default 1,2,4)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats")
    parser.add_argument("--in-flight", type=int, default=64, help="calls outstanding per generator")
    parser.add_argument("--generators", type=int, default=1, help="load generator processes")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    settings = parser.parse_args(argv)
    settings.workers = [int(w) for w in settings.workers.split(",")]
    if settings.quick:
        settings.duration, settings.repeats = 2.0, 1
    report = run(settings)
    write_json(settings.out, report)
    plot(report, settings.out.with_suffix(".png"))
    for key, row in report["ratios"].items():
        print(key, {k: round(v, 3) for k, v in row.items()})
    print(f"wrote {settings.out} and {settings.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
