"""Echo benchmark: agent-actors' full stack against a raw pyzmq+msgpack loop, in one run.

``python -m bench.echo [--quick] [--calls N] [--duration S] [--cancels N] [--out PATH]``

Each stack's server runs in its own process on tcp loopback; the clients run here, one
connection per stack. agent-actors: an echo through ``wire.open_client`` against ``python -m
actors serve``, N in flight = N trio tasks, once per handler kind: ``diagnostics/echoSync``, a
plain ``def`` handler that the server runs inline (no task, no cancel scope) once the agent is
active and its mailbox turn is free, and ``diagnostics/echo``, an ``async def`` handler that gets
a task and a cancel scope per call. Both go through the full stack: ``@Remote`` declaration,
argument validation, agent lookup and mailbox admission. The targets are judged on the ``def``
handler (``ours``); the ``async def`` figures are reported beside them (``oursAsync``). Raw: a
blocking ROUTER echo loop (:func:`serve_raw`) and a blocking DEALER keeping N requests
outstanding. Cancel-to-quiescence compares the client's ``time.monotonic()`` at the cancel with
the server's at the end of the handler (one clock per host). ``bench/README.md`` has the rest.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import msgpack
import trio
import zmq

from actors._serve import READY_LINE
from bench._common import (
    BenchError,
    Stopped,
    Target,
    Throughput,
    format_count,
    format_ratio,
    format_table,
    latency_summary,
    machine_info,
    plot_png,
    progress,
    publish_with_plot,
    ratio,
    record_steal,
    run_guarded,
    server_env,
    server_process,
    steal_seconds,
    steal_warning,
    target_rows,
)
from bench.peers import _raw as raw_peer
from wire import Client, WireError, open_client

__all__ = ["IN_FLIGHT", "PAYLOAD", "Settings", "main", "run_benchmark", "serve_raw"]

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "echo.json"
#: Bind a free port on loopback only.
ENDPOINT = "tcp://127.0.0.1:0"
PAYLOAD = bytes(range(64))
IN_FLIGHT = (1, 16, 128)
#: The endpoint and handler kind of each agent-actors echo (report key → (endpoint, kind)).
HANDLERS = {
    "ours": ("diagnostics/echoSync", "def: runs inline in the server's receive path"),
    "oursAsync": ("diagnostics/echo", "async def: a task and a cancel scope per call"),
}
RAW_READY_LINE = "bench-raw-echo: serving on"


@attrs.frozen(kw_only=True)
class Settings:
    #: Timed sequential calls per stack (after ``warmup`` untimed ones).
    calls: int = 10_000
    #: Seconds of calls at each in-flight level, per stack.
    duration: float = 3.0
    #: Cancel-to-quiescence samples.
    cancels: int = 300
    warmup: int = 500
    quick: bool = False
    #: Sequential sampling stops early once it has run this long (seconds).
    sequential_limit: float = 60.0
    #: Any agent-actors phase taking longer than this fails the run (seconds).
    phase_limit: float = 300.0
    #: A raw reply later than this fails the run (seconds).
    reply_timeout: float = 10.0

    @classmethod
    def quick_run(cls) -> Settings:
        return cls(calls=300, duration=0.3, cancels=20, warmup=50, quick=True)


# -- raw baseline -----------------------------------------------------------------------------


def serve_raw(endpoint: str) -> int:
    """The raw server: a blocking ROUTER echo loop, until SIGTERM kills the process."""
    raw_peer.serve(endpoint, ready=RAW_READY_LINE, hwm=None)
    return 0


class RawClient:
    """Blocking DEALER client of :func:`serve_raw`; requests look like wire ``call`` frames."""

    def __init__(self, endpoint: str, *, reply_timeout: float) -> None:
        self._timeout = reply_timeout
        self._socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.SNDHWM, 10_000)
        self._socket.setsockopt(zmq.RCVHWM, 10_000)
        self._socket.setsockopt(zmq.RCVTIMEO, int(reply_timeout * 1000))
        self._socket.connect(endpoint)
        self._next_id = 0

    def close(self) -> None:
        self._socket.close(linger=0)

    def _send(self) -> int:
        self._next_id += 1
        args = {"agentId": "agent-raw", "payload": PAYLOAD}
        call = {"type": "call", "id": self._next_id, "endpoint": "diagnostics/echo", "args": args}
        self._socket.send(msgpack.packb(call))
        return self._next_id

    def _receive(self) -> int:
        try:
            reply = msgpack.unpackb(self._socket.recv())
        except zmq.Again:
            raise BenchError(f"raw echo: no reply within {self._timeout:g} s") from None
        if reply.get("value") != PAYLOAD:
            raise BenchError(f"raw echo: unexpected reply {reply!r}")
        call_id: int = reply["id"]
        return call_id

    def sequential(self, calls: int, limit: float) -> list[int]:
        samples: list[int] = []
        end = time.perf_counter() + limit
        while len(samples) < calls and time.perf_counter() < end:
            started = time.perf_counter_ns()
            self._send()
            self._receive()
            samples.append(time.perf_counter_ns() - started)
        return samples

    def windowed(self, window: int, duration: float) -> Throughput:
        """Keep ``window`` requests outstanding for ``duration`` s, then drain."""
        sent_at: dict[int, int] = {}
        start = last = time.perf_counter_ns()
        end = start + int(duration * 1e9)
        for _ in range(window):
            sent_at[self._send()] = time.perf_counter_ns()
        latencies: list[int] = []
        while sent_at:
            call_id = self._receive()
            last = time.perf_counter_ns()
            latencies.append(last - sent_at.pop(call_id))
            if last < end:
                sent_at[self._send()] = time.perf_counter_ns()
        return Throughput(
            in_flight=window,
            calls=len(latencies),
            seconds=(last - start) / 1e9,
            latencies_ns=latencies,
        )


# -- the phases ------------------------------------------------------------------------------


async def measure(
    raw_endpoint: str, ours_endpoint: str, settings: Settings
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every phase for every stack, interleaved phase by phase: raw, then agent-actors with the
    ``def`` handler, then with the ``async def`` one. The machine's load drifts (it is shared),
    and ratios are only fair between neighbours in time.

    The raw client is blocking; its phases run in a worker thread while this trio loop waits
    (one thread at a time uses its socket). Returns ``(raw, ours)``; ``ours`` is the ``def``
    handler's stack with the ``async def`` one under ``async``.
    """
    raw_client = RawClient(raw_endpoint, reply_timeout=settings.reply_timeout)
    run_raw = trio.to_thread.run_sync
    try:
        async with open_client(ours_endpoint, name="bench.echo") as client:
            agent = await client.call("agents/create", {"title": "echo benchmark"})
            args = {"agentId": agent["agentId"], "payload": PAYLOAD}

            def echo_of(name: str) -> Callable[[], Awaitable[None]]:
                async def echo() -> None:
                    if await client.call(name, args) != PAYLOAD:
                        raise BenchError(f"{name} returned something else than its payload")

                return echo

            echoes = {key: echo_of(name) for key, (name, _) in HANDLERS.items()}
            stacks: dict[str, dict[str, Any]] = {
                key: {"throughput": []} for key in ("raw", *HANDLERS)
            }
            with trio.fail_after(settings.phase_limit):
                await run_raw(raw_client.sequential, settings.warmup, settings.sequential_limit)
                for echo in echoes.values():
                    for _ in range(settings.warmup):
                        await echo()
                progress(f"raw: {settings.calls} sequential calls")
                stacks["raw"]["sequential"] = await run_raw(
                    raw_client.sequential, settings.calls, settings.sequential_limit
                )
                for key, echo in echoes.items():
                    progress(f"agent-actors: {settings.calls} sequential calls, {HANDLERS[key][0]}")
                    stacks[key]["sequential"] = await _sequential(
                        echo, settings.calls, settings.sequential_limit
                    )
            for tasks in IN_FLIGHT:
                with trio.fail_after(settings.phase_limit):
                    progress(f"raw: {tasks} in flight for {settings.duration:g} s")
                    stacks["raw"]["throughput"].append(
                        await run_raw(raw_client.windowed, tasks, settings.duration)
                    )
                    for key, echo in echoes.items():
                        progress(
                            f"agent-actors: {tasks} in flight for {settings.duration:g} s, "
                            f"{HANDLERS[key][0]}"
                        )
                        stacks[key]["throughput"].append(
                            await _in_flight(echo, tasks, settings.duration)
                        )
            progress(f"agent-actors: {settings.cancels} cancel-to-quiescence samples")
            cancels = []
            with trio.fail_after(settings.phase_limit):
                for i in range(settings.cancels):
                    cancels.append(await _cancel_once(client, agent["agentId"]))
                    if (i + 1) % 100 == 0:
                        progress(f"agent-actors: {i + 1}/{settings.cancels} cancels")
    finally:
        raw_client.close()
    ours = stacks["ours"] | {"cancel": cancels, "async": stacks["oursAsync"]}
    return stacks["raw"], ours


