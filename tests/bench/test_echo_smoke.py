"""The echo benchmark: its report logic on synthetic numbers, and one quick real run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is not an installed package (pyproject lists actors, wire)
    sys.path.insert(0, str(ROOT))

from bench import echo  # noqa: E402
from bench._common import Throughput, latency_summary  # noqa: E402
from tests._processes import run_bench  # noqa: E402

REPORT_KEYS = {
    "benchmark", "startedAt", "elapsedSeconds", "config", "machine", "raw", "ours", "ratios",
    "targets", "allPassed", "png",
}  # fmt: skip
_MACHINE = {"cpuCount": 2, "cpuModel": "test", "python": "3", "pyzmq": "x", "libzmq": "y"}
SUMMARY_KEYS = {"count", "minUs", "meanUs", "p50Us", "p90Us", "p99Us", "p999Us", "maxUs", "cdf"}


def _stack(sequential_us: float, calls_per_second: dict[int, float]) -> dict[str, Any]:
    return {
        "sequential": [int(sequential_us * 1000)] * 100,
        "throughput": [
            Throughput(in_flight=n, calls=int(rate), seconds=1.0, latencies_ns=[1000] * 10)
            for n, rate in calls_per_second.items()
        ],
    }


def _report(*, ours_p50_us: float, ours_128: float, cancel_us: float) -> dict[str, Any]:
    raw = _stack(100.0, {1: 5000.0, 16: 20000.0, 128: 40000.0})
    ours = _stack(ours_p50_us, {1: 2000.0, 16: 10000.0, 128: ours_128}) | {
        "cancel": [int(cancel_us * 1000)] * 50
    }
    return echo.build_report(echo.Settings.quick_run(), {}, raw, ours, "now", 1.0)


def test_latency_summary_reports_percentiles_in_microseconds() -> None:
    """Percentiles come out of the histogram in microseconds within 0.1 %."""
    summary = latency_summary([i * 1000 for i in range(1, 1001)])  # 1 .. 1000 µs
    assert summary["count"] == 1000
    assert summary["p50Us"] == pytest.approx(500, rel=1e-3)
    assert summary["p99Us"] == pytest.approx(990, rel=1e-3)
    assert summary["cdf"][-1] == [100.0, summary["maxUs"]]


def test_targets_pass_when_every_ratio_is_within_its_limit() -> None:
    """Ratios are ours over raw, and each target passes on the right side of its limit."""
    report = _report(ours_p50_us=150.0, ours_128=20000.0, cancel_us=500.0)
    assert report["ratios"]["sequentialP50"] == pytest.approx(1.5, rel=1e-3)
    assert report["ratios"]["throughput128"] == pytest.approx(0.5)
    assert [t["passed"] for t in report["targets"]] == [True, True, True]
    assert report["allPassed"] is True
    assert report["targets"][2]["value"] == pytest.approx(0.5, rel=1e-3)  # ms


def test_targets_miss_when_limits_are_crossed() -> None:
    """Slow throughput, slow latency and a slow cancel each show MISS in the table."""
    report = _report(ours_p50_us=250.0, ours_128=12000.0, cancel_us=1500.0)
    assert [t["passed"] for t in report["targets"]] == [False, False, False]
    assert report["allPassed"] is False
    table = echo.render_table(report | {"machine": _MACHINE})
    assert table.count("MISS") == 3
    assert "PASS" not in table


def test_quick_run_writes_a_complete_report(tmp_path: Path) -> None:
    """``python -m bench.echo --quick`` runs both stacks and writes the JSON report and PNG."""
    out = tmp_path / "echo.json"
    report, stdout = run_bench("bench.echo", "--quick", out=out, timeout=180)
    assert REPORT_KEYS <= report.keys()
    assert Path(report["png"]).read_bytes().startswith(b"\x89PNG")
    assert report["config"]["quick"] is True
    assert {"cpuCount", "python", "pyzmq", "libzmq", "platform"} <= report["machine"].keys()
    for stack in ("raw", "ours"):
        assert SUMMARY_KEYS <= report[stack]["sequential"].keys()
        assert report[stack]["sequential"]["count"] == report["config"]["calls"]
        levels = [t["inFlight"] for t in report[stack]["throughput"]]
        assert levels == [1, 16, 128]
        assert all(t["callsPerSecond"] > 0 for t in report[stack]["throughput"])
    assert report["ours"]["cancel"]["count"] == report["config"]["cancels"]
    assert 0 < report["ours"]["cancel"]["p50Us"] <= report["ours"]["cancel"]["p99Us"]
    assert [t["name"] for t in report["targets"]] == [
        "throughput at 128 in flight >= 0.4 x raw",
        "sequential p50 <= 2 x raw",
        "cancel-to-quiescence p99 <= 1 ms",
    ]
    assert all(("PASS" if t["passed"] else "MISS") in stdout for t in report["targets"])
