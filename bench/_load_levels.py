"""The keystroke overload levels of a load run: one phase per number of typists.

Each level (``settings.typists``) runs the keystroke workload with the reference completion
(``fileReferences/list`` + ``sessionReferenceResolver/candidates``) for
``settings.keystroke_duration`` seconds, beside one ``recovery-probe`` process that sends a
fresh ``system/stats`` and ``diagnostics/echo`` the moment the typists stop
(:mod:`bench._load_ours`). The figures and targets are :mod:`bench._load_levels_report`'s.
"""

from __future__ import annotations

from typing import Any

import attrs

from bench._common import progress
from bench._load_generator import ServerMonitor, run_phase, split_concurrency
from bench._load_jobs import Job
from bench._load_levels_report import level_entry, summarize_levels
from bench._load_settings import LoadSettings
from bench._load_workloads import REAL_COMPLETION, missing_endpoints

__all__ = ["keystroke_jobs", "level_jobs", "run_keystroke_levels"]


def keystroke_jobs(
    base: Job, settings: LoadSettings, typists: int, calls: tuple[str, ...]
) -> list[Job]:
    """The keystroke processes: ``typists`` spread over ``settings.processes``, each keystroke
    sending ``calls`` (``base`` carries the key interval)."""
    return [
        attrs.evolve(
            base,
            workload="keystroke",
            worker=i,
            concurrency=m,
            calls=calls,
            duration=settings.keystroke_duration,
        )
        for i, m in enumerate(split_concurrency(typists, settings.processes))
    ]


def level_jobs(base: Job, settings: LoadSettings, typists: int) -> list[Job]:
    """The processes of one level: the typists spread over ``settings.processes``, then the
    recovery probe."""
    jobs = keystroke_jobs(base, settings, typists, REAL_COMPLETION)
    probe = attrs.evolve(
        base,
        workload="recovery-probe",
        worker=len(jobs),
        concurrency=1,
        calls=("diagnostics/echo",),
        duration=settings.keystroke_duration,
    )
    return [*jobs, probe]


def run_keystroke_levels(
    report: dict[str, Any],
    settings: LoadSettings,
    base: Job,
    monitor: ServerMonitor,
    served: list[str],
) -> list[dict[str, Any]]:
    """Run every level into ``report["keystrokeLevels"]``; return the levels (none when the
    server does not serve the reference endpoints)."""
    missing = missing_endpoints(REAL_COMPLETION, served)
    if missing:
        report["keystrokeLevels"] = {"skipped": f"the server does not serve {', '.join(missing)}"}
        return []
    levels = []
    for typists in settings.typists:
        progress(
            f"ours: keystroke level ({', '.join(REAL_COMPLETION)}), {typists} typists, "
            f"{settings.keystroke_duration:g} s"
        )
        phase = run_phase(level_jobs(base, settings, typists), monitor)
        phase = {
            "completionCalls": list(REAL_COMPLETION),
            "keyIntervalSeconds": list(settings.key_interval),
            "handlerSeconds": list(settings.handler_seconds),
            **phase,
        }
        levels.append(level_entry(phase, typists))
    report["keystrokeLevels"] = summarize_levels(
        levels, REAL_COMPLETION, settings.keystroke_duration
    )
    return levels
