"""The keystroke overload levels of ``bench.load``: options, figures, targets, one quick run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is not an installed package (pyproject lists actors, wire)
    sys.path.insert(0, str(ROOT))

from bench import load  # noqa: E402
from bench._load_jobs import Job  # noqa: E402
from bench._load_levels import level_jobs  # noqa: E402
from bench._load_levels_report import (  # noqa: E402
    level_entry,
    level_targets,
    levels_table,
    summarize_levels,
)
from bench._load_report import render_tables  # noqa: E402
from bench._load_settings import LoadSettings  # noqa: E402
from bench._load_stats import decode_sum, encode_samples, summarize  # noqa: E402
from tests._processes import run_bench  # noqa: E402


def _settings(*argv: str) -> LoadSettings:
    parser = load._parser()
    return load._settings(parser, parser.parse_args(list(argv)))


def test_typists_take_a_list_of_levels_and_a_phase_length() -> None:
    """``--typists 64,128,256 --keystroke-duration 60`` gives three sorted levels of 60 s."""
    settings = _settings("--typists", "256,64,128", "--keystroke-duration", "60")
    assert settings.typists == (64, 128, 256) and settings.keystroke_duration == 60
    assert _settings().typists == (64,) and _settings().keystroke_duration == 6.0
    quick = _settings("--quick")
    assert quick.typists == (4, 8) and quick.keystroke_duration <= 0.5
    for bad in (["--typists", "0,8"], ["--typists", "x"], ["--keystroke-duration", "0"]):
        with pytest.raises(SystemExit):
            _settings(*bad)


def test_only_keystroke_leaves_the_other_stacks_out() -> None:
    """``--only keystroke`` runs no peer, no TypeScript client and no profile."""
    settings = _settings("--only", "keystroke", "--peers", "raw")
    assert settings.only == "keystroke"
    assert settings.peers == () and not settings.typescript and settings.profile == ()
    with pytest.raises(SystemExit):
        _settings("--only", "echo")


def test_a_level_is_its_typists_split_over_the_processes_and_a_recovery_probe() -> None:
    """Each level's processes share the typists; one more process probes recovery."""
    base = Job(stack="ours", address="tcp://127.0.0.1:1", agents=["a"])
    jobs = level_jobs(base, _settings("--processes", "2", "--keystroke-duration", "3"), 5)
    assert [(j.workload, j.concurrency) for j in jobs] == [
        ("keystroke", 3),
        ("keystroke", 2),
        ("recovery-probe", 1),
    ]
    assert {j.duration for j in jobs} == {3.0}
    assert jobs[0].calls == ("fileReferences/list", "sessionReferenceResolver/candidates")


def _series(*ms: float) -> dict[str, Any]:
    return summarize(decode_sum([encode_samples([int(v * 1e6) for v in ms])]))


def _level(typists: int, answered: int, recovery_ms: float) -> dict[str, Any]:
    counters = {
        "keystrokes": answered + 10,
        "calls": 2 * (answered + 10),
        "completed": 2 * answered + 4,
        "keystrokesAnswered": answered,
        "superseded:before": 6,
        "superseded:during": 3,
        "superseded:after": 1,
        "notSuperseded:error:overloaded": 2,
    }
    phase = {
        "calls": 2 * answered,
        "seconds": 10.0,
        "counters": counters,
        "latency": _series(5.0, 50.0),
        "series": {
            "keyToAnswer": _series(*([10.0] * 98 + [200.0] * 2)),
            "recoveryStats": _series(recovery_ms / 2),
            "recoveryEcho": _series(recovery_ms),
            "drainAfterWindow": _series(30.0),
        },
        "server": {"cpuSeconds": 9.0, "cpuUtilisation": 0.9, "peakRssMiB": 80.0},
    }
    return level_entry(phase, typists)


def test_level_figures_count_answered_keystrokes_and_how_superseded_work_ended() -> None:
    """Goodput is answered keystrokes per second; superseded calls split before/during/after."""
    entry = _level(64, answered=500, recovery_ms=40.0)
    assert entry["goodputPerSecond"] == 50.0 and entry["keystrokes"] == 510
    assert (entry["shedBeforeStart"], entry["cancelledWhileRunning"]) == (6, 3)
    assert entry["finishedBeforeCancel"] == 1 and entry["superseded"] == 10
    assert entry["otherOutcomes"] == 2 and entry["shedBeforeStartShare"] == 0.6
    assert entry["recoveryMs"]["slowest"] == pytest.approx(40.0, rel=0.01)
    assert entry["keyToAnswer"]["p99Us"] == pytest.approx(200_000, rel=0.01)


def test_goodput_is_read_against_the_peak_so_far_and_recovery_at_every_level() -> None:
    """A level below 0.7 x the best level with fewer typists misses; so does a slow recovery."""
    levels = [_level(64, 500, 40.0), _level(128, 700, 60.0), _level(256, 450, 250.0)]
    section = summarize_levels(levels, ["fileReferences/list"], 10.0)
    assert section["peakGoodputPerSecond"] == 70.0 and section["typists"] == [64, 128, 256]
    assert [lv["goodputOfPeakSoFar"] for lv in levels] == [1.0, 1.0, pytest.approx(0.6429, 1e-3)]
    report: dict[str, Any] = {"keystrokeLevels": section}
    goodput, recovery = level_targets(report)
    assert goodput["status"] == "MISS" and "256" in goodput["note"]
    assert recovery["status"] == "MISS" and recovery["value"] == pytest.approx(250, rel=0.01)
    table = levels_table(report)
    assert table.splitlines()[1].split()[:4] == ["typists", "keystrokes", "answered", "goodput/s"]
    assert "6 (60%)" in table  # shed before start, with its share of the superseded calls
    one = {"keystrokeLevels": summarize_levels([_level(8, 10, 1.0)], ["x"], 1.0)}
    assert [t["status"] for t in level_targets(one)] == ["N/A", "PASS"]
    assert level_targets({}) == []


def test_quick_keystroke_only_run_reports_every_level(tmp_path: Path) -> None:
    """``bench.load --quick --only keystroke`` measures two tiny levels and judges them."""
    out = tmp_path / "load.json"
    args = ("--quick", "--only", "keystroke", "--sessions-from", "none")
    report, stdout = run_bench("bench.load", *args, out=out, timeout=120)
    section = report["keystrokeLevels"]
    assert section["typists"] == [4, 8] and section["durationSeconds"] == 0.5
    for level in section["levels"]:
        assert level["keystrokes"] > 0 and 0 < level["answered"] <= level["keystrokes"]
        assert level["counters"]["calls"] == 2 * level["keystrokes"]
        assert level["recoveryMs"]["slowest"] is not None
    assert "echo" not in stdout.split("keystroke levels")[0]
    assert [t["name"].split()[0] for t in report["targets"]] == ["keystroke", "fresh"]
    assert report["stacks"]["oursAsync"]["status"] == "skipped"
    assert any(p.endswith("load-keystroke-levels.png") for p in report["plots"])
    assert "keystroke levels" in render_tables(report)
