"""Cancel storm: what a cancelled call's caller is told, and how soon, in one process, through
the supervisor of ``serve --workers 2``, and straight to its workers (issue 19, item 1).

``python -m bench.cancel_storm [--quick] [--modes one,workers,direct] [--repeats N]
[--calls A,N,S] [--in-flight N[,N...]] [--out PATH]``

For each mode and repeat, a fresh server (``python -m actors serve --endpoint ipc://TMP/s.sock
--data TMP/data [--workers 2]``) and 8 new agents. A raw DEALER (``bench/_storm.py``) sends
``A`` appends, ``N`` notes and ``S`` sleeps (default 2,000, 2,000 and 600), shuffled, at most
``--in-flight`` (default 32) at a time; several levels (``4,8,16,32``) run every mode at each,
lowest first. Mode ``direct`` sends each call (and its cancel) to its agent's owning worker by
the supervisor's shard map, as ``open_cluster_client`` routes, from one DEALER per worker.
Each call is cancelled 0-5 ms after it was sent, or, one in five, carries a 1-5 ms deadline
instead; one append in four carries its agent's supersede key, so a newer one cancels it.

Measured, over all repeats of a mode at a level:

- **cancel → terminal frame**: from the client sending a cancel to the call's one terminal
  frame, split by how the call ended: ``cancelled`` or ``deadline-exceeded`` (no effect), or
  its ``result`` (it had run when the cancel came, so the truthful answer waits for it). The
  no-effect answers are split again by where the cancel found the call (their
  ``details.state``): ``queued`` (not started: through ``--workers``, mostly held in the
  relay's lane for its agent, answered there) or ``running`` (its owner had started it: only
  the owner can answer);
- **the storm's duration**, from the first call sent to the last frame read;
- **truth**: every append or note answered ``cancelled`` or ``deadline-exceeded`` is checked
  absent (the session logs on disk, ``diagnostics/notes``), every one answered with a result
  present; a sleep answered ``cancelled`` must not have run to its end (``diagnostics/endings``
  of the server, or of each worker). A run with a false answer fails the benchmark.

Target (issue 19, item 1): through the relay, the cancel's p99 to the terminal frame at most
5 ms, at each level. A p99 is a latency under a load: on two cores the storm's four processes
(client, supervisor, two workers) leave the cores idle at 4 in flight and about 90 % busy at
32, and the sweep shows where the tail stops being the relay's and becomes the queue for a core.
It is printed with PASS/MISS; the exit status is 0 whenever the run completed.
"""

from __future__ import annotations

import datetime
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from actors._serve import READY_LINE
from bench._common import (
    BenchError,
    Stopped,
    Target,
    bench_parser,
    format_table,
    in_flight_levels,
    latency_summary,
    machine_busy_seconds,
    machine_info,
    option_changes,
    plot_png,
    progress,
    publish_with_plot,
    record_steal,
    run_guarded,
    server_env,
    server_process,
    steal_seconds,
    target_rows,
)
from bench._relay_floor import cluster_map
from bench._scaling_load import resolve_routes
from bench._storm import (
    Sent,
    appended_texts,
    cancel_latencies,
    completed_sleeps,
    judge,
    noted_texts,
    plan,
    storm,
)
from wire import open_client

__all__ = ["Settings", "main", "run_benchmark"]

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "cancel_storm.json"
#: Issue 19, item 1: the cancel's p99 to its terminal frame through the relay (ms).
TARGET_P99_MS = 5.0
AGENTS = 8
MODES = {"one": 0, "workers": 2, "direct": 2}


@attrs.frozen(kw_only=True)
class Settings:
    quick: bool = False
    modes: tuple[str, ...] = ("one", "workers", "direct")
    repeats: int = 3
    #: Appends, notes and sleeps per storm.
    calls: tuple[int, int, int] = (2000, 2000, 600)
    #: Calls in flight, one run of every mode per level.
    in_flight: tuple[int, ...] = (32,)

    @classmethod
    def quick_run(cls) -> Settings:
        return cls(quick=True, repeats=1, calls=(200, 200, 60))


# -- one storm --------------------------------------------------------------------------------


async def _agents(address: str, cwd: Path) -> tuple[list[str], dict[str, Path]]:
    """``AGENTS`` new agents and their session log paths."""
    async with open_client(address) as client:
        agents = [
            (await client.call("agents/create", {"cwd": str(cwd)}))["agentId"]
            for _ in range(AGENTS)
        ]
        paths = {
            agent: Path((await client.call("sessions/info", {"agentId": agent}))["path"])
            for agent in agents
        }
    return agents, paths


