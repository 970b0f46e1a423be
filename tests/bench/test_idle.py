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
    supervisor with its two workers, fresh and again after calls reached every worker, and
    writes the JSON report and the PNG."""
    out = tmp_path / "idle.json"
    report, stdout = run_bench("bench.idle", "--quick", "--workers", "0,2", out=out, timeout=120)
    assert {"config", "machine", "runs", "targets", "allPassed"} <= report.keys()
    phases = [(run["workers"], run["phase"]) for run in report["runs"]]
    assert phases == [(0, "fresh"), (0, "used"), (2, "fresh"), (2, "used")]
    roles = [[p["role"] for p in run["processes"]] for run in report["runs"]]
    cluster = ["supervisor", "w1", "w2"]
    assert roles == [["server"], ["server"], cluster, cluster]
    used = [run for run in report["runs"] if run["phase"] == "used"]
    assert [(run["agentsCreated"] >= 1, run["workersReached"]) for run in used] == [
        (True, 0),
        (True, 2),
    ]
    assert "serve --workers 2, after use" in stdout
    for run in report["runs"]:
        assert run["windowSeconds"] > 0
        assert isinstance(run["totalCpuPercent"], float | int) and run["totalCpuPercent"] >= 0
        for process in run["processes"]:
            for key in ("cpuPercent", "wakeupsPerSecond"):
                assert isinstance(process[key], float | int) and process[key] >= 0, process
    assert len(report["targets"]) == 4
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")