async def _sequential(echo: Callable[[], Awaitable[None]], calls: int, limit: float) -> list[int]:
    samples: list[int] = []
    end = time.perf_counter() + limit
    while len(samples) < calls and time.perf_counter() < end:
        started = time.perf_counter_ns()
        await echo()
        samples.append(time.perf_counter_ns() - started)
    return samples


async def _in_flight(
    echo: Callable[[], Awaitable[None]], tasks: int, duration: float
) -> Throughput:
    """``tasks`` trio tasks each looping calls on the one connection for ``duration`` s."""
    latencies: list[int] = []
    start = last = time.perf_counter_ns()
    end = start + int(duration * 1e9)

    async def worker() -> None:
        nonlocal last
        while (started := time.perf_counter_ns()) < end:
            await echo()
            now = time.perf_counter_ns()
            latencies.append(now - started)
            last = max(last, now)

    async with trio.open_nursery() as nursery:
        for _ in range(tasks):
            nursery.start_soon(worker)
    return Throughput(
        in_flight=tasks, calls=len(latencies), seconds=(last - start) / 1e9, latencies_ns=latencies
    )


async def _cancel_once(client: Client, agent_id: str) -> int:
    """Nanoseconds from the caller's cancel to the server's handler having ended."""
    label = f"bench-cancel-{uuid.uuid4().hex}"
    scope = trio.CancelScope()

    async def sleeper() -> None:
        with scope:
            args = {"agentId": agent_id, "seconds": 30.0, "label": label}
            await client.call("diagnostics/sleep", args)
            raise BenchError("diagnostics/sleep returned although it was cancelled")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sleeper)
        await _wait_running(client)
        t0 = time.monotonic()
        scope.cancel()
    # Wait before asking so our own polling does not compete with the handler being timed.
    await trio.sleep(0.005)
    while True:
        endings = await client.call("diagnostics/endings")
        ending = next((e for e in reversed(endings) if e["call"] == label), None)
        if ending is not None:
            break
        await trio.sleep(0.005)
    if ending["outcome"] != "cancelled":
        raise BenchError(f"the cancelled sleep ended {ending['outcome']!r}")
    latency = round((float(ending["endedAt"]) - t0) * 1e9)
    if latency < 0:
        raise BenchError(f"the sleep ended {-latency} ns before it was cancelled")
    return latency


