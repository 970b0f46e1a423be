"""Session-reference benchmark: candidates at keystroke rate, prepare of three large sources.

``python -m bench.references [--quick] [--out PATH]``

- **candidates, in process**: a `ProjectionCache` filled with 10,000 and 100,000 sessions
  (UUID ids, titles of 2 to 5 words for 85 %, subagent labels for 5 %, 300 workspaces plus
  ``/projects/demo`` for 2 %, no cwd for 5 %). The resolver's first build (``cache.summaries``
  + `CandidateIndex`) is timed, and its in-place update after one new and one retitled
  session (re-read the listing, ``diff``, ``apply``), then each call of
  ``remote_candidates(agent, query)`` (rank, filter, limit 50, canonical mentions) for an
  agent in ``/projects/demo``. Queries: empty;
  1 character; the first 2 letters of a title word; 5 characters, 80 % cut from a title and
  20 % random letters (no match: a full scan, the worst case).
- **candidates, wire**: ``agent-actors serve --sessions`` over 10,000 real raw session logs
  (indexed before the start), ``sessionReferenceResolver/candidates(agentId, query)`` through
  ``wire.open_client``, one call at a time, the same query mix. The first call builds the index
  and is reported apart.
- **prepare**: three raw logs of about 20 MB each written with `SessionLogWriter` (chunk-heavy
  turns of ``bench.store.turn_events``). In a fresh subprocess per run: *ours* is
  ``prepare()`` of the three with the real reader (``load_session`` in worker threads, as the
  store loads) and a `LocalSpillStore`, automatic budget (64 KiB, no model route); *plain* reads
  the three files and ``json.loads`` every line, keeping the results. Median of 3 alternating
  runs; peak RSS growth is the child's ``VmHWM`` after minus before. *wire* is the same
  prepare through a fresh server (``--sessions``, sources cold) timed at the client, with the
  server's ``VmHWM`` growth, while a probe echoes every 10 ms (its longest echo is how long the
  server's event loop stalled).

Targets (issue 4, item 7), printed PASS/MISS: candidates p99 ≤ 5 ms at 100,000 sessions for
every query length; prepare (in process, cold) ≤ 2 × the plain decode. The exit status is 0
whenever the run completed, whatever the targets say.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.cli import start_server_process
from actors.session_log import SessionHeader, SessionLogWriter, dumps_line, log_path
from actors.session_references import CandidateIndex, SessionReferenceConfig
from actors.store import CachedSession, ProjectionCache, index_sessions, record_event, title_event
from bench._common import (
    Stopped,
    Target,
    format_ratio,
    format_table,
    latency_summary,
    machine_info,
    progress,
    publish_with_plot,
    ratio,
    run_guarded,
    target_rows,
)
from bench.store import turn_events
from wire import WireError, open_client

__all__ = ["Settings", "main", "run_benchmark"]

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "references.json"
QUERY_KINDS = ("empty", "1 char", "2 chars", "5 chars")
DEMO = "/projects/demo"
WORDS = (
    "refactor mailbox actor wire protocol cancel scope session reference prepare spill budget "
    "candidate index cache title label workspace deadline heartbeat frame codec msgpack zeromq "
    "trio nursery retention projection transcript notice compaction checkpoint subagent parent "
    "review fix flaky test benchmark latency throughput memory leak parser grammar mention uri "
    "docs release migrate schema sqlite writer reader fold surface chunk tool result approval"
).split()


@attrs.frozen(kw_only=True)
class Settings:
    #: Session counts for the in-process candidate measurement.
    cache_sizes: tuple[int, ...] = (10_000, 100_000)
    #: Sessions served for the wire candidate measurement.
    wire_sessions: int = 10_000
    #: Timed calls per query kind (in process / wire).
    samples: int = 2000
    wire_samples: int = 1000
    #: Size of each of the three prepare sources, MB.
    log_mb: float = 20.0
    #: Alternating runs per prepare variant; the median is reported.
    runs: int = 5

    @classmethod
    def quick_run(cls) -> Settings:
        return cls(
            cache_sizes=(1000, 5000),
            wire_sessions=500,
            samples=50,
            wire_samples=50,
            log_mb=1.0,
            runs=1,
        )


@attrs.frozen
class DemoAgent:
    session_id: str
    cwd: str | None = DEMO


# --- candidates ---


def synthetic_sessions(count: int, rng: random.Random) -> list[CachedSession]:
    """``count`` cache rows shaped like a busy user's sessions (see the module docstring)."""
    rows = []
    for n in range(count):
        pick = rng.random()
        cwd = DEMO if pick < 0.02 else None if pick < 0.07 else f"/projects/p{rng.randrange(300)}"
        words = rng.sample(WORDS, rng.randint(2, 5))
        rows.append(
            CachedSession(
                session_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                root_id=0,
                path=f"/nowhere/{n}/session.jsonl",
                cwd=cwd,
                created_at=1_700_000_000_000 + n * 1000 + rng.randrange(1000),
                title=" ".join(words).capitalize() if rng.random() < 0.85 else None,
                subagent_label=f"{words[0]}-helper" if rng.random() < 0.05 else None,
            )
        )
    return rows


