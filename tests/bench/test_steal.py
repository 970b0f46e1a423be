"""The benchmarks' host-steal reading: a busy host is named in the report, a quiet one is not."""

from __future__ import annotations

from typing import Any

from bench._common import record_steal, steal_seconds, steal_warning


def test_steal_is_recorded_as_seconds_and_share_of_the_run() -> None:
    """The run's steal is the counter's growth, and its share divides by the CPU time the run
    spanned (wall time times CPUs)."""
    now = steal_seconds()
    if now is None:
        machine: dict[str, Any] = {}
        record_steal(machine, None, 10.0)
        assert machine == {}  # no counter here: nothing is claimed
        return
    machine = {}
    record_steal(machine, now - 4.0, 10.0)
    assert float(machine["hostStealSeconds"]) >= 4.0
    assert 0 < float(machine["hostStealShare"]) <= 1.0


def test_a_warning_only_above_the_limit() -> None:
    """A share above the limit yields a warning that gives the share; at or below it, none."""
    assert steal_warning({"hostStealShare": 0.05}) is not None
    assert "5.0%" in (steal_warning({"hostStealShare": 0.05}) or "")
    assert steal_warning({"hostStealShare": 0.02}) is None
    assert steal_warning({}) is None
