"""Scale-out benchmark: throughput and server CPU per call with 1, 2 and 4 workers.

``python -m bench.scaling [--quick] [--workers 1,2,4] [--duration S] [--repeats R]
[--in-flight N] [--generators G] [--generator zmtp|raw|client] [--spread workers|agents]
[--io-threads batch|normal] [--no-relay-floor] [--out PATH]``

For each worker count it starts ``agent-actors serve --workers N`` (a supervisor and N worker
processes on ipc endpoints under a temporary data directory), creates 64 agents spread over
the shards, and drives two endpoints, ``diagnostics/echo`` (64 B payload) and
``sessionReferenceResolver/candidates`` (empty query), in two routing modes:

- ``hop``: every call goes to the supervisor, which forwards it to the owning worker (one
  extra hop);
- ``direct``: the load generator routes by the shard map of ``system/describe`` and calls the
  owning worker itself (zero hops).

The echo calls also go through the floor relay (``bench/_relay_floor.py``; ``--no-relay-floor``
skips it), a pyzmq+msgpack relay in front of the same workers that keeps none of the
supervisor's promises, run two ways: ``echo/floor/<N>`` as one blocking loop (about the least a
relay written in Python pays on this host), ``echo/floorPumps/<N>`` in ``wire``'s socket pumps
under trio; ``echo/hopVsFloor/<N>`` sets the supervisor's CPU per relayed call against both.

The load runs in separate processes (``--generators``, default 1), each keeping ``--in-flight``
calls outstanding (256 by default) for ``--duration`` seconds (``bench._scaling_load``), dealt
out evenly over the workers (``--spread workers``) or evenly over the agents (``agents``: then
the worker with most agents caps the throughput, and ``busiestWorkerAgentShare`` says by how
much). On a 2-core machine the generator shares the cores with the server, so a costly
generator caps the throughput the server can show: with server CPU ``s`` and generator CPU
``g`` per call, 2 workers can reach at most ``2 s / (s + g)`` times one worker's throughput,
which is 1.5 only when ``g <= s / 3``. So the default generator (``zmtp``) speaks ZMTP on plain
sockets and runs its loop in C (``bench/_zmtp_drive.c``, compiled on first use; a Python loop
where there is no compiler): about 1 µs of CPU per echo call. ``raw`` (pyzmq) costs 5–20 µs and
``client`` (the product's Python client) about as much as the server spends on an echo.

Server CPU is the user+system time of the supervisor and of each of its workers (all threads,
from ``/proc``) over the measured window, divided by the calls completed; it is reported whole,
split into supervisor and workers, and with the idle rate (timers, heartbeats, the
coordinator's watch long polls: the lowest of three 1 s readings before the runs)
subtracted, over the window from the generators' first calls to their reports. The generators'
own CPU per call is reported beside it, and so are the part of the workers' CPU that their
ZeroMQ I/O threads spent and how often the workers' threads were preempted per call (from
``/proc/<pid>/task``): what grows when more processes share the cores. The clusters for every
worker count run side by side (an idle one costs 1–7 % of a core, by its size), and each repeat
runs every endpoint and mode on 1, 2 and 4 workers back to back; the medians of the repeats are
reported. The ratios (against one worker, and hop against direct) are the median over the
repeats of each repeat's ratio, so a host whose speed drifts moves both sides of every ratio.
The issue's two targets are evaluated on them. ``bench/results/scaling.{json,png}`` hold the
last full run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from actors._serve import READY_LINE
from bench._common import (
    format_table,
    progress,
    record_steal,
    steal_seconds,
    steal_warning,
    target_rows,
    write_json,
)
from bench._relay_floor import floor_relay
from bench._scaling_generate import generator_argv, generator_main
from bench._scaling_load import (
    ENDPOINTS,
    GENERATORS,
    SPREADS,
    STARTED,
)
from bench._scaling_report import (
    AGENTS,
    FLOOR_MODES,
    MODES,
    build_report,
    plot,
    summarize_sample,
)
from wire import IO_THREAD_POLICIES

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "scaling.json"


def _stat_cpu_seconds(stat: str) -> float:
    """User + system CPU seconds from the text of a ``/proc/…/stat`` file."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return _stat_cpu_seconds(stat.read())
    except OSError:
        return 0.0