def queries(kind: str, count: int, titles: Sequence[str], rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = []
    for _ in range(count):
        if kind == "empty":
            out.append("")
        elif kind == "1 char":
            out.append(rng.choice(letters + "0123456789"))
        elif kind == "2 chars":
            out.append(rng.choice(WORDS)[:2])
        elif rng.random() < 0.8:
            title = rng.choice(titles)
            start = rng.randrange(max(1, len(title) - 4))
            out.append(title[start : start + 5])
        else:
            out.append("".join(rng.choices(letters, k=5)))
    return out


def timed_queries(
    call: Callable[[str], Any], kinds: dict[str, list[str]]
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Wall-clock and thread-CPU latency summaries per query kind (CPU time leaves out the
    time the process was not running, so it separates the work from a busy machine)."""
    for items in kinds.values():  # warm up
        for query in items[:20]:
            call(query)
    wall, cpu = {}, {}
    for kind, items in kinds.items():
        samples, cpu_samples = [], []
        for query in items:
            started, started_cpu = time.perf_counter_ns(), time.thread_time_ns()
            call(query)
            cpu_samples.append(time.thread_time_ns() - started_cpu)
            samples.append(time.perf_counter_ns() - started)
        wall[kind] = latency_summary(samples, cdf=False)
        cpu[kind] = latency_summary(cpu_samples, cdf=False)
    return wall, cpu


def bench_candidates(settings: Settings, work: Path) -> list[dict[str, Any]]:
    config = SessionReferenceConfig()
    results = []
    for count in settings.cache_sizes:
        progress(f"candidates: a cache of {count:,} sessions")
        rng = random.Random(count)
        cache = ProjectionCache.open(work / f"candidates-{count}.sqlite3")
        try:
            root_id = cache.root_id(work / f"nowhere-{count}", "none")
            rows = [attrs.evolve(row, root_id=root_id) for row in synthetic_sessions(count, rng)]
            cache.upsert(rows)
            started = time.perf_counter()
            summaries = cache.summaries([root_id])
            read = time.perf_counter() - started
            index = CandidateIndex(summaries)
            build = time.perf_counter() - started - read
            # The resolver's update after one new session and one retitled session: read
            # the listing, diff it against the index (both in a worker thread), apply.
            fresh = synthetic_sessions(1, random.Random(-count))[0]
            cache.upsert([attrs.evolve(fresh, root_id=root_id, created_at=2_000_000_000_000)])
            cache.upsert([attrs.evolve(rows[len(rows) // 2], title="Retitled for the bench")])
            started = time.perf_counter()
            changes = index.diff(cache.summaries([root_id]))
            diffed = time.perf_counter() - started
            index.apply(changes)
            applied = time.perf_counter() - started - diffed
        finally:
            cache.close()
        agent = DemoAgent(session_id=rows[0].session_id)
        titles = [row.title for row in rows if row.title]
        kinds = {kind: queries(kind, settings.samples, titles, rng) for kind in QUERY_KINDS}
        found = {
            kind: sum(bool(index.candidates(agent, q, config=config)) for q in qs)
            for kind, qs in kinds.items()
        }
        latency, cpu = timed_queries(
            functools.partial(index.remote_candidates, agent, config=config), kinds
        )
        results.append(
            {
                "sessions": count,
                "summariesSeconds": round(read, 4),
                "indexBuildSeconds": round(build, 4),
                "updateChanges": len(changes),
                "updateReadAndDiffSeconds": round(diffed, 4),
                "updateApplySeconds": round(applied, 4),
                "queriesWithMatches": found,
                "latency": latency,
                "cpu": cpu,
            }
        )
    return results


def write_listed_sessions(root: Path, rows: Sequence[CachedSession]) -> None:
    """Raw DSH logs in layout: a header and the session's title event (when it has one)."""
    for row in rows:
        header = SessionHeader(id=row.session_id, created_at=row.created_at, cwd=row.cwd)
        lines = [dumps_line(header.to_record())]
        if row.title:
            lines.append(dumps_line(record_event(title_event(row.title), 0, row.created_at)))
        path = log_path(root, row.cwd, row.session_id, "none")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\n".join(lines) + b"\n")


async def _wire_candidates(address: str, kinds: dict[str, list[str]]) -> dict[str, Any]:
    async with open_client(address) as client:
        me = (await client.call("agents/create", {"cwd": DEMO}))["agentId"]
        resolver = client.agent(me).sessionReferenceResolver
        started = time.perf_counter()
        first = await resolver.candidates("")
        first_seconds = time.perf_counter() - started
        for items in kinds.values():  # warm up
            for query in items[:20]:
                await resolver.candidates(query)
        latency = {}
        for kind, items in kinds.items():
            samples = []
            for query in items:
                started_ns = time.perf_counter_ns()
                await resolver.candidates(query)
                samples.append(time.perf_counter_ns() - started_ns)
            latency[kind] = latency_summary(samples, cdf=False)
        # A new session changes the listing: the next call reads the listing, diffs it and
        # applies the change to the index in place.
        await client.call("agents/create", {"cwd": DEMO})
        started = time.perf_counter()
        await resolver.candidates("")
        rebuild_seconds = time.perf_counter() - started
    return {
        "firstCallSeconds": round(first_seconds, 4),
        "firstCallResults": len(first),
        "afterNewSessionSeconds": round(rebuild_seconds, 4),
        "latency": latency,
    }


def bench_wire_candidates(settings: Settings, work: Path) -> dict[str, Any]:
    count = settings.wire_sessions
    progress(f"candidates over the wire: writing and indexing {count:,} sessions")
    rng = random.Random(7)
    rows = synthetic_sessions(count, rng)
    root, data = work / "wire-sessions", work / "wire-data"
    write_listed_sessions(root, rows)
    data.mkdir()
    cache = ProjectionCache.open(data / "sessions.sqlite3")
    try:
        summary = index_sessions(root, cache)
    finally:
        cache.close()
    if summary.rejected:
        raise RuntimeError(f"{len(summary.rejected)} generated sessions were rejected")
    titles = [row.title for row in rows if row.title]
    kinds = {kind: queries(kind, settings.wire_samples, titles, rng) for kind in QUERY_KINDS}

    async def run() -> dict[str, Any]:
        process, [address] = await start_server_process(
            f"ipc://{work}/candidates.sock", data, extra=["--sessions", str(root)]
        )
        try:
            return await _wire_candidates(address, kinds)
        finally:
            process.kill()
            await process.wait()

    return {"sessions": count, **trio.run(run)}


# --- prepare ---

PREPARE_CHILD = r"""
import json, sys, time
mode, spill, *paths = sys.argv[1:]

def peak():
    # VmHWM belongs to this process image; ru_maxrss would start at the parent's RSS.
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmHWM:")) * 1024

if mode == "ours":
    import trio
    from actors.session_log._reader import load_session
    from actors.session_references import (
        LocalSpillStore, SessionReferenceConfig, SourceSnapshot, prepare,
    )
    by_id = {}
    for path in paths:
        with open(path, "rb") as file:
            by_id[json.loads(file.readline())["id"]] = path

    class Agent:
        session_id = "bench-target"
        cwd = "/projects/demo"

    async def read(session_id):
        loaded = await trio.to_thread.run_sync(load_session, by_id[session_id])
        return SourceSnapshot.from_surface(loaded.surface_snapshot())

    async def run():
        return await prepare(
            Agent(), "compare", [{"sessionId": i} for i in by_id], read_snapshot=read,
            config=SessionReferenceConfig(), spill_store=LocalSpillStore(spill),
        )
before = peak()
started, cpu = time.perf_counter(), time.process_time()
if mode == "ours":
    prepared = trio.run(run)
    facts = {"promptBytes": len(prepared.additional_context.text.encode()),
             "spilledBytes": [ref.bytes for ref in prepared.spilled],
             "references": prepared.additional_context.source.to_wire()["references"]}
else:
    kept = []
    for path in paths:
        with open(path, "rb") as file:
            kept.append([json.loads(line) for line in file])
    facts = {"records": sum(len(records) for records in kept)}
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
growth = peak() - before
print(json.dumps({"seconds": seconds, "cpuSeconds": cpu, "rssGrowthBytes": growth, **facts}))
"""


def write_source(root: Path, number: int, megabytes: float) -> Path:
    """A raw log of about ``megabytes`` MB of chunk-heavy turns, in a DSH layout."""
    session_id = f"bench-source-{number}"
    path = log_path(root, "/projects/other", session_id, "none")
    path.parent.mkdir(parents=True, exist_ok=True)
    header = SessionHeader(
        id=session_id, created_at=1_767_225_600_000 + number, cwd="/projects/other"
    )
    turn = 0
    with SessionLogWriter.create(path, header, fsync=False, clock=lambda: 1_767_225_600_000) as log:
        while (path.stat().st_size if path.exists() else 0) < megabytes * 1_000_000:
            turn += 1
            for item in turn_events(turn + 1000 * number, chunks=120, padding=3000):
                log.append(item.type, item.data, surface_op=item.surface_op)
            log.flush()
    return path


_SAMPLE_KEYS = ("seconds", "cpuSeconds", "rssGrowthBytes", "failed", "longestEchoMs", "warmSeconds")


def _child(mode: str, spill: Path, paths: Sequence[Path]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PREPARE_CHILD, mode, str(spill), *map(str, paths)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"prepare child ({mode}) failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    shutil.rmtree(spill, ignore_errors=True)
    return result


def _cpu(pid: int) -> float:
    """User + system CPU seconds of a process so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _vm(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} for pid {pid}")


async def _wire_prepare(root: Path, data: Path, ids: list[str], sock: str) -> dict[str, Any]:
    """One cold prepare (and one warm) through a fresh server; a probe echoes every 10 ms
    meanwhile, so the longest echo shows how long the server's event loop was blocked."""
    process, [address] = await start_server_process(sock, data, extra=["--sessions", str(root)])
    echoes: list[int] = []
    result: dict[str, Any] = {}
    try:
        async with open_client(address) as client:
            me = (await client.call("agents/create", {"cwd": DEMO}))["agentId"]
            resolver = client.agent(me).sessionReferenceResolver
            await resolver.candidates("")  # the server is up and its index built
            done = trio.Event()

            async def probe() -> None:
                while not done.is_set():
                    started_ns = time.perf_counter_ns()
                    with contextlib.suppress(WireError):
                        await client.call("diagnostics/echoRaw", {"payload": 0})
                    echoes.append(time.perf_counter_ns() - started_ns)
                    await trio.sleep(0.01)

            references = [{"sessionId": i} for i in ids]
            before, cpu = _vm(process.pid, "VmRSS"), _cpu(process.pid)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(probe)
                started = time.perf_counter()
                try:
                    prepared = await resolver.prepare("compare", references)
                    result["seconds"] = time.perf_counter() - started
                    text = prepared["additionalContext"]["content"][0]["text"]
                    result["promptBytes"] = len(text.encode())
                except WireError as exc:
                    result["failed"] = f"{exc.code.value}: {exc.message}"
                done.set()
            result["cpuSeconds"] = _cpu(process.pid) - cpu
            result["rssGrowthBytes"] = _vm(process.pid, "VmHWM") - before
            if "failed" not in result:
                started = time.perf_counter()
                await resolver.prepare("compare", references)
                result["warmSeconds"] = time.perf_counter() - started
    finally:
        process.kill()
        await process.wait()
    result["longestEchoMs"] = round(max(echoes, default=0) / 1e6, 1)
    return result


def bench_prepare(settings: Settings, work: Path) -> dict[str, Any]:
    root = work / "prepare-sessions"
    paths = []
    for number in range(3):
        progress(f"prepare: writing source {number + 1} of 3 (~{settings.log_mb:g} MB)")
        paths.append(write_source(root, number, settings.log_mb))
    template = work / "prepare-template"
    template.mkdir()
    cache = ProjectionCache.open(template / "sessions.sqlite3")
    try:
        index_sessions(root, cache)
    finally:
        cache.close()
    ids = [f"bench-source-{number}" for number in range(3)]
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "plain": [], "wire": []}
    for run in range(settings.runs):
        progress(f"prepare: run {run + 1} of {settings.runs}")
        for mode in ("ours", "plain") if run % 2 == 0 else ("plain", "ours"):
            runs[mode].append(_child(mode, work / "spill", paths))
        data = work / f"prepare-data-{run}"
        shutil.copytree(template, data)
        sock = f"ipc://{work}/prepare-{run}.sock"
        runs["wire"].append(trio.run(_wire_prepare, root, data, ids, sock))
    summary: dict[str, Any] = {
        "sources": [{"path": p.name, "bytes": p.stat().st_size} for p in paths],
        "totalBytes": sum(p.stat().st_size for p in paths),
    }
    for mode, samples in runs.items():
        ok = [sample for sample in samples if "failed" not in sample]
        extra = {k: v for k, v in (ok or samples)[0].items() if k not in _SAMPLE_KEYS}
        summary[mode] = {
            "seconds": round(statistics.median(s["seconds"] for s in ok), 4) if ok else None,
            "samples": [round(s["seconds"], 4) for s in ok],
            "cpuSeconds": round(statistics.median(s["cpuSeconds"] for s in samples), 4),
            "rssGrowthBytes": max(s["rssGrowthBytes"] for s in samples),
            "failures": [s["failed"] for s in samples if "failed" in s],
            **extra,
        }
    summary["wire"]["longestEchoMs"] = max(s["longestEchoMs"] for s in runs["wire"])
    warm = [s["warmSeconds"] for s in runs["wire"] if "warmSeconds" in s]
    summary["wire"]["warmSeconds"] = round(statistics.median(warm), 4) if warm else None
    plain = summary["plain"]["seconds"]
    summary["ratio"] = ratio(summary["ours"]["seconds"], plain)
    summary["wireRatio"] = ratio(summary["wire"]["seconds"], plain)
    summary["cpuRatio"] = round(summary["ours"]["cpuSeconds"] / summary["plain"]["cpuSeconds"], 3)
    return summary


# --- report ---


def run_benchmark(settings: Settings) -> dict[str, Any]:
    started = time.monotonic()
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix="bench-references-") as tmp:
        work = Path(tmp)
        candidates = bench_candidates(settings, work)
        wire = bench_wire_candidates(settings, work)
        prepare = bench_prepare(settings, work)
    largest = max(candidates, key=lambda entry: entry["sessions"])
    targets = [
        Target(
            name=f"candidates p99, {largest['sessions']:,} sessions, {kind}",
            value=largest["latency"][kind]["p99Us"] / 1000,
            limit=5.0,
            comparison="<=",
            unit=" ms",
        )
        for kind in QUERY_KINDS
    ]
    targets.append(
        Target(
            name="prepare 3 sources vs json.loads per line",
            value=prepare["ratio"],
            limit=2.0,
            comparison="<=",
            unit="x",
        )
    )
    return {
        "benchmark": "references",
        "startedAt": stamp,
        "elapsedSeconds": round(time.monotonic() - started, 2),
        "config": attrs.asdict(settings),
        "machine": machine_info(),
        "candidates": candidates,
        "wireCandidates": wire,
        "prepare": prepare,
        "targets": [t.as_json() for t in targets],
        "allPassed": all(t.passed for t in targets),
    }


def render_table(report: dict[str, Any]) -> str:
    rows = [["candidates", "index build", *(f"{k} p50/p99 (us)" for k in QUERY_KINDS)]]
    series = [(f"in process, {e['sessions']:,}", e) for e in report["candidates"]]
    wire = report["wireCandidates"]
    series.append((f"wire, {wire['sessions']:,}", wire))
    for name, entry in series:
        build = (
            f"{entry['indexBuildSeconds'] + entry['summariesSeconds']:.3f} s, update "
            f"{entry['updateReadAndDiffSeconds'] + entry['updateApplySeconds']:.3f} s"
            if "indexBuildSeconds" in entry
            else f"{entry['firstCallSeconds']:.3f} s 1st call, "
            f"{entry['afterNewSessionSeconds']:.3f} s after a new session"
        )
        for suffix, key in (("", "latency"), (", thread CPU", "cpu")):
            if key in entry:
                latency = entry[key]
                cells = [
                    f"{latency[k]['p50Us']:.0f} / {latency[k]['p99Us']:.0f}" for k in QUERY_KINDS
                ]
                rows.append([name + suffix, build if not suffix else "", *cells])
    prepare = report["prepare"]
    mib = prepare["totalBytes"] / (1 << 20)
    loads = [["prepare, 3 sources", "wall s (median)", "vs plain", "CPU s", "peak RSS growth"]]
    for name, key in (
        ("prepare, in process", "ours"),
        ("prepare, wire (cold)", "wire"),
        ("json.loads per line", "plain"),
    ):
        entry = prepare[key]
        seconds = entry["seconds"]
        loads.append(
            [
                name,
                "failed" if seconds is None else f"{seconds:.3f}",
                format_ratio(ratio(seconds, prepare["plain"]["seconds"])),
                f"{entry['cpuSeconds']:.3f}",
                f"{entry['rssGrowthBytes'] / (1 << 20):.0f} MiB",
            ]
        )
    wire = prepare["wire"]
    warm = "failed" if wire["warmSeconds"] is None else f"{wire['warmSeconds']:.3f}"
    loads.append(["prepare, wire (warm)", warm, "", "", ""])
    loads.append(["longest server echo during it", f"{wire['longestEchoMs']:.0f} ms", "", "", ""])
    if wire["failures"]:
        loads.append(
            [f"wire runs failed: {len(wire['failures'])}", wire["failures"][0], "", "", ""]
        )
    machine = report["machine"]
    header = (
        f"references benchmark; {machine['cpuCount']} CPUs ({machine['cpuModel']}), "
        f"Python {machine['python']}; prepare sources: 3 logs, {mib:.1f} MiB in all"
    )
    parts = [header, format_table(rows), format_table(loads)]
    parts.append(format_table(target_rows(report["targets"])))
    return "\n\n".join(parts)


def plot_report(path: Path, report: dict[str, Any]) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, 5), layout="constrained")
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2)
    wire = report["wireCandidates"]
    series = [(f"{e['sessions']:,} in process", e) for e in report["candidates"]]
    series.append((f"{wire['sessions']:,} via wire", wire))
    width = 0.8 / len(series)
    for offset, (label, entry) in enumerate(series):
        xs = [k + (offset - (len(series) - 1) / 2) * width for k in range(len(QUERY_KINDS))]
        p99 = [entry["latency"][kind]["p99Us"] for kind in QUERY_KINDS]
        p50 = [entry["latency"][kind]["p50Us"] for kind in QUERY_KINDS]
        left.bar(xs, p99, width, label=f"{label} (p99; dot p50)")
        left.plot(xs, p50, "o", markerfacecolor="white", markeredgecolor="black")
    left.axhline(5000, linestyle="--", color="grey", label="5 ms target")
    left.set_xticks(range(len(QUERY_KINDS)), [f"query: {k}" for k in QUERY_KINDS])
    left.set_yscale("log")
    left.set_ylabel("latency (µs)")
    left.set_title("candidates")
    left.legend(fontsize="small")
    prepare = report["prepare"]
    names = ["prepare\nin process", "prepare\nwire (cold)", "json.loads\nper line"]
    keys = ["ours", "wire", "plain"]
    bars = right.bar(names, [prepare[k]["seconds"] or 0.0 for k in keys], color="tab:blue")
    for bar, key in zip(bars, keys, strict=True):
        rss = prepare[key]["rssGrowthBytes"] / (1 << 20)
        right.annotate(
            f"RSS +{rss:.0f} MiB",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
        )
    right.axhline(
        2 * prepare["plain"]["seconds"], linestyle="--", color="grey", label="2 x json.loads target"
    )
    right.set_ylabel("seconds (median)")
    right.set_title(f"3 sources, {prepare['totalBytes'] / (1 << 20):.0f} MiB of logs")
    right.legend()
    figure.suptitle("session references")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.references", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="JSON report; the PNG goes beside it"
    )
    args = parser.parse_args(argv)
    settings = Settings.quick_run() if args.quick else Settings()
    expected = (RuntimeError, OSError)
    report = run_guarded("bench.references", lambda: run_benchmark(settings), expected)
    if isinstance(report, Stopped):
        return report.status
    return publish_with_plot(args.out, report, plot=plot_report, render=render_table)


if __name__ == "__main__":
    sys.exit(main())
