"""The load benchmark's TypeScript client stack: its results, report and build check on
synthetic input, and its real driver against a real server for a second of each workload."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is not an installed package (pyproject lists actors, wire)
    sys.path.insert(0, str(ROOT))

from actors._serve import READY_LINE  # noqa: E402
from bench import _load_typescript as typescript  # noqa: E402
from bench import load  # noqa: E402
from bench._common import server_process  # noqa: E402
from bench._load_generator import ServerMonitor, find_child, merge, run_phase  # noqa: E402
from bench._load_jobs import Job  # noqa: E402
from bench._load_ours import setup_server  # noqa: E402
from bench._load_plots import plot_report  # noqa: E402
from bench._load_report import (  # noqa: E402
    echo_ratios,
    evaluate_targets,
    render_tables,
    typescript_ratios,
)
from bench._load_stats import decode_sum, encode_samples, summarize  # noqa: E402

_MACHINE = {"cpuCount": 2, "cpuModel": "test", "python": "3", "pyzmq": "x", "libzmq": "y"}
_LABELS = {
    "ours": "agent-actors (def)",
    "typescript": typescript.LABEL,
    "raw": "raw pyzmq+msgpack",
}


@functools.cache
def _latency(p99_us: float) -> dict[str, Any]:
    samples = [int(p99_us * 1000 * (i + 1) / 100) for i in range(100)]
    return summarize(decode_sum([encode_samples(samples)]))


def _phase(in_flight: int, calls_per_second: float) -> dict[str, Any]:
    return {
        "inFlight": in_flight,
        "calls": int(calls_per_second),
        "seconds": 1.0,
        "callsPerSecond": calls_per_second,
        "latency": _latency(1000.0),
        "series": {},
        "counters": {},
        "clientCpuSeconds": 0.5,
        "server": {"cpuSeconds": 0.9, "cpuUsPerCall": 10.0, "peakRssMiB": 30.0},
    }


def _cancel(p99_us: float) -> dict[str, Any]:
    return {"latency": _latency(p99_us), "settleSeconds": 0.005, "loadNote": ""}


def _report() -> dict[str, Any]:
    rates = {"ours": (3_000.0, 30_000.0), "typescript": (6_000.0, 24_000.0)}
    rates |= {"raw": (5_000.0, 60_000.0)}
    stacks = {name: [_phase(1, low), _phase(128, high)] for name, (low, high) in rates.items()}
    report: dict[str, Any] = {
        "config": {
            "transport": "tcp",
            "targetInFlight": 128,
            "processes": 2,
            "agents": 8,
            "durationSeconds": 1.0,
            "quick": False,
        },
        "machine": _MACHINE,
        "stacks": {name: {"label": _LABELS[name], "status": "measured"} for name in rates},
        "echo": {"64B": {"payloadBytes": 64, "inFlight": [1, 128], "stacks": stacks}},
        "cancel": {"idle": _cancel(500.0)},
        "cancelTypescript": {"idle": _cancel(700.0), "underLoad": _cancel(3_000.0)},
    }
    report["ratios"] = echo_ratios(report["echo"])
    report["typescriptRatios"] = typescript_ratios(report["echo"])
    report["targets"] = evaluate_targets(report)
    return report


def test_typescript_results_merge_with_the_python_processes() -> None:
    """Raw nanosecond samples become the histograms a Python process sends, and add up."""
    from_ts = typescript.samples_json(
        {
            "calls": 3,
            "counters": {"error:overloaded": 1},
            "samplesNs": {"latency": [1_000, 2_000, 3_000], "cancelToQuiescence": [500_000]},
            "cpuSeconds": 0.25,
        }
    )
    assert set(from_ts["histograms"]) == {"latency", "cancelToQuiescence"}
    from_py = {
        "calls": 1,
        "counters": {},
        "histograms": {"latency": encode_samples([4_000])},
        "cpuSeconds": 0.5,
    }
    merged = merge([from_ts, from_py], duration=1.0)
    assert merged["calls"] == 4 and merged["latency"]["count"] == 4
    assert merged["latency"]["p50Us"] == pytest.approx(2.0, rel=1e-3)
    assert merged["series"]["cancelToQuiescence"]["p50Us"] == pytest.approx(500.0, rel=1e-3)
    assert merged["counters"] == {"error:overloaded": 1}
    assert merged["clientCpuSeconds"] == 0.75


def test_a_result_whose_samples_do_not_match_its_count_is_refused() -> None:
    """The call count and the latency samples must agree; a negative sample is a bug."""
    with pytest.raises(ValueError, match="2 calls but 1 latency"):
        typescript.samples_json({"calls": 2, "samplesNs": {"latency": [5]}})
    with pytest.raises(ValueError, match="negative"):
        typescript.samples_json({"calls": 1, "samplesNs": {"latency": [-5]}})


def test_the_report_sets_the_typescript_client_beside_the_python_one(tmp_path: Path) -> None:
    """Its own ratios (over the Python client and raw), no ours/peer ratio, its cancel rows."""
    report = _report()
    assert set(report["ratios"]["64B"]) == {"raw"}  # ours / peer: TypeScript is not a peer
    versus = report["typescriptRatios"]["64B"]
    assert versus["ours"] == {"1": 2.0, "128": 0.8}
    assert versus["raw"] == {"1": 1.2, "128": 0.4}
    text = render_tables(report)
    table = text.split("TypeScript client / stack by calls in flight")[1].splitlines()
    assert table[1].split()[-2:] == ["2.00x", "0.80x"]  # agent-actors (def)
    assert table[2].split()[-2:] == ["1.20x", "0.40x"]  # raw pyzmq+msgpack
    row = next(line for line in text.splitlines() if line.startswith(typescript.LABEL))
    assert row.split()[-2:] == ["6,000", "24,000"]  # calls/s, no ours/peer mark
    assert "TypeScript client, idle server" in text
    assert "TypeScript client, under echo load" in text
    plots = plot_report(report, tmp_path)
    assert [p.name for p in plots] == ["load-echo-64b.png", "load-cancel.png"]


def test_without_the_typescript_stack_the_report_has_no_trace_of_it() -> None:
    """A run without it (or with it skipped) prints no TypeScript tables or rows."""
    report = _report()
    del report["echo"]["64B"]["stacks"]["typescript"], report["cancelTypescript"]
    del report["stacks"]["typescript"]
    report["typescriptRatios"] = typescript_ratios(report["echo"])
    assert report["typescriptRatios"] == {"64B": {}}
    assert "TypeScript" not in render_tables(report)


def _touch(path: Path, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    os.utime(path, (mtime, mtime))


def test_the_build_is_redone_when_a_source_is_newer(tmp_path: Path) -> None:
    """npm ci when node_modules is missing or older than the lock file; a build when dist/ is
    missing or older than a source; nothing when everything is current."""
    client = tmp_path / "client"
    for name in ("package.json", "package-lock.json", "tsconfig.json", "src/a.ts", "bench/b.ts"):
        _touch(client / name, 1_000)
    assert typescript.build_reason(client) == "install"
    _touch(client / "node_modules" / ".package-lock.json", 1_000)
    assert typescript.build_reason(client) == "build"
    _touch(client / "dist" / "bench" / "load.js", 2_000)
    _touch(client / "dist" / "src" / "index.js", 2_000)
    assert typescript.build_reason(client) is None
    _touch(client / "bench" / "b.ts", 3_000)
    assert typescript.build_reason(client) == "build"
    _touch(client / "package-lock.json", 4_000)
    assert typescript.build_reason(client) == "install"


def test_without_node_or_npm_the_stack_is_skipped_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No Node.js, too old a Node.js, or an unbuilt client and no npm: a reason, not a failure."""
    client = tmp_path / "client"
    _touch(client / "package.json", 1_000)
    monkeypatch.setattr(typescript, "_node_version", lambda: None)
    assert "Node.js not installed" in (typescript.prepare_client(client) or "")
    monkeypatch.setattr(typescript, "_node_version", lambda: "v18.19.0")
    assert "20 or newer not installed (found v18" in (typescript.prepare_client(client) or "")
    monkeypatch.setattr(typescript, "_node_version", lambda: "v20.20.2")
    monkeypatch.setattr(typescript.shutil, "which", lambda name: None)
    reason = typescript.prepare_client(client) or ""
    assert "npm is not installed" in reason and "npm ci && npm run build" in reason
    assert "no TypeScript client" in (typescript.prepare_client(tmp_path / "none") or "")


