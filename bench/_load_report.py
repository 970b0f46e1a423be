"""The load benchmark's report: ratios, targets with margins and the text tables (the plots
are in :mod:`bench._load_plots`).

Everything here works on the JSON report (see ``docs/benchmarks.md``), so it can be tested on
synthetic numbers and re-rendered from a saved report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench._common import format_count, format_ratio, format_table, steal_warning
from bench._load_levels_report import SUPERSEDED_WHEN, level_targets, levels_table, target

__all__ = [
    "PAYLOADS",
    "SUPERSEDED_WHEN",
    "echo_ratios",
    "evaluate_targets",
    "phase_at",
    "render_tables",
    "typescript_ratios",
]

#: Echo payloads: report key and size.
PAYLOADS = {"64B": 64, "64KiB": 65536}
#: Issue 6, item 4: "at least 5 x zerorpc and gRPC aio, at least 1 x RPyC, at least 0.4 x raw
#: pyzmq+msgpack" (echo 64 B over tcp loopback at 128 in flight).
RATIO_TARGETS = (("zerorpc", 5.0), ("grpc", 5.0), ("rpyc", 1.0), ("raw", 0.4))
_TRANSPORTS = {"tcp": "tcp loopback (127.0.0.1)", "ipc": "ipc (a local socket file)"}
#: agent-actors' echo stacks: ``def`` handler (the ratios and targets), ``async def`` beside it,
#: and the TypeScript client against the ``def`` handler.
OUR_STACKS = ("ours", "oursAsync", "typescript")
#: What the TypeScript client's calls/s are divided by: the Python client on the same handler,
#: and the raw pyzmq+msgpack ceiling.
TYPESCRIPT_VERSUS = ("ours", "raw")
#: "cancel p99 at most 1 ms".
CANCEL_P99_LIMIT_MS = 1.0


def phase_at(phases: Sequence[Mapping[str, Any]], in_flight: int) -> Mapping[str, Any] | None:
    """The phase of ``phases`` run at ``in_flight`` calls in flight, or ``None``."""
    return next((p for p in phases if p["inFlight"] == in_flight), None)


def echo_ratios(echo: Mapping[str, Any]) -> dict[str, dict[str, dict[str, float | None]]]:
    """Per payload, per peer, per in-flight level: ours' calls/s over the peer's."""
    ratios: dict[str, dict[str, dict[str, float | None]]] = {}
    for payload, data in echo.items():
        stacks = data["stacks"]
        ours = stacks.get("ours", [])
        ratios[payload] = {}
        for peer, phases in stacks.items():
            if peer in OUR_STACKS:
                continue
            row: dict[str, float | None] = {}
            for phase in phases:
                mine = phase_at(ours, phase["inFlight"])
                theirs = phase["callsPerSecond"]
                value = mine["callsPerSecond"] / theirs if mine and theirs else None
                row[str(phase["inFlight"])] = None if value is None else round(value, 4)
            ratios[payload][peer] = row
    return ratios


def typescript_ratios(echo: Mapping[str, Any]) -> dict[str, dict[str, dict[str, float | None]]]:
    """Per payload, per stack of :data:`TYPESCRIPT_VERSUS`, per in-flight level: the TypeScript
    client's calls/s over that stack's (empty where the TypeScript client was not measured)."""
    ratios: dict[str, dict[str, dict[str, float | None]]] = {}
    for payload, data in echo.items():
        stacks = data["stacks"]
        mine = stacks.get("typescript", [])
        ratios[payload] = {}
        if not mine:
            continue
        for other in TYPESCRIPT_VERSUS:
            if other not in stacks:
                continue
            row: dict[str, float | None] = {}
            for phase in mine:
                theirs = phase_at(stacks[other], phase["inFlight"])
                value = (
                    phase["callsPerSecond"] / theirs["callsPerSecond"]
                    if theirs and theirs["callsPerSecond"]
                    else None
                )
                row[str(phase["inFlight"])] = None if value is None else round(value, 4)
            ratios[payload][other] = row
    return ratios


def evaluate_targets(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Issue 6's targets on the report's echo 64 B phases and idle cancel probes, then issue
    23's on the keystroke levels (when the report has them)."""
    config = report["config"]
    if config.get("only") == "keystroke":  # no echo and no cancel probes ran
        return level_targets(report)
    level = config["targetInFlight"]
    note = ""
    if config["transport"] != "tcp":
        note = "targets are defined over tcp loopback; this run used " + config["transport"]
    ratios = report["ratios"].get("64B", {})
    labels = {name: stack["label"] for name, stack in report["stacks"].items()}
    targets = []
    for peer, limit in RATIO_TARGETS:
        value = None if note else ratios.get(peer, {}).get(str(level))
        why = note or ("" if value is not None else f"not measured at {level} in flight")
        name = f"echo 64 B, {level} in flight: ours >= {limit:g} x {labels.get(peer, peer)}"
        targets.append(target(name, value, limit, ">=", "x", why))
    idle = report.get("cancel", {}).get("idle") or {}
    p99 = (idle.get("latency") or {}).get("p99Us")
    targets.append(
        target(
            "cancel-to-quiescence p99 (idle) <= 1 ms",
            None if p99 is None else p99 / 1000,
            CANCEL_P99_LIMIT_MS,
            "<=",
            " ms",
            "" if p99 is not None else "no cancel samples",
        )
    )
    return targets + level_targets(report)


