"""The keystroke overload levels in the load report: per-level figures, targets and table.

Issue 23, item 4: the keystroke workload with the reference completion at rising numbers of
typists. Per level: keystrokes sent and answered (every call of the keystroke returned its
result before a newer keystroke superseded it), goodput (answered keystrokes per second of the
window), key-to-answer latency of the answered keystrokes, superseded calls split by when the
cancel landed (shed before the handler started, cancelled while it ran, or finished anyway), and
recovery: how long a fresh call sent the moment the typists stop takes to be answered. Targets:
goodput at every level at least 0.7 x the peak so far ("never falls below 70 % of its peak as
the typists increase": the best level with at most as many typists, since fewer typists cannot
offer more keystrokes), recovery at most 100 ms at every level.

Everything here works on the JSON report, so it can be tested on synthetic numbers; the target
helper :func:`target` is shared with :mod:`bench._load_report`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench._common import format_count, format_table

__all__ = [
    "GOODPUT_SHARE",
    "RECOVERY_LIMIT_MS",
    "SUPERSEDED_WHEN",
    "level_entry",
    "level_targets",
    "levels_table",
    "summarize_levels",
    "target",
]

#: How superseded calls ended (``superseded:WHEN`` counters): cancelled before their handler
#: ran, while it ran, or after it had finished (the result crossed the cancel).
SUPERSEDED_WHEN = ("before", "during", "after")
#: "goodput never falls below 70 % of its peak as the typists increase".
GOODPUT_SHARE = 0.7
#: "the server answers a fresh call within 100 ms once the load stops".
RECOVERY_LIMIT_MS = 100.0


def target(
    name: str, value: float | None, limit: float, comparison: str, unit: str, note: str
) -> dict[str, Any]:
    """A target in the report's JSON form, with PASS, MISS or N/A (nothing measured) and the
    margin to the limit."""
    if value is None:
        status, margin = "N/A", None
    else:
        passed = value >= limit if comparison == ">=" else value <= limit
        status = "PASS" if passed else "MISS"
        # The same scale both ways: -75 % means the value must get 4 x better to pass.
        if comparison == ">=":
            margin = value / limit - 1
        else:
            margin = limit / value - 1 if value > 0 else float("inf")
    return {
        "name": name,
        "value": value,
        "limit": limit,
        "comparison": comparison,
        "unit": unit,
        "status": status,
        "passed": status == "PASS",
        #: Positive: headroom past the limit; negative: how far short (``-0.75``: the value
        #: must improve 4 x). ``value / limit - 1`` for ``>=``, ``limit / value - 1`` for ``<=``.
        "margin": None if margin is None else round(margin, 4),
        "note": note,
    }


def _ms(summary: Mapping[str, Any] | None, key: str = "maxUs") -> float | None:
    value = (summary or {}).get(key)
    return None if value is None else round(float(value) / 1000, 3)


def level_entry(phase: Mapping[str, Any], typists: int) -> dict[str, Any]:
    """One level's report entry: the merged phase (as ``keystrokeReferences`` has it) plus
    the level's figures, from the keystroke processes' counters and series and the recovery
    probe's two calls."""
    c, series = phase["counters"], phase["series"]
    seconds = float(phase["seconds"])
    split = {when: int(c.get(f"superseded:{when}", 0)) for when in SUPERSEDED_WHEN}
    superseded = sum(split.values())
    ended = sum(v for k, v in c.items() if k.startswith(("superseded:", "notSuperseded:")))
    answered = int(c.get("keystrokesAnswered", 0))
    stats, echo = _ms(series.get("recoveryStats")), _ms(series.get("recoveryEcho"))
    measured = [v for v in (stats, echo) if v is not None]
    return {
        **phase,
        "typists": typists,
        "keystrokes": int(c.get("keystrokes", 0)),
        "answered": answered,
        "goodputPerSecond": round(answered / seconds, 2) if seconds > 0 else None,
        "keyToAnswer": series.get("keyToAnswer") or {"count": 0, "p50Us": None, "p99Us": None},
        "completedCalls": int(c.get("completed", 0)),
        "superseded": superseded,
        "shedBeforeStart": split["before"],
        "cancelledWhileRunning": split["during"],
        "finishedBeforeCancel": split["after"],
        "otherOutcomes": ended - superseded,
        "shedBeforeStartShare": round(split["before"] / superseded, 4) if superseded else None,
        #: A fresh call sent the moment the typists stopped, in milliseconds; ``slowest`` is
        #: what the target reads.
        "recoveryMs": {
            "systemStats": stats,
            "echo": echo,
            "slowest": max(measured) if measured else None,
        },
        #: From the end of the window to the end of the last keystroke call (the backlog).
        "drainAfterWindowMs": _ms(series.get("drainAfterWindow")),
    }


