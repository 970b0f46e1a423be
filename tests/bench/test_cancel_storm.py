"""The cancel-storm benchmark: a quick real run at two levels in one process and through a
supervisor."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench._common import in_flight_levels
from bench.cancel_storm import _calls, _modes
from tests._processes import run_bench


def test_quick_run_reports_both_modes_at_each_level_split_by_how_calls_ended(
    tmp_path: Path,
) -> None:
    """``python -m bench.cancel_storm --quick --in-flight 16,4`` storms a plain server, a
    2-worker cluster through its supervisor and the same cluster's owners directly, at each
    level (lowest first), checks every answer against what the server did (a false one fails
    the run), and reports cancel → terminal frame split by outcome, the p99 by level, a target
    per level through the relay, the JSON report and the PNG."""
    out = tmp_path / "storm.json"
    report, stdout = run_bench(
        "bench.cancel_storm", "--quick", "--in-flight", "16,4", out=out, timeout=240
    )
    assert {"config", "machine", "runs", "targets", "allPassed"} <= report.keys()
    assert report["config"]["inFlight"] == [4, 16]
    assert [(run["mode"], run["inFlight"]) for run in report["runs"]] == [
        ("one", 4),
        ("workers", 4),
        ("direct", 4),
        ("one", 16),
        ("workers", 16),
        ("direct", 16),
    ]
    for run in report["runs"]:
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
        # How busy the machine's cores were during the storm (tick-rounded: a quick storm
        # lasts a few tens of milliseconds).
        [busy] = run["coresBusy"]
        # Direct: no call went through the supervisor (the storm's address); else every one,
        # including those a newer call superseded before they started.
        assert run["admittedAtAddress"] == [0 if run["mode"] == "direct" else 460]
        assert 0 < busy <= report["machine"]["cpuCount"] + 1
        codes = run["codes"][0]
        assert codes["append"].get("cancelled", 0) > 0 and codes["append"].get("result", 0) > 0
    workers = {run["inFlight"]: run for run in report["runs"] if run["mode"] == "workers"}
    assert [t["name"] for t in report["targets"]] == [
        f"cancel → terminal frame p99 through the relay (--workers 2, {n} in flight)"
        for n in (4, 16)
    ]
    for target, n in zip(report["targets"], (4, 16), strict=True):
        assert target["limit"] == 5.0 and target["comparison"] == "<="
        assert target["value"] == workers[n]["cancelToTerminal"]["all"]["p99Us"] / 1000
    assert report["allPassed"] == all(t["passed"] for t in report["targets"])
    assert "workers, 16 in flight" in stdout
    [levels_row] = [line for line in stdout.splitlines() if line.startswith("p99 (ms) by calls")]
    assert levels_row.split()[-2:] == ["4", "16"]
    assert "workers: cores busy (of" in stdout
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")


def test_in_flight_levels_are_positive_sorted_and_unique() -> None:
    assert in_flight_levels("32,4, 8,4") == (4, 8, 32)
    for text in ("0,4", "a", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            in_flight_levels(text)


@pytest.mark.parametrize("text", ["", "one,nine", "both"])
def test_unknown_modes_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="modes are one, workers"):
        _modes(text)


@pytest.mark.parametrize("text", ["1,2", "0,0,0", "1,-1,2", "a,b,c"])
def test_calls_need_three_counts_not_all_zero(text: str) -> None:
    with pytest.raises(ValueError, match="APPENDS,NOTES,SLEEPS"):
        _calls(text)