def _children(root: int) -> list[int]:
    """The processes whose parent is ``root`` (the supervisor's workers)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == root:
                        pids.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return pids


def _zmq_threads(pid: int) -> tuple[float, int]:
    """CPU seconds so far of ``pid``'s ZeroMQ I/O threads, and the involuntary context
    switches (preemptions) of all its threads."""
    io = 0.0
    preempted = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0, 0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as stat:
                text = stat.read()
            with open(f"/proc/{pid}/task/{task}/status") as status:
                lines = status.read().splitlines()
        except OSError:
            continue  # the thread ended
        if text[text.index("(") + 1 : text.rindex(")")].startswith("ZMQbg/IO"):
            io += _stat_cpu_seconds(text)
        for line in lines:
            if line.startswith("nonvoluntary_ctxt_switches:"):
                preempted += int(line.split()[1])
    return io, preempted


def _server_cpu(root: int) -> tuple[float, float, float, int]:
    """CPU seconds so far of the supervisor and of its workers (all their threads), of the
    workers' ZeroMQ I/O threads alone, and the workers' preemptions."""
    workers = _children(root)
    threads = [_zmq_threads(pid) for pid in workers]
    return (
        _cpu_seconds(root),
        sum(_cpu_seconds(pid) for pid in workers),
        sum(io for io, _ in threads),
        sum(preempted for _, preempted in threads),
    )


# -- the driver -------------------------------------------------------------------------------


def _start_cluster(
    workers: int, tmp: Path, io_threads: str = "batch"
) -> tuple[subprocess.Popen[bytes], str]:
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
            "--io-threads",
            io_threads,
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


def _idle_cpu_rates(root: int, windows: int = 3, seconds: float = 1.0) -> tuple[float, float]:
    """Supervisor and workers' CPU seconds per second with no load (timers, heartbeats, the
    coordinator's watch long polls): subtracted from the loaded window for the busy figures.

    The lowest of ``windows`` readings per role: work left over from creating the agents
    (cache updates, flushes) is not idle cost, and counting it would subtract real work."""
    rates: list[tuple[float, float]] = []
    for _ in range(windows):
        before = _server_cpu(root)
        time.sleep(seconds)
        after = _server_cpu(root)
        rates.append(((after[0] - before[0]) / seconds, (after[1] - before[1]) / seconds))
    return min(r[0] for r in rates), min(r[1] for r in rates)


def _run_load(
    address: str,
    mode: str,
    kind: str,
    agents_file: Path,
    settings: argparse.Namespace,
    root: int,
    idle: tuple[float, float],
) -> dict[str, Any]:
    start_at = time.time() + 1.0
    argv = generator_argv(
        settings.generator,
        address,
        mode,
        kind,
        agents_file,
        settings.duration,
        settings.in_flight,
        start_at,
        settings.spread,
    )
    generators = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.scaling", "--generate", *argv],
            stdout=subprocess.PIPE,
            cwd=ROOT,
        )
        for _ in range(settings.generators)
    ]
    # The window is the load's: from the generators' first calls (a generator that starts
    # late on a busy machine does not stretch it) to their reports, before they exit.
    started = [_read_line(g) for g in generators]
    before = _server_cpu(root)
    window = time.perf_counter()
    outputs = [_read_line(g) for g in generators]
    after = _server_cpu(root)
    window = time.perf_counter() - window
    for g in generators:
        g.communicate()
    if any(g.returncode for g in generators) or set(started) != {STARTED}:
        raise RuntimeError(f"a load generator failed ({kind}/{mode}): {started + outputs!r}")
    reports = [json.loads(out) for out in outputs]
    return summarize_sample(reports, before, after, window, idle)


def _read_line(generator: subprocess.Popen[bytes]) -> str:
    assert generator.stdout is not None
    return generator.stdout.readline().decode().strip()


def run(settings: argparse.Namespace) -> dict[str, Any]:
    """Start a cluster per worker count, side by side, then run every endpoint and mode on
    each of them back to back, once per repeat: the samples one ratio pairs are seconds apart,
    not the minutes a cluster's start-up and every other run put between them (this host's
    speed drifts by a third over minutes)."""
    samples: dict[str, list[dict[str, Any]]] = {}
    steal, clock = steal_seconds(), time.perf_counter()
    with contextlib.ExitStack() as stack:
        clusters: dict[int, tuple[subprocess.Popen[bytes], str, Path]] = {}
        #: Per sample key (``echo/floor/<n>``, ``echo/floorPumps/<n>``), a floor relay's pid
        #: and address (bench/_relay_floor.py) and the worker count it serves.
        floors: dict[str, tuple[int, str, int]] = {}
        for workers in settings.workers:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="aa-scale-")))
            process, address = _start_cluster(workers, tmp, settings.io_threads)
            stack.callback(_stop_cluster, process)
            agents_file = tmp / "agents.json"
            agents = trio.run(_create_agents, address, tmp)
            agents_file.write_text(json.dumps(agents))
            clusters[workers] = (process, address, agents_file)
            if settings.relay_floor:
                for loop, name in FLOOR_MODES.items():
                    floor = floor_relay(tmp, address, agents, settings.io_threads, loop)
                    floors[f"echo/{name}/{workers}"] = (*stack.enter_context(floor), workers)
        idle = {w: _idle_cpu_rates(process.pid) for w, (process, _, _) in clusters.items()}
        for repeat in range(settings.repeats):
            for kind in ENDPOINTS:
                for mode in MODES:
                    for workers, (process, address, agents_file) in clusters.items():
                        key = f"{kind}/{mode}/{workers}"
                        result = _run_load(
                            address, mode, kind, agents_file, settings, process.pid, idle[workers]
                        )
                        samples.setdefault(key, []).append(result)
                        _progress(repeat, key, result)
                if kind != "echo":
                    continue
                for key, (pid, floor_address, workers) in floors.items():
                    # The relay has no idle work to subtract: it sleeps in a poll.
                    agents_file = clusters[workers][2]
                    result = _run_load(
                        floor_address, "hop", kind, agents_file, settings, pid, (0.0, 0.0)
                    )
                    samples.setdefault(key, []).append(result)
                    _progress(repeat, key, result)
    report = build_report(settings, samples)
    record_steal(report["machine"], steal, time.perf_counter() - clock)
    return report


def _progress(repeat: int, key: str, result: dict[str, Any]) -> None:
    progress(
        f"repeat {repeat + 1} {key}: "
        f"{result['callsPerSecond']:.0f} calls/s, "
        f"{result['serverBusyCpuUsPerCall'] or 0:.0f} µs server CPU/call"
        f" (generator {result['generatorCpuUsPerCall'] or 0:.0f})" + _latency_text(result)
    )


def _stop_cluster(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()


def _latency_text(result: dict[str, Any]) -> str:
    p50, p99 = result.get("latencyP50Us"), result.get("latencyP99Us")
    return "" if p50 is None or p99 is None else f", latency p50 {p50:.0f} µs, p99 {p99:.0f} µs"


def _median_rows(medians: dict[str, dict[str, Any]]) -> list[list[str]]:
    """The medians as a table: throughput, and where the CPU per call goes."""

    def cell(value: float | None, digits: int = 0) -> str:
        return "n/a" if value is None else f"{value:,.{digits}f}"

    rows = [
        [
            "endpoint/mode/workers",
            "calls/s",
            "server us/call",
            "of which workers' zmq I/O",
            "preemptions/call",
            "generator us/call",
            "latency p50/p99 us",
            "errors",
        ]
    ]
    for key, m in medians.items():
        rows.append(
            [
                key,
                cell(m["callsPerSecond"]),
                cell(m["serverBusyCpuUsPerCall"], 1),
                cell(m["workersIoCpuUsPerCall"], 1),
                cell(m["workersPreemptionsPerCall"], 2),
                cell(m["generatorCpuUsPerCall"], 1),
                f"{cell(m['latencyP50Us'])} / {cell(m['latencyP99Us'])}",
                str(m["errors"]),
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--generate"]:
        return generator_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1 repeat of 2 s (a smoke run)")
    parser.add_argument("--workers", default="1,2,4", help="worker counts (default 1,2,4)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats")
    parser.add_argument(
        "--in-flight", type=int, default=256, help="calls outstanding per generator (default 256)"
    )
    parser.add_argument("--generators", type=int, default=1, help="load generator processes")
    parser.add_argument(
        "--generator",
        choices=GENERATORS,
        default="zmtp",
        help="zmtp: the protocol on plain sockets (default, cheapest); raw: pyzmq+msgpack; "
        "client: the product's Python client",
    )
    parser.add_argument(
        "--spread",
        choices=SPREADS,
        default="workers",
        help="workers: as many calls outstanding on every worker (default); agents: an equal "
        "share of the calls for every agent",
    )
    parser.add_argument(
        "--io-threads",
        choices=IO_THREAD_POLICIES,
        default="batch",
        help="serve --io-threads: how the server's ZeroMQ I/O threads are scheduled",
    )
    parser.add_argument(
        "--relay-floor",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also relay the echo calls through the floor relay (bench/_relay_floor.py: a "
        "blocking pyzmq loop that keeps no promise), to set the supervisor's CPU per relayed "
        "call against it (default on)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    settings = parser.parse_args(argv)
    settings.workers = [int(w) for w in settings.workers.split(",")]
    if settings.quick:
        settings.duration, settings.repeats = 2.0, 1
    report = run(settings)
    write_json(settings.out, report)
    plot(report, settings.out.with_suffix(".png"))
    print(format_table(_median_rows(report["medians"])))
    print()
    for key, row in report["ratios"].items():
        print(key, {k: None if v is None else round(v, 3) for k, v in row.items()})
    print(format_table(target_rows(report["targets"])))
    warning = steal_warning(report["machine"])
    if warning is not None:
        print(warning)
    print(f"wrote {settings.out} and {settings.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