async def _owners(address: str, agents: list[str]) -> dict[str, str]:
    """The endpoint of each agent's owning worker, from the supervisor's shard map (as
    ``open_cluster_client`` routes), once every agent's shard has an owner."""
    for _ in range(100):
        try:
            return resolve_routes(await cluster_map(address), agents)
        except RuntimeError:
            await trio.sleep(0.1)
    raise BenchError("the shard map named no owner for some agents' shards for 10 s")


async def _calls_admitted(address: str) -> int:
    """How many calls the server at ``address`` has admitted (``callsTotal`` of ``system/stats``),
    this one included."""
    async with open_client(address) as client:
        return int((await client.call("system/stats"))["callsTotal"])


async def _effects(address: str, agents: list[str], tag: str) -> tuple[set[str], set[str]]:
    """The notes the agents hold, and the sleeps (labels with ``tag``) that ran to their end,
    asked of the server, or of each worker (from the shard map of its ``system/describe``)."""
    async with open_client(address) as client:
        described = await client.call("system/describe")
    workers = list(described.get("cluster", {}).get("workers", {}).values()) or [address]
    return await noted_texts(address, agents), await completed_sleeps(workers, tag)


def _storm_once(
    mode: str, in_flight: int, repeat: int, settings: Settings, env: dict[str, str]
) -> dict[str, Any]:
    """A fresh server in ``mode``, one storm against it with ``in_flight`` calls at a time, and
    what its answers claimed."""
    workers = MODES[mode]
    appends, notes, sleeps = settings.calls
    with tempfile.TemporaryDirectory(prefix="bench-cancel-storm-") as tmp:
        endpoint = f"ipc://{tmp}/s.sock"
        argv = [sys.executable, "-m", "actors", "serve", "--endpoint", endpoint]
        argv += ["--data", f"{tmp}/data", *(["--workers", str(workers)] if workers else [])]
        cwd = Path(tmp) / "cwd"
        cwd.mkdir()
        with server_process(argv, ready_prefix=READY_LINE, cwd=ROOT, env=env):
            agents, paths = trio.run(_agents, endpoint, cwd)
            routes = trio.run(_owners, endpoint, agents) if mode == "direct" else None
            tag = f"{mode}-{repeat}-{os.getpid()}"
            calls = plan(
                agents, appends=appends, notes=notes, sleeps=sleeps, tag=tag, seed=19 + repeat
            )
            calls_before = trio.run(_calls_admitted, endpoint)
            started, busy_before = time.monotonic(), machine_busy_seconds()
            sent = storm(endpoint, calls, in_flight=in_flight, settle=0.2, routes=routes)
            last = max((s.received for s in sent if s.received is not None), default=started)
            # Every call has ended by the last frame, so the settle after it adds next to nothing.
            busy = machine_busy_seconds() - busy_before
            admitted_at_address = trio.run(_calls_admitted, endpoint) - calls_before - 1
            noted, completed = trio.run(_effects, endpoint, agents, tag)
        logged = appended_texts(paths)
    by_endpoint = {
        kind: [s for s in sent if s.endpoint == name]
        for kind, name in (
            ("append", "sessions/append"),
            ("note", "diagnostics/note"),
            ("sleep", "diagnostics/sleep"),
        )
    }
    verdicts = [
        judge("append", by_endpoint["append"], logged),
        judge("note", by_endpoint["note"], noted),
        judge("sleep", by_endpoint["sleep"], completed),
    ]
    false_answers = [
        f"{v.kind}: {problem}"
        for v in verdicts
        for problem in [*v.lied_no_effect, *(f"acknowledged, missing: {m}" for m in v.lost_acks)]
    ]
    if false_answers or any(v.not_one_frame for v in verdicts):
        raise BenchError(
            f"{mode}, {in_flight} in flight: answers that were not the truth: {false_answers[:5]} "
            f"(calls without exactly one terminal frame: "
            f"{sum(len(v.not_one_frame) for v in verdicts)})"
        )
    return {
        "sent": sent,
        "seconds": round(last - started, 3),
        "coresBusy": round(busy / (last - started), 2) if last > started else None,
        "admittedAtAddress": admitted_at_address,
        "codes": {v.kind: v.codes for v in verdicts},
    }