async def _wait_running(client: Client, within: float = 5.0) -> None:
    """Return once the server reports the sleep as running (past the agent's mailbox)."""
    await trio.sleep(0.005)
    with trio.move_on_after(within):
        while True:
            stats = await client.call("system/stats")
            # The system/stats call counts itself as running.
            if stats["calls"].get("running", 0) >= 2:
                return
            await trio.sleep(0.002)
    raise BenchError(f"diagnostics/sleep was not running after {within:g} s")


# -- the run ----------------------------------------------------------------------------------


def run_benchmark(settings: Settings) -> dict[str, Any]:
    """Run both stacks, phase by phase, and return the report (see ``bench/README.md``)."""
    started_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    clock = time.perf_counter()
    machine = machine_info()
    steal = steal_seconds()
    env = server_env(ROOT)
    raw_argv = [sys.executable, "-m", "bench.echo", "--serve-raw", ENDPOINT]
    with tempfile.TemporaryDirectory(prefix="bench-echo-") as tmp:
        argv = [sys.executable, "-m", "actors", "serve", "--endpoint", ENDPOINT, "--data", tmp]
        progress("raw: starting the ROUTER echo process")
        with server_process(raw_argv, ready_prefix=RAW_READY_LINE, cwd=ROOT, env=env) as raw_at:
            progress("agent-actors: starting `python -m actors serve`")
            with server_process(argv, ready_prefix=READY_LINE, cwd=ROOT, env=env) as ours_at:
                raw, ours = trio.run(measure, raw_at[0], ours_at[0], settings)
    record_steal(machine, steal, time.perf_counter() - clock)
    return build_report(settings, machine, raw, ours, started_at, time.perf_counter() - clock)


