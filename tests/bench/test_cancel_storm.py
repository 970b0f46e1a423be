"""The cancel-storm benchmark: one quick real run in one process and through a supervisor."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cancel_storm import _calls, _modes
from tests._processes import run_bench


def test_quick_run_reports_both_modes_split_by_how_calls_ended(tmp_path: Path) -> None:
    """``python -m bench.cancel_storm --quick`` storms a plain server and a 2-worker cluster,
    checks every answer against what the server did (a false one fails the run), and reports
    cancel → terminal frame split by outcome, the target, the JSON report and the PNG."""
    out = tmp_path / "storm.json"
    report, stdout = run_bench("bench.cancel_storm", "--quick", out=out, timeout=180)
    assert {"config", "machine", "modes", "targets", "allPassed"} <= report.keys()
    assert list(report["modes"]) == ["one", "workers"]
    for run in report["modes"].values():
        assert run["calls"] == 460
        latencies = run["cancelToTerminal"]
        assert set(latencies) == {"all", "no-effect", "queued", "running", "result"}
        assert latencies["no-effect"]["count"] > 0
        assert latencies["all"]["count"] == (
            latencies["no-effect"]["count"] + latencies["result"]["count"]
        )
        # Every no-effect answer says where the cancel found the call.
        assert latencies["no-effect"]["count"] == (
            latencies["queued"]["count"] + latencies["running"]["count"]
        )
        assert 0 < latencies["all"]["p50Us"] <= latencies["all"]["p99Us"]
        codes = run["codes"][0]
        assert codes["append"].get("cancelled", 0) > 0 and codes["append"].get("result", 0) > 0
    [target] = report["targets"]
    assert target["limit"] == 5.0 and target["comparison"] == "<="
    assert "cancel → terminal frame" in stdout
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("text", ["", "one,nine", "both"])
def test_unknown_modes_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="modes are one, workers"):
        _modes(text)


@pytest.mark.parametrize("text", ["1,2", "0,0,0", "1,-1,2", "a,b,c"])
def test_calls_need_three_counts_not_all_zero(text: str) -> None:
    with pytest.raises(ValueError, match="APPENDS,NOTES,SLEEPS"):
        _calls(text)
