"""The idle benchmark: one quick real run of a plain server and of a 2-worker cluster."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests._processes import run_bench

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="bench.idle reads Linux's /proc"
)


def test_quick_run_reports_every_process_of_both_servers(tmp_path: Path) -> None:
    """``python -m bench.idle --quick --workers 0,2`` measures the plain server and the
    supervisor with its two workers, and writes the JSON report and the PNG."""
    out = tmp_path / "idle.json"
    report, _ = run_bench("bench.idle", "--quick", "--workers", "0,2", out=out, timeout=60)
    assert {"config", "machine", "runs", "targets", "allPassed"} <= report.keys()
    assert [run["workers"] for run in report["runs"]] == [0, 2]
    roles = [[p["role"] for p in run["processes"]] for run in report["runs"]]
    assert roles == [["server"], ["supervisor", "w1", "w2"]]
    for run in report["runs"]:
        assert run["windowSeconds"] > 0
        assert isinstance(run["totalCpuPercent"], float | int) and run["totalCpuPercent"] >= 0
        for process in run["processes"]:
            for key in ("cpuPercent", "wakeupsPerSecond"):
                assert isinstance(process[key], float | int) and process[key] >= 0, process
    assert len(report["targets"]) == 2
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")