def build_report(
    settings: Settings,
    machine: dict[str, Any],
    raw: dict[str, Any],
    ours: dict[str, Any],
    started_at: str,
    elapsed: float,
) -> dict[str, Any]:
    stacks = {"raw": raw, "ours": ours}
    report: dict[str, Any] = {
        "benchmark": "echo",
        "startedAt": started_at,
        "elapsedSeconds": round(elapsed, 3),
        "config": {
            "quick": settings.quick,
            "calls": settings.calls,
            "warmupCalls": settings.warmup,
            "duration": settings.duration,
            "cancels": settings.cancels,
            "inFlight": list(IN_FLIGHT),
            "payloadBytes": len(PAYLOAD),
            "transport": "tcp://127.0.0.1 (loopback), one connection per stack",
        },
        "machine": machine,
    }
    for name, data in stacks.items():
        report[name] = {
            "sequential": latency_summary(data["sequential"]),
            "throughput": [t.as_json() for t in data["throughput"]],
        }
    report["ours"]["endpoint"], report["ours"]["handler"] = HANDLERS["ours"]
    report["ours"]["cancel"] = latency_summary(ours["cancel"])
    cancel_p99 = report["ours"]["cancel"]["p99Us"]
    ratios = _ratios(report["ours"], report["raw"], ours["throughput"], raw["throughput"])
    report["ratios"] = ratios
    targets = _targets(ratios, cancel_p99)
    report["targets"] = [t.as_json() for t in targets]
    other = ours.get("async")
    if other is not None:
        endpoint, handler = HANDLERS["oursAsync"]
        summary: dict[str, Any] = {
            "endpoint": endpoint,
            "handler": handler,
            "sequential": latency_summary(other["sequential"]),
            "throughput": [t.as_json() for t in other["throughput"]],
        }
        summary["ratios"] = _ratios(summary, report["raw"], other["throughput"], raw["throughput"])
        # The cancel figure is the same measurement (an async handler) in both lists.
        summary["targets"] = [t.as_json() for t in _targets(summary["ratios"], cancel_p99)]
        report["oursAsync"] = summary
    report["allPassed"] = all(t.passed for t in targets)
    return report


def _ratios(
    ours: dict[str, Any], raw: dict[str, Any], ours_t: list[Throughput], raw_t: list[Throughput]
) -> dict[str, float | None]:
    ours_seq, raw_seq = ours["sequential"], raw["sequential"]
    ratios = {
        f"sequential{k[:3].upper()}": ratio(ours_seq[k], raw_seq[k]) for k in ("p50Us", "p99Us")
    }
    for mine, theirs in zip(ours_t, raw_t, strict=True):
        ratios[f"throughput{mine.in_flight}"] = ratio(
            mine.calls_per_second, theirs.calls_per_second
        )
    return ratios


def _targets(ratios: dict[str, float | None], cancel_p99: float | None) -> list[Target]:
    # Issue 2 item 9: "throughput at 128 in flight at least 0.4 x the raw loop; sequential p50
    # at most 2 x the raw loop; cancel p99 at most 1 ms".
    goals = [
        ("throughput at 128 in flight >= 0.4 x raw", ratios["throughput128"], ">=", 0.4, "x"),
        ("sequential p50 <= 2 x raw", ratios["sequentialP50"], "<=", 2.0, "x"),
        ("cancel-to-quiescence p99 <= 1 ms", cancel_p99 and cancel_p99 / 1000, "<=", 1.0, " ms"),
    ]
    return [
        Target(name=name, value=value, comparison=comparison, limit=limit, unit=unit)
        for name, value, comparison, limit, unit in goals
    ]


