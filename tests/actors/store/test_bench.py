"""``python -m bench.store``: one tiny real run, and its percentile helper."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.store import latency_summary
from tests._processes import run_bench

ROOT = Path(__file__).resolve().parents[3]
REPORT_KEYS = {
    "benchmark", "startedAt", "elapsedSeconds", "config", "machine", "append", "load", "index",
    "listing", "targets", "allPassed", "png",
}  # fmt: skip


def test_latency_summary_uses_exact_nearest_rank_percentiles() -> None:
    """Percentiles of 1..1000 µs are the samples at those ranks, reported in microseconds."""
    summary = latency_summary([i * 1000 for i in range(1, 1001)])
    assert (summary["p50Us"], summary["p99Us"], summary["maxUs"]) == (500.0, 990.0, 1000.0)
    assert summary["cdf"][-1] == [100.0, 1000.0]
    assert latency_summary([], cdf=False)["p99Us"] is None


def test_a_tiny_run_writes_the_report_and_plot(tmp_path: Path) -> None:
    """A small real run exits 0 and writes a complete JSON report and a PNG."""
    out = tmp_path / "store.json"
    args = ("--quick", "--log-mb", "0.2", "--sessions", "20", "--listed", "300")
    report, stdout = run_bench("bench.store", *args, out=out, timeout=120)
    assert set(report) == REPORT_KEYS
    assert [(e["durability"], e["batch"], e["sessions"]) for e in report["append"]] == [
        ("fsync", 1, 1), ("fsync", 64, 1), ("fsync", 1, 16),
        ("flush", 1, 1), ("flush", 64, 1), ("flush", 1, 16),
    ]  # fmt: skip
    assert all(e["eventsPerSecond"] > 0 for e in report["append"])
    assert [e["encoding"] for e in report["load"]] == ["none", "zstd"]
    raw, zstd = report["load"]
    assert raw["decodedBytes"] == zstd["decodedBytes"] >= 0.2 * (1 << 20)
    assert raw["ours"]["records"] == zstd["ours"]["records"] > raw["plain"]["records"]
    for entry in (raw["ours"], zstd["plain"]):
        # Peak (VmHWM) of a fresh process: at least its RSS before the load, never below it.
        assert entry["peakRssBytes"] >= entry["rssBeforeBytes"] > 1 << 20
        assert entry["peakRssPerDecodedByte"] == round(
            entry["peakRssBytes"] / raw["decodedBytes"], 3
        )
    assert report["index"]["indexed"] == 20
    assert report["listing"]["rows"] == 300
    assert len(report["targets"]) == 3
    assert Path(report["png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "PASS" in stdout or "MISS" in stdout


@pytest.mark.parametrize("flag", ["--sessions", "--log-mb"])
def test_bad_sizes_are_usage_errors(flag: str) -> None:
    """Non-positive sizes are refused before anything runs."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.store", flag, "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "must be positive" in done.stderr