def _margin_text(target: Mapping[str, Any]) -> str:
    margin = target["margin"]
    if margin is None:
        return str(target["note"])
    text = f"{margin * 100:+.0f} %"
    if target["status"] == "MISS":
        text += f" (needs {1 / (1 + margin):.1f}x)" if margin > -1 else " (nothing measured)"
    return text


def _target_rows(targets: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = [["target", "measured", "limit", "", "margin"]]
    for t in targets:
        measured = "n/a" if t["value"] is None else f"{t['value']:.3g}{t['unit']}"
        limit = f"{t['comparison']} {t['limit']:g}{t['unit']}"
        rows.append([t["name"], measured, limit, t["status"], _margin_text(t)])
    return rows


def _us(value: float | None) -> str:
    return "n/a" if value is None else format_count(value)


def _echo_tables(report: Mapping[str, Any], payload: str) -> str:
    data = report["echo"].get(payload)
    if not data or not data["stacks"]:
        return ""
    stacks, levels = data["stacks"], data["inFlight"]
    level = report["config"]["targetInFlight"]
    if level not in levels:
        level = max(levels)
    labels = {name: s["label"] for name, s in report["stacks"].items()}
    ratios = report["ratios"].get(payload, {})
    head = ["calls/s by calls in flight", *(str(n) for n in levels), f"ours/peer @{level}"]
    rows = [head]
    for name in report["stacks"]:
        status = report["stacks"][name]
        if name not in stacks and status["status"] != "measured":
            rows.append([labels[name], f"{status['status']}: {status.get('reason', '')}"[:60]])
            continue
        phases = stacks.get(name, [])
        cells = []
        for n in levels:
            phase = phase_at(phases, n)
            cells.append(format_count(phase["callsPerSecond"]) if phase else "n/a")
        mark = "" if name in OUR_STACKS else format_ratio(ratios.get(name, {}).get(str(level)))
        rows.append([labels[name], *cells, mark])
    detail = [
        [
            f"@{level} in flight",
            "p50 us",
            "p90 us",
            "p99 us",
            "p99.9 us",
            "errors",
            "server CPU s",
            "server us/call",
            "server peak RSS MiB",
            "client CPU s",
            "other CPU s",
        ]
    ]
    for name, phases in stacks.items():
        phase = phase_at(phases, level)
        if phase is None:
            continue
        lat, server = phase["latency"], phase["server"]
        errors = sum(v for k, v in phase["counters"].items() if k.startswith("error"))
        detail.append(
            [
                labels[name],
                _us(lat["p50Us"]),
                _us(lat["p90Us"]),
                _us(lat["p99Us"]),
                _us(lat["p999Us"]),
                str(errors),
                f"{server.get('cpuSeconds', 0):.2f}",
                _us(server.get("cpuUsPerCall")),
                _us(server.get("peakRssMiB")),
                f"{phase['clientCpuSeconds']:.2f}",
                f"{phase.get('otherCpuSeconds', 0.0):.2f}",
            ]
        )
    ratio_rows = [["ours / peer by calls in flight", *(str(n) for n in levels)]]
    for name in report["stacks"]:
        if name not in OUR_STACKS and name in ratios:
            ratio_rows.append(
                [labels[name], *(format_ratio(ratios[name].get(str(n))) for n in levels)]
            )
    title = f"echo, {PAYLOADS[payload]:,} B payload"
    tables = [format_table(rows)]
    if len(ratio_rows) > 1:
        tables.append(format_table(ratio_rows))
    versus = (report.get("typescriptRatios") or {}).get(payload) or {}
    if versus:
        ts_rows = [["TypeScript client / stack by calls in flight", *(str(n) for n in levels)]]
        for name, row in versus.items():
            ts_rows.append(
                [labels.get(name, name), *(format_ratio(row.get(str(n))) for n in levels)]
            )
        tables.append(format_table(ts_rows))
    tables.append(format_table(detail))
    return f"{title}\n" + "\n\n".join(tables)


def _keystroke_table(report: Mapping[str, Any], key: str = "keystroke") -> str:
    ks = report.get(key) or {}
    if "skipped" in ks:
        return f"keystroke completion ({key}): skipped: {ks['skipped']}"
    if not ks:
        return ""
    c = ks["counters"]
    split = [c.get(f"superseded:{when}", 0) for when in SUPERSEDED_WHEN]
    ended = sum(v for k, v in c.items() if k.startswith(("superseded:", "notSuperseded:")))
    rows = [
        ["keystrokes", "calls", "completed", "superseded", *SUPERSEDED_WHEN, "other"],
        [
            str(c.get("keystrokes", 0)),
            str(c.get("calls", 0)),
            str(c.get("completed", 0)),
            str(sum(split)),
            *(str(n) for n in split),
            str(ended - sum(split)),
        ],
    ]
    lat = ks["latency"]
    s2t = ks["series"].get("supersedeToTerminal", {})
    lines = [
        f"keystroke completion ({', '.join(ks['completionCalls'])}): {ks['typists']} typists, "
        f"{ks['seconds']:g} s",
        format_table(rows),
        f"key-to-result of completed calls: p50 {_us(lat['p50Us'])} us, p99 {_us(lat['p99Us'])}"
        f" us; supersede-to-terminal frame: p50 {_us(s2t.get('p50Us'))} us, "
        f"p99 {_us(s2t.get('p99Us'))} us",
    ]
    return "\n".join(lines)


def _prepare_table(report: Mapping[str, Any]) -> str:
    prepare = report.get("prepare") or {}
    if "skipped" in prepare or not prepare:
        return f"prepare: skipped: {prepare['skipped']}" if prepare else ""
    lat, server = prepare["latency"], prepare["server"]
    errors = sum(v for k, v in prepare["counters"].items() if k.startswith("error"))
    rows = [
        ["prepare, 1-3 references", "calls/s", "p50 us", "p99 us", "errors", "server us/call"],
        [
            f"{prepare['inFlight']} in flight",
            format_count(prepare["callsPerSecond"]),
            _us(lat["p50Us"]),
            _us(lat["p99Us"]),
            str(errors),
            _us(server.get("cpuUsPerCall")),
        ],
    ]
    sources = prepare.get("sources")
    if not sources:
        return format_table(rows)
    about = (
        f"sources: {sources['sessions']} real session logs from {sources['origin']} "
        f"({sources['rejected']} left out: rejected by the index), "
        f"{sources['totalBytes'] / 2**20:.1f} MiB in all, log size p50 "
        f"{sources['p50Bytes'] / 1024:.1f} KiB, p90 {sources['p90Bytes'] / 1024:.1f} KiB, "
        f"max {sources['maxBytes'] / 1024:.1f} KiB"
    )
    return f"{format_table(rows)}\n{about}"


#: The report's cancel-probe sections and how their rows are named.
CANCEL_SECTIONS = (("cancel", ""), ("cancelTypescript", "TypeScript client, "))


def _cancel_table(report: Mapping[str, Any]) -> str:
    rows = [["cancel-to-quiescence", "samples", "p50 us", "p90 us", "p99 us", "p99.9 us", "max us"]]
    for section, client in CANCEL_SECTIONS:
        cancel = report.get(section) or {}
        for key, label in (("idle", "idle server"), ("underLoad", "under echo load")):
            phase = cancel.get(key)
            if not phase:
                continue
            lat = phase["latency"]
            rows.append(
                [
                    f"{client}{label}{phase.get('loadNote', '')}",
                    str(lat["count"]),
                    *(_us(lat[k]) for k in ("p50Us", "p90Us", "p99Us", "p999Us", "maxUs")),
                ]
            )
    return format_table(rows) if len(rows) > 1 else ""


def _profile_tables(report: Mapping[str, Any]) -> str:
    labels = {name: s["label"] for name, s in report["stacks"].items()}
    parts = []
    for stack, profile in (report.get("profiles") or {}).items():
        title = f"where {labels.get(stack, stack)}'s server spends its time (py-spy, echo 64 B"
        title += f" at {profile['inFlight']} in flight"
        if profile.get("callsPerSecond") is not None:
            title += f", {format_count(profile['callsPerSecond'])} calls/s while sampled"
        title += ")"
        if "error" in profile:
            parts.append(f"{title}: {profile['error']}")
            continue
        rows = [["function (self time)", "%"]]
        rows += [[name, f"{pct:.1f}"] for name, pct in profile["selfPercent"]]
        parts.append(f"{title}, {profile['samples']} samples:\n{format_table(rows)}")
    return "\n\n".join(parts)


def _disturbed_phases(report: Mapping[str, Any], cpus: float = 0.2) -> list[str]:
    """Echo phases during which other programs used more than ``cpus`` CPUs on average (the
    run's ``disturbed_cpus`` setting where the report has one)."""
    labels = {name: s["label"] for name, s in report["stacks"].items()}
    cpus = report["config"].get("settings", {}).get("disturbed_cpus", cpus)
    found = []
    for payload, data in report["echo"].items():
        for name, phases in data["stacks"].items():
            for phase in phases:
                if phase.get("otherCpuSeconds", 0.0) > cpus * phase["seconds"]:
                    found.append(f"{labels.get(name, name)} {payload} @{phase['inFlight']}")
    return found


def render_tables(report: Mapping[str, Any]) -> str:
    """The whole report as text: setup, echo tables, keystroke and its levels, prepare,
    cancel, profiles, targets."""
    config, machine = report["config"], report["machine"]
    header = (
        f"load benchmark over {_TRANSPORTS.get(config['transport'], config['transport'])}: "
        f"{config['processes']} client "
        f"processes, {config['agents']} agents, "
        + (
            f"only the keystroke levels, {config['keystrokeDurationSeconds']:g} s each"
            if config.get("only") == "keystroke"
            else f"{config['durationSeconds']:g} s per phase"
        )
        + f"{' (quick)' if config['quick'] else ''}\n"
        f"{machine['cpuCount']} CPUs ({machine['cpuModel']}), Python {machine['python']}, "
        f"pyzmq {machine['pyzmq']}, libzmq {machine['libzmq']}"
    )
    parts = [header]
    busy = _disturbed_phases(report)
    if busy:
        parts.append(
            f"warning: other programs used more than 0.2 CPUs during {len(busy)} phases "
            f"({', '.join(busy[:6])}{', ...' if len(busy) > 6 else ''}); those figures are skewed"
        )
    warning = steal_warning(machine)
    if warning is not None:
        parts.append(warning)
    for payload in PAYLOADS:
        parts.append(_echo_tables(report, payload))
    parts.append(_keystroke_table(report))
    parts.append(_keystroke_table(report, "keystrokeReferences"))
    parts.append(levels_table(report))
    parts.append(_prepare_table(report))
    parts.append(_cancel_table(report))
    parts.append(_profile_tables(report))
    parts.append(format_table(_target_rows(report["targets"])))
    return "\n\n".join(p for p in parts if p)
