"""The load benchmark's PNG plots, drawn from the JSON report.

Per echo payload, throughput against calls in flight beside the latency CDFs at the target
level; and one of cancellation latencies. Working on the report only, they can be redrawn from
a saved one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench._common import plot_png
from bench._load_report import PAYLOADS, phase_at

__all__ = ["plot_report"]


def plot_report(report: Mapping[str, Any], directory: Path, stem: str = "load") -> list[Path]:
    """One PNG per echo payload (throughput vs in flight; CDFs at the target level) and one of
    cancel latencies; returns the paths written."""
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
    return paths