def _run_mode(mode: str, in_flight: int, settings: Settings, env: dict[str, str]) -> dict[str, Any]:
    storms = []
    for repeat in range(settings.repeats):
        progress(f"{mode}, {in_flight} in flight: storm {repeat + 1} of {settings.repeats}")
        storms.append(_storm_once(mode, in_flight, repeat, settings, env))
    sent: list[Sent] = [call for one in storms for call in one["sent"]]
    summaries = {
        ended: latency_summary([round(x * 1e9) for x in cancel_latencies(sent, ended)])
        for ended in ("all", "no-effect", "queued", "running", "result")
    }
    all_p99 = summaries["all"]["p99Us"]
    progress(
        f"{mode}, {in_flight} in flight: cancel → terminal frame p99 {all_p99} µs "
        f"over {len(sent)} calls"
    )
    return {
        "mode": mode,
        "workers": MODES[mode],
        "inFlight": in_flight,
        "calls": len(sent),
        "stormSeconds": [one["seconds"] for one in storms],
        "coresBusy": [one["coresBusy"] for one in storms],
        "admittedAtAddress": [one["admittedAtAddress"] for one in storms],
        "codes": [one["codes"] for one in storms],
        "cancelToTerminal": summaries,
    }


def run_benchmark(settings: Settings) -> dict[str, Any]:
    """Every mode's storms, one after the other; returns the report."""
    started_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    clock, steal, machine = time.perf_counter(), steal_seconds(), machine_info()
    env = server_env(ROOT)
    # Level by level, so that the modes of one level run close together in time.
    runs = [
        _run_mode(mode, in_flight, settings, env)
        for in_flight in settings.in_flight
        for mode in settings.modes
    ]
    elapsed = time.perf_counter() - clock
    record_steal(machine, steal, elapsed)
    targets = [_relay_target(run) for run in runs if run["mode"] == "workers"]
    appends, notes, sleeps = settings.calls
    return {
        "benchmark": "cancel-storm",
        "startedAt": started_at,
        "elapsedSeconds": round(elapsed, 3),
        "config": {
            "quick": settings.quick,
            "modes": list(settings.modes),
            "repeats": settings.repeats,
            "appends": appends,
            "notes": notes,
            "sleeps": sleeps,
            "inFlight": list(settings.in_flight),
            "agents": AGENTS,
            "command": "python -m actors serve --endpoint ipc://TMP/s.sock --data TMP/data "
            "[--workers 2]",
        },
        "machine": machine,
        "runs": runs,
        "targets": [t.as_json() for t in targets],
        "allPassed": all(t.passed for t in targets),
    }


def _relay_target(run: dict[str, Any]) -> Target:
    p99 = run["cancelToTerminal"]["all"]["p99Us"]
    return Target(
        name="cancel → terminal frame p99 through the relay "
        f"(--workers 2, {run['inFlight']} in flight)",
        value=None if p99 is None else p99 / 1000,
        limit=TARGET_P99_MS,
        comparison="<=",
        unit=" ms",
    )


# -- output -----------------------------------------------------------------------------------


#: Table labels of the no-effect answers split by where the cancel found the call.
_ENDED_LABELS = {"queued": "no-effect, queued", "running": "no-effect, running"}


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.2f}"


def _run_label(run: dict[str, Any]) -> str:
    return f"{run['mode']}, {run['inFlight']} in flight"


def render_table(report: dict[str, Any]) -> str:
    config = report["config"]
    levels = ", ".join(str(n) for n in config["inFlight"])
    lines = [
        f"cancel storm: {config['appends']} appends, {config['notes']} notes, "
        f"{config['sleeps']} sleeps over {config['agents']} agents, {levels} in "
        f"flight, each cancelled 0-5 ms after sending; {config['repeats']} storm(s) per mode "
        "and level",
        "",
    ]
    rows = [["cancel → terminal frame (ms)", "ended", "n", "p50", "p90", "p99", "max"]]
    for run in report["runs"]:
        for ended, summary in run["cancelToTerminal"].items():
            rows.append(
                [
                    _run_label(run),
                    _ENDED_LABELS.get(ended, ended),
                    str(summary["count"]),
                    _ms(summary["p50Us"]),
                    _ms(summary["p90Us"]),
                    _ms(summary["p99Us"]),
                    _ms(summary["maxUs"]),
                ]
            )
    lines.append(format_table(rows))
    if len(config["inFlight"]) > 1:
        lines.append("")
        lines.append(format_table(_p99_by_level_rows(report)))
    lines.append("")
    lines.append(
        "storm seconds: "
        + "; ".join(
            f"{_run_label(run)} {', '.join(f'{s:.2f}' for s in run['stormSeconds'])}"
            for run in report["runs"]
        )
    )
    lines.append("truth: every answer checked against the logs, notes and endings (none false)")
    if report["targets"]:
        lines.append("")
        lines.append(format_table(target_rows(report["targets"])))
    return "\n".join(lines)