def summarize_levels(
    levels: Sequence[dict[str, Any]], calls: Sequence[str], duration: float
) -> dict[str, Any]:
    """The report's ``keystrokeLevels``: every level with its goodput over the best level's
    (``goodputOfPeak``) and over the best level's with at most as many typists
    (``goodputOfPeakSoFar``, what the target reads)."""
    rates = [lv["goodputPerSecond"] for lv in levels if lv["goodputPerSecond"] is not None]
    peak = max(rates) if rates else None
    so_far = 0.0
    for lv in sorted(levels, key=lambda lv: lv["typists"]):
        rate = lv["goodputPerSecond"]
        so_far = max(so_far, rate or 0.0)
        lv["goodputOfPeak"] = round(rate / peak, 4) if rate is not None and peak else None
        lv["goodputOfPeakSoFar"] = round(rate / so_far, 4) if rate is not None and so_far else None
    return {
        "completionCalls": list(calls),
        "durationSeconds": duration,
        "typists": [lv["typists"] for lv in levels],
        "peakGoodputPerSecond": peak,
        "levels": list(levels),
    }


def level_targets(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Issue 23's overload targets on ``report["keystrokeLevels"]`` (none without it)."""
    section = report.get("keystrokeLevels") or {}
    levels = section.get("levels") or []
    if not levels:
        return []
    ratios = [(lv["goodputOfPeakSoFar"], lv["typists"]) for lv in levels]
    known = [r for r in ratios if r[0] is not None]
    if len(levels) < 2:
        share, note = None, "one level: nothing to compare with (give --typists A,B,...)"
    elif len(known) < len(ratios) or not known:
        share, note = None, "a level answered nothing measurable"
    else:
        share, worst = min(known)
        note = f"lowest at {worst} typists"
    recoveries = [(lv["recoveryMs"]["slowest"], lv["typists"]) for lv in levels]
    missing = [t for v, t in recoveries if v is None]
    if missing:
        slowest, why = None, f"no recovery sample at {', '.join(map(str, missing))} typists"
    else:
        slowest, at = max(recoveries)
        why = f"slowest at {at} typists"
    return [
        target(
            f"keystroke goodput >= {GOODPUT_SHARE:g} x peak so far at every level",
            share,
            GOODPUT_SHARE,
            ">=",
            "x",
            note,
        ),
        target(
            f"fresh call answered <= {RECOVERY_LIMIT_MS:g} ms after each level",
            slowest,
            RECOVERY_LIMIT_MS,
            "<=",
            " ms",
            why,
        ),
    ]


def _cell(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def levels_table(report: Mapping[str, Any]) -> str:
    """The levels as text: one row per level, then how each level's superseded calls ended."""
    section = report.get("keystrokeLevels") or {}
    if "skipped" in section:
        return f"keystroke levels: skipped: {section['skipped']}"
    levels = section.get("levels") or []
    if not levels:
        return ""
    rows = [
        [
            "typists",
            "keystrokes",
            "answered",
            "goodput/s",
            "of peak",
            "of peak so far",
            "p50 ms",
            "p99 ms",
            "superseded",
            "shed before",
            "during",
            "after",
            "other",
            "recovery ms",
            "drain ms",
        ]
    ]
    for lv in levels:
        lat = lv["keyToAnswer"]
        rec = lv["recoveryMs"]
        share = lv["shedBeforeStartShare"]
        rows.append(
            [
                str(lv["typists"]),
                str(lv["keystrokes"]),
                str(lv["answered"]),
                format_count(lv["goodputPerSecond"]),
                "n/a" if lv["goodputOfPeak"] is None else f"{lv['goodputOfPeak']:.2f}",
                "n/a" if lv["goodputOfPeakSoFar"] is None else f"{lv['goodputOfPeakSoFar']:.2f}",
                _cell(_ms(lat, "p50Us")),
                _cell(_ms(lat, "p99Us")),
                str(lv["superseded"]),
                f"{lv['shedBeforeStart']}" + ("" if share is None else f" ({share:.0%})"),
                str(lv["cancelledWhileRunning"]),
                str(lv["finishedBeforeCancel"]),
                str(lv["otherOutcomes"]),
                f"{_cell(rec['systemStats'])} / {_cell(rec['echo'])}",
                _cell(lv["drainAfterWindowMs"], 0),
            ]
        )
    title = (
        f"keystroke levels ({', '.join(section['completionCalls'])}), "
        f"{section['durationSeconds']:g} s each: answered = every call of the keystroke "
        "returned before a newer keystroke; p50/p99 key-to-answer of answered keystrokes; "
        "superseded calls: shed before their handler started / cancelled during / finished "
        "after; recovery: system/stats / diagnostics/echo sent as the typing stopped"
    )
    server = [["typists", "server CPU s", "server CPU/s", "completed calls", "peak RSS MiB"]]
    for lv in levels:
        s = lv.get("server", {})
        server.append(
            [
                str(lv["typists"]),
                _cell(s.get("cpuSeconds"), 2),
                _cell(s.get("cpuUtilisation"), 2),
                str(lv["completedCalls"]),
                _cell(s.get("peakRssMiB")),
            ]
        )
    return f"{title}\n{format_table(rows)}\n\n{format_table(server)}"
