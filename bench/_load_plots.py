"""The load benchmark's PNG plots, drawn from the JSON report.

Per echo payload, throughput against calls in flight beside the latency CDFs at the target
level; one of cancellation latencies; and one of the keystroke levels (goodput and key-to-answer
p50/p99 against typists). Working on the report only, they can be redrawn from a saved one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench._common import plot_png
from bench._load_levels_report import GOODPUT_SHARE, RECOVERY_LIMIT_MS
from bench._load_report import PAYLOADS, phase_at

__all__ = ["plot_keystroke_levels", "plot_report"]


def plot_report(report: Mapping[str, Any], directory: Path, stem: str = "load") -> list[Path]:
    """One PNG per echo payload (throughput vs in flight; CDFs at the target level), one of
    cancel latencies and one of the keystroke levels; returns the paths written."""
    labels = {name: s["label"] for name, s in report["stacks"].items()}
    config = report["config"]
    paths = []
    for payload in PAYLOADS:
        data = report["echo"].get(payload)
        if not data or not data["stacks"]:
            continue
        at = config["targetInFlight"]
        at = at if at in data["inFlight"] else max(data["inFlight"])
        stacks = data["stacks"]
        cdfs = {}
        for name, phases in stacks.items():
            phase = phase_at(phases, at)
            if phase:
                cdfs[labels[name]] = phase["latency"]["cdf"]
        path = directory / f"{stem}-echo-{payload.lower()}.png"
        plot_png(
            path,
            title=f"echo, {PAYLOADS[payload]:,} B payload, {config['transport']} loopback, "
            f"{config['processes']} client processes",
            throughput={
                labels[name]: {p["inFlight"]: p["callsPerSecond"] for p in phases}
                for name, phases in stacks.items()
                if phases
            },
            cdfs=cdfs,
            in_flight_label="calls in flight (total over all client processes)",
            cdf_title=f"latency CDF at {at} in flight",
        )
        paths.append(path)
    cdfs = {}
    for section, client in (("cancel", ""), ("cancelTypescript", " (TypeScript client)")):
        cancel = report.get(section) or {}
        for key, label in (("idle", "cancel, idle"), ("underLoad", "cancel, under echo load")):
            if cancel.get(key) and cancel[key]["latency"]["count"]:
                cdfs[f"{label}{client}"] = cancel[key]["latency"]["cdf"]
    for key, label in (("keystroke", "stand-in"), ("keystrokeReferences", "references")):
        series = (report.get(key) or {}).get("series", {}).get("supersedeToTerminal")
        if series and series["count"]:
            cdfs[f"keystroke ({label}): supersede to terminal frame"] = series["cdf"]
    if cdfs:
        path = directory / f"{stem}-cancel.png"
        plot_png(path, title="cancellation latency", cdfs=cdfs, limits={"1 ms target": 1000.0})
        paths.append(path)
    levels = (report.get("keystrokeLevels") or {}).get("levels") or []
    if levels:
        path = directory / f"{stem}-keystroke-levels.png"
        plot_keystroke_levels(report, path)
        paths.append(path)
    return paths


def plot_keystroke_levels(report: Mapping[str, Any], path: Path) -> None:
    """Goodput (with the 0.7 x peak line) and key-to-answer p50/p99 and recovery against
    typists, from ``report["keystrokeLevels"]``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    section = report["keystrokeLevels"]
    levels = section["levels"]
    typists = [lv["typists"] for lv in levels]
    figure = Figure(figsize=(12, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2)
    left.plot(typists, [lv["goodputPerSecond"] for lv in levels], marker="o", label="goodput")
    offered = [lv["keystrokes"] / lv["seconds"] for lv in levels]
    left.plot(typists, offered, marker=".", linestyle=":", label="keystrokes typed per second")
    peak = section.get("peakGoodputPerSecond")
    if peak:
        left.axhline(
            peak * GOODPUT_SHARE, linestyle="--", color="grey", label=f"{GOODPUT_SHARE:g} x peak"
        )
    left.set_ylim(bottom=0)
    left.set_ylabel("keystrokes answered per second")
    left.set_title("goodput")
    for key, label in (("p50Us", "key-to-answer p50"), ("p99Us", "key-to-answer p99")):
        values = [lv["keyToAnswer"].get(key) for lv in levels]
        right.plot(
            typists, [None if v is None else v / 1000 for v in values], marker="o", label=label
        )
    right.plot(
        typists,
        [lv["recoveryMs"]["slowest"] for lv in levels],
        marker="s",
        label="recovery (fresh call after the level)",
    )
    right.axhline(RECOVERY_LIMIT_MS, linestyle="--", color="grey", label="100 ms recovery target")
    right.set_yscale("log")
    right.set_ylabel("ms")
    right.set_title("latency")
    for axes in (left, right):
        axes.set_xscale("log", base=2)
        axes.set_xticks(typists, [str(n) for n in typists])
        axes.set_xlabel("typists")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize="small")
    figure.suptitle(
        f"keystroke levels ({' + '.join(section['completionCalls'])}), "
        f"{section['durationSeconds']:g} s each"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