def _p99_by_level(report: dict[str, Any]) -> dict[str, dict[int, float]]:
    """Per mode, the p99 (ms) of every cancel by calls in flight."""
    by_mode: dict[str, dict[int, float]] = {}
    for run in report["runs"]:
        p99 = run["cancelToTerminal"]["all"]["p99Us"]
        if p99 is not None:
            by_mode.setdefault(run["mode"], {})[run["inFlight"]] = p99 / 1000
    return by_mode


def _p99_by_level_rows(report: dict[str, Any]) -> list[list[str]]:
    """The p99 of every cancel, and how many of the machine's cores were busy during the
    storms (median), per mode by calls in flight."""
    levels = report["config"]["inFlight"]
    rows = [["p99 (ms) by calls in flight", *(str(n) for n in levels)]]
    for mode, points in _p99_by_level(report).items():
        rows.append([mode, *(f"{points[n]:.2f}" if n in points else "-" for n in levels)])
    cores = report["machine"].get("cpuCount") or os.cpu_count()
    for mode in dict.fromkeys(run["mode"] for run in report["runs"]):
        busy = {
            run["inFlight"]: statistics.median(b for b in run["coresBusy"] if b is not None)
            for run in report["runs"]
            if run["mode"] == mode and any(b is not None for b in run["coresBusy"])
        }
        label = f"{mode}: cores busy (of {cores})"
        rows.append([label, *(f"{busy[n]:.2f}" if n in busy else "-" for n in levels)])
    return rows


def plot_report(path: Path, report: dict[str, Any]) -> None:
    """The CDFs by how the call ended (one level), or of every cancel by mode and level beside
    the p99 against calls in flight (several levels)."""
    several = len(report["config"]["inFlight"]) > 1
    if several:
        cdfs = {_run_label(run): run["cancelToTerminal"]["all"]["cdf"] for run in report["runs"]}
    else:
        cdfs = {
            f"{run['mode']}: {ended}": run["cancelToTerminal"][ended]["cdf"]
            for run in report["runs"]
            for ended in ("queued", "running", "result")
        }
    target = f"target {TARGET_P99_MS:g} ms"
    plot_png(
        path,
        title="cancel storm: cancel → terminal frame",
        cdfs=cdfs,
        throughput=_p99_by_level(report) if several else None,
        in_flight_label="calls in flight",
        cdf_title="every cancel, by mode and level" if several else "by mode and how it ended",
        limits={target: TARGET_P99_MS * 1000},
        left_axis=("p99 against load", "p99 (ms)"),
        left_limits={target: TARGET_P99_MS},
    )


def _modes(text: str) -> tuple[str, ...]:
    modes = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [mode for mode in modes if mode not in MODES]
    if not modes or unknown:
        raise ValueError(f"modes are {', '.join(MODES)}; got {text!r}")
    return modes


def _calls(text: str) -> tuple[int, int, int]:
    problem = f"--calls is APPENDS,NOTES,SLEEPS (counts, not all 0); got {text!r}"
    try:
        parts = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(problem) from None
    if len(parts) != 3 or any(part < 0 for part in parts) or not any(parts):
        raise ValueError(problem)
    return parts[0], parts[1], parts[2]


def main(argv: Sequence[str] | None = None) -> int:
    parser = bench_parser(
        "python -m bench.cancel_storm",
        __doc__,
        out=DEFAULT_OUT,
        quick_help="one storm of 460 calls per mode and level",
    )
    parser.add_argument("--modes", type=_modes, help="one, workers, direct (default all three)")
    parser.add_argument("--repeats", type=int, help="storms per mode (default 3)")
    parser.add_argument("--calls", type=_calls, help="APPENDS,NOTES,SLEEPS (default 2000,2000,600)")
    parser.add_argument(
        "--in-flight",
        type=in_flight_levels,
        help="calls in flight, or several levels such as 4,8,16,32 (default 32)",
    )
    args = parser.parse_args(argv)
    changes = option_changes(
        parser, args, ("modes", "repeats", "calls", "in_flight"), positive=("repeats",)
    )
    settings = attrs.evolve(Settings.quick_run() if args.quick else Settings(), **changes)
    report = run_guarded(
        "bench.cancel_storm",
        functools.partial(run_benchmark, settings),
        (BenchError, OSError, TimeoutError),
    )
    if isinstance(report, Stopped):
        return report.status
    return publish_with_plot(args.out, report, plot=plot_report, render=render_table)


if __name__ == "__main__":
    sys.exit(main())