def test_the_stack_is_on_by_default_and_can_be_left_out() -> None:
    """``--no-typescript`` leaves it out; ``--profile typescript`` profiles its server."""
    parser = load._parser()
    assert load._settings(parser, parser.parse_args([])).typescript is True
    assert load._settings(parser, parser.parse_args(["--quick"])).typescript is True
    assert load._settings(parser, parser.parse_args(["--no-typescript"])).typescript is False


def test_the_real_driver_measures_echo_and_cancels_against_a_real_server(tmp_path: Path) -> None:
    """Two Node load processes keep echo calls in flight, then one runs cancel probes; both
    phases come back through the same machinery as the Python client's (a few seconds)."""
    reason = typescript.prepare_client()
    if reason is not None:
        pytest.skip(reason)
    argv = [sys.executable, "-m", "actors", "serve", "--endpoint", "tcp://127.0.0.1:0"]
    argv += ["--data", str(tmp_path / "data")]
    with server_process(argv, ready_prefix=READY_LINE, cwd=ROOT) as addresses:
        address = addresses[0]
        monitor = ServerMonitor(find_child(argv))
        agents, _ = trio.run(setup_server, address, 4)
        base = Job(
            stack=typescript.STACK,
            address=address,
            agents=agents,
            calls=[typescript.ECHO_CALL],
            duration=0.5,
            warmup_calls=10,
        )
        echo = run_phase([attrs.evolve(base, worker=i, concurrency=2) for i in (0, 1)], monitor)
        cancel = run_phase([attrs.evolve(base, workload="cancel-probe")], monitor)
    assert echo["calls"] > 0 and echo["latency"]["count"] == echo["calls"]
    assert echo["counters"] == {} and echo["server"]["cpuSeconds"] > 0
    assert echo["clientCpuSeconds"] > 0 and echo["perProcess"] == [2, 2]
    samples = cancel["series"]["cancelToQuiescence"]
    assert samples["count"] > 0 and 0 < samples["p50Us"] < 100_000