def render_table(report: dict[str, Any]) -> str:
    """The report as text: absolute numbers and ratios (both handler kinds when measured),
    then each target with PASS/MISS."""
    raw, ours, ratios = report["raw"], report["ours"], report["ratios"]
    other = report.get("oursAsync")
    rows = [["", "raw pyzmq+msgpack", "agent-actors, def", "ours/raw"]]
    if other is not None:
        rows[0] += ["agent-actors, async def", "ours/raw"]

    stacks = [(ours, ratios)] + ([(other, other["ratios"])] if other is not None else [])

    def add(label: str, path: tuple[str | int, ...], key: str) -> None:
        """One row: ``path`` leads to the figure inside each stack, ``key`` names its ratio."""
        row = [label, format_count(_dig(raw, path))]
        for stack, stack_ratios in stacks:
            row += [format_count(_dig(stack, path)), format_ratio(stack_ratios[key])]
        rows.append(row)

    for key in ("p50Us", "p99Us"):
        add(f"sequential {key[:3]} (us)", ("sequential", key), f"sequential{key[:3].upper()}")
    for i, raw_t in enumerate(raw["throughput"]):
        n = raw_t["inFlight"]
        add(
            f"throughput, {n} in flight (calls/s)",
            ("throughput", i, "callsPerSecond"),
            f"throughput{n}",
        )
    for key in ("p50Us", "p99Us"):
        rows.append(
            [f"cancel-to-quiescence {key[:3]} (us)", "n/a", format_count(ours["cancel"][key]), ""]
            + (["(same: async sleep)", ""] if other is not None else [])
        )
    config, machine = report["config"], report["machine"]
    header = (
        f"echo benchmark: {config['payloadBytes']}-byte payload, {config['transport']}; "
        f"{config['calls']} sequential calls, {config['duration']:g} s per in-flight level, "
        f"{ours['cancel']['count']} cancels\n"
        f"{machine['cpuCount']} CPUs ({machine['cpuModel']}), Python {machine['python']}, "
        f"pyzmq {machine['pyzmq']}, libzmq {machine['libzmq']}\n"
        f"targets judged on {ours.get('endpoint', 'diagnostics/echoSync')} "
        f"({ours.get('handler', HANDLERS['ours'][1])})"
    )
    warning = steal_warning(machine)
    if warning is not None:
        header += f"\n{warning}"
    targets = format_table(target_rows(report["targets"]))
    text = f"{header}\n\n{format_table(rows)}\n\ntargets, def handler:\n{targets}"
    if other is not None:
        text += (
            f"\n\nthe same targets for {other['endpoint']} ({other['handler']}):\n"
            f"{format_table(target_rows(other['targets']))}"
        )
    return text


def _dig(value: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def plot_report(path: Path, report: dict[str, Any]) -> None:
    stacks = {"raw pyzmq+msgpack": report["raw"], "agent-actors, def handler": report["ours"]}
    cdfs = {
        "raw sequential": report["raw"]["sequential"]["cdf"],
        "agent-actors sequential, def": report["ours"]["sequential"]["cdf"],
    }
    if "oursAsync" in report:
        stacks["agent-actors, async def handler"] = report["oursAsync"]
        cdfs["agent-actors sequential, async def"] = report["oursAsync"]["sequential"]["cdf"]
    cdfs["agent-actors cancel-to-quiescence"] = report["ours"]["cancel"]["cdf"]
    plot_png(
        path,
        title="echo, 64-byte payload, tcp loopback",
        throughput={
            label: {t["inFlight"]: t["callsPerSecond"] for t in stack["throughput"]}
            for label, stack in stacks.items()
        },
        cdfs=cdfs,
        limits={"1 ms cancel target": 1000.0},
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.echo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="tiny counts: a smoke run of seconds")
    parser.add_argument("--calls", type=int, help="sequential calls per stack (default 10000)")
    parser.add_argument("--duration", type=float, help="seconds per in-flight level (default 3)")
    parser.add_argument("--cancels", type=int, help="cancel-to-quiescence samples (default 300)")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="JSON report path; the PNG goes beside it"
    )
    parser.add_argument("--serve-raw", metavar="ENDPOINT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_raw:
        return serve_raw(args.serve_raw)
    settings = Settings.quick_run() if args.quick else Settings()
    changes = {
        k: getattr(args, k)
        for k in ("calls", "duration", "cancels")
        if getattr(args, k) is not None
    }
    if any(value <= 0 for value in changes.values()):
        parser.error("--calls, --duration and --cancels must be positive")
    settings = attrs.evolve(settings, **changes)
    expected = (BenchError, WireError, zmq.ZMQError, trio.TooSlowError, OSError)
    report = run_guarded("bench.echo", lambda: run_benchmark(settings), expected)
    if isinstance(report, Stopped):
        return report.status
    return publish_with_plot(args.out, report, plot=plot_report, render=render_table)


if __name__ == "__main__":
    sys.exit(main())
