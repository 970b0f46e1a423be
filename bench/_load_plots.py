"""The load benchmark's PNG plots, drawn from the JSON report.

Per echo payload, throughput against calls in flight beside the latency CDFs at the target
level; and one of cancellation latencies. Working on the report only, they can be redrawn from
a saved one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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
        _plot(
            path,
            f"echo, {PAYLOADS[payload]:,} B payload, {config['transport']} loopback, "
            f"{config['processes']} client processes",
            throughput={
                labels[name]: {p["inFlight"]: p["callsPerSecond"] for p in phases}
                for name, phases in stacks.items()
                if phases
            },
            cdfs=cdfs,
            cdf_title=f"latency CDF at {at} in flight",
        )
        paths.append(path)
    cdfs = {}
    cancel = report.get("cancel") or {}
    for key, label in (("idle", "cancel, idle"), ("underLoad", "cancel, under echo load")):
        if cancel.get(key) and cancel[key]["latency"]["count"]:
            cdfs[label] = cancel[key]["latency"]["cdf"]
    for key, label in (("keystroke", "stand-in"), ("keystrokeReferences", "references")):
        series = (report.get(key) or {}).get("series", {}).get("supersedeToTerminal")
        if series and series["count"]:
            cdfs[f"keystroke ({label}): supersede to terminal frame"] = series["cdf"]
    if cdfs:
        path = directory / f"{stem}-cancel.png"
        _plot(path, "cancellation latency", cdfs=cdfs, limits={"1 ms target": 1000.0})
        paths.append(path)
    return paths


def _tick(microseconds: float) -> str:
    return f"{microseconds / 1000:g}k" if microseconds >= 1000 else f"{microseconds:g}"


def _plot(
    path: Path,
    title: str,
    *,
    cdfs: Mapping[str, Sequence[Sequence[float | None]]],
    throughput: Mapping[str, Mapping[int, float]] | None = None,
    cdf_title: str = "",
    limits: Mapping[str, float] | None = None,
) -> None:
    """Latency CDFs (log microseconds), beside calls/s against calls in flight if given."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator

    figure = Figure(figsize=(12 if throughput else 7, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    if throughput:
        left, right = figure.subplots(1, 2)
        for label, points in throughput.items():
            levels = sorted(points)
            left.plot(levels, [points[n] for n in levels], marker="o", label=label)
        every = sorted({n for points in throughput.values() for n in points})
        left.set_xscale("log", base=2)
        left.set_xticks(every, [str(n) for n in every])
        left.set_ylim(bottom=0)
        left.set_xlabel("calls in flight (total over all client processes)")
        left.set_ylabel("calls/s")
        left.set_title("throughput")
        left.grid(True, alpha=0.3)
        left.legend(fontsize="small")
    else:
        right = figure.subplots()
    for label, cdf in cdfs.items():
        pairs = [(float(us), float(p) / 100) for p, us in cdf if us is not None and p is not None]
        if pairs:
            right.step([u for u, _ in pairs], [f for _, f in pairs], where="post", label=label)
    for label, x in (limits or {}).items():
        right.axvline(x, linestyle="--", color="grey", linewidth=1, label=label)
    right.set_xscale("log")
    right.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    right.xaxis.set_major_formatter(FuncFormatter(lambda value, _: _tick(value)))
    right.set_ylim(0, 1.0)
    right.set_xlabel("latency (µs)")
    right.set_ylabel("fraction of samples")
    right.set_title(cdf_title)
    right.grid(True, which="both", alpha=0.3)
    right.legend(loc="lower right", fontsize="small")
    figure.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
