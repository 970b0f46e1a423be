"""Session store benchmark: appends, cold loads, indexing and listing, in one run.

``python -m bench.store [--quick] [--log-mb N] [--sessions N] [--listed N] [--out PATH]``

- **append**: events/s through `SessionState.append` (validation, packing, zstd frame, cache
  row update; the time inside the append calls) for batches of 1 and 64 events, with ``fsync``
  per batch and with ``flush`` (written, no fsync); and batches of 1 to 16 sessions at once
  (one task each; events/s over the wall time).
- **cold load**: a generated log of about 50 MB decoded (chunk-heavy turns like real DSH logs),
  raw ``.jsonl`` and ``.jsonl.zstd``, loaded in a fresh subprocess by `load_session` and, in the
  same run, by the baseline: read the file (zstd: decompress across frames) and ``json.loads``
  each line. Every run is a fresh process; time is the median of 5 alternating runs. Memory is
  read from ``/proc/self/status``: the peak is the child's ``VmHWM`` (high-water mark of its
  whole RSS, interpreter and imports included) after the load, the growth is that peak minus
  ``VmRSS`` just before the load; both are reported as ratios to the decoded size (the worst
  run).
- **index**: `index_sessions` over a generated DSH root of 10,000 zstd sessions, from an empty
  cache (sessions/s) and again unchanged (the incremental refresh).
- **listing**: a page of 100 newest first from a cache of 100,000 rows (first page and pages
  after random cursors), latency percentiles.

Targets (issue 3, item 6), printed PASS/MISS: cold load (raw) ≤ 1.5 × the baseline's time; peak
RSS of the loading process ≤ 3 × the decoded size (both encodings; the whole process, the
stricter reading); listing p99 ≤ 5 ms. The exit status is 0 whenever the run
completed, whatever the targets say.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from actors._store_services import build_session_services
from actors.session_log import (
    SessionHeader,
    SessionLogWriter,
    compress_frame,
    dumps_line,
    log_path,
    scan_frames,
)
from actors.store import (
    CachedSession,
    Durability,
    EventInput,
    ListCursor,
    ProjectionCache,
    SessionState,
    index_sessions,
)
from bench._common import (
    Stopped,
    Target,
    format_count,
    format_table,
    machine_info,
    progress,
    publish_with_plot,
    run_guarded,
    target_rows,
)

__all__ = ["Settings", "main", "run_benchmark", "turn_events"]

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "store.json"
BATCHES = (1, 64)
#: Sessions appended to at once in the concurrent run (batches of 1).
CONCURRENT_SESSIONS = 16
MODEL = {"kind": "model", "provider": "bench", "model": "m"}
#: Words of generated text (tool output and answers compress about as real text does).
WORDS = (
    "the session log holds events for each turn and tool result with file contents "
    "def class return import from self value path error line index chunk frame"
).split()
#: Percentiles of a latency CDF in the report and the plot.
CDF_PERCENTILES = (*(float(p) for p in range(100)), 99.5, 99.9, 100.0)


@attrs.frozen(kw_only=True)
class Settings:
    #: Seconds of appending per (durability, batch size).
    append_seconds: float = 2.0
    #: Decoded size of the cold-load log, MiB.
    log_mb: float = 50.0
    #: Alternating runs per loader, each in a fresh process; the median time is reported.
    load_runs: int = 5
    #: Sessions in the generated root for the index build.
    sessions: int = 10_000
    #: Rows in the cache for the listing measurement.
    listed: int = 100_000
    #: Listing calls per kind (first page, random cursor).
    list_samples: int = 2000

    @classmethod
    def quick_run(cls) -> Settings:
        return cls(
            append_seconds=0.1, log_mb=1.0, load_runs=1, sessions=100, listed=2000, list_samples=50
        )


# --- event streams ---


def turn_events(number: int, *, chunks: int = 40, padding: int = 0) -> list[EventInput]:
    """One realistic turn: prompt, reasoning and text deltas, a tool call and its result, an
    answer. ``padding`` bytes of text ride in the tool result and the answer."""
    rng = random.Random(number)
    filler = " ".join(rng.choices(WORDS, k=padding // 5 + 1))[:padding] if padding else ""
    prompt = {
        "id": f"u{number}",
        "role": "user",
        "content": [{"type": "text", "text": f"please look at item {number} and explain"}],
        "source": {"kind": "user"},
    }
    call_id = f"call-{number}"
    events = [
        EventInput(type="turn/start", data={"turn": number}),
        EventInput(type="step/start", data={"turn": number, "step": 1}),
        EventInput(type="user/message", data=prompt, surface_op="append"),
    ]
    for kind, name in (("reasoning-delta", "r"), ("text-delta", "t")):
        for k in range(chunks):
            chunk = {
                "type": kind,
                "index": 0 if kind == "reasoning-delta" else 1,
                "text": f"{name}{k} ",
            }
            events.append(
                EventInput(type="assistant/chunk", data={"turn": number, "step": 1, "chunk": chunk})
            )
    tool_call = {"type": "tool-call", "id": call_id, "name": "read", "arguments": "{}"}
    answer = {
        "turn": number,
        "step": 1,
        "message": {
            "id": f"a{number}",
            "role": "assistant",
            "content": [{"type": "text", "text": f"answer {number} {filler}"}, tool_call],
            "source": MODEL,
        },
    }
    result_block = {
        "type": "tool-result",
        "toolCallId": call_id,
        "content": [{"type": "text", "text": f"file contents {filler}"}],
    }
    result = {
        "turn": number,
        "step": 1,
        "message": {
            "id": f"r{number}",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [result_block],
        },
    }
    events += [
        EventInput(type="assistant/message", data=answer, surface_op="append"),
        EventInput(
            type="tool/call",
            data={"turn": number, "step": 1, "callId": call_id, "name": "read", "arguments": "{}"},
        ),
        EventInput(type="tool/result", data=result, surface_op="append"),
        EventInput(type="step/end", data={"turn": number, "step": 1}),
        EventInput(type="turn/end", data={"turn": number, "reason": {"kind": "completed"}}),
    ]
    return events


def event_stream(padding: int = 200) -> Iterator[EventInput]:
    number = 0
    while True:
        number += 1
        yield from turn_events(number, chunks=20, padding=padding)


def latency_summary(samples_ns: Sequence[int], *, cdf: bool = True) -> dict[str, Any]:
    """Exact percentiles (microseconds, nearest rank) of ``samples_ns``; the keys of
    `bench._common.latency_summary`, without its histogram (slow to summarize)."""
    ordered = sorted(samples_ns)
    count = len(ordered)

    def at(percentile: float) -> float | None:
        if not count:
            return None
        rank = min(count - 1, max(0, round(percentile / 100 * count + 0.5) - 1))
        return round(ordered[rank] / 1000, 3)

    summary: dict[str, Any] = {
        "count": count,
        "minUs": at(0.0),
        "meanUs": round(sum(ordered) / count / 1000, 3) if count else None,
        "p50Us": at(50.0),
        "p90Us": at(90.0),
        "p99Us": at(99.0),
        "p999Us": at(99.9),
        "maxUs": at(100.0),
    }
    if cdf:
        summary["cdf"] = [[p, at(p)] for p in CDF_PERCENTILES] if count else []
    return summary


# --- append throughput ---


async def _append_run(
    data: Path, durability: Durability, batch: int, seconds: float, sessions: int = 1
) -> dict[str, Any]:
    services = build_session_services(data, durability=durability, index_on_start=False)
    try:
        store = services.directory
        states = []
        for _ in range(sessions):
            session_id = store.new_session_id()
            await store.create(SessionHeader(id=session_id, created_at=0, cwd="/bench"))
            state = await store.load(session_id)
            assert state is not None
            states.append(state)
        latencies: list[int] = []

        async def append_for(state: SessionState, until: float) -> None:
            stream = event_stream()
            while time.perf_counter() < until:
                items = [next(stream) for _ in range(batch)]
                before = time.perf_counter_ns()
                await state.append(items)
                latencies.append(time.perf_counter_ns() - before)

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for state in states:
                nursery.start_soon(append_for, state, started + seconds)
        # One session: only the append calls count (generating the events is not the store's
        # work). Several: the wall time, since their calls overlap.
        elapsed = sum(latencies) / 1e9 if sessions == 1 else time.perf_counter() - started
        size = sum(state.path.stat().st_size for state in states)
    finally:
        await services.aclose()
    calls = len(latencies)
    return {
        "durability": durability,
        "batch": batch,
        "sessions": sessions,
        "events": calls * batch,
        "calls": calls,
        "seconds": round(elapsed, 4),
        "eventsPerSecond": round(calls * batch / elapsed, 1),
        "fileBytes": size,
        "callLatency": latency_summary(latencies, cdf=False),
    }


def bench_append(settings: Settings, work: Path) -> list[dict[str, Any]]:
    results = []
    durabilities: tuple[Durability, ...] = ("fsync", "flush")
    seconds = settings.append_seconds
    for durability in durabilities:
        for batch in BATCHES:
            progress(f"append: {durability}, batches of {batch}")
            data = work / f"append-{durability}-{batch}"
            results.append(trio.run(_append_run, data, durability, batch, seconds))
        progress(f"append: {durability}, batches of 1, {CONCURRENT_SESSIONS} sessions at once")
        data = work / f"append-{durability}-concurrent"
        results.append(trio.run(_append_run, data, durability, 1, seconds, CONCURRENT_SESSIONS))
    return results


# --- cold load ---

LOAD_CHILD = r"""
import io, json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
if mode == "ours":
    from actors.session_log._reader import load_session
else:
    import zstandard

def memory():
    # VmRSS now and VmHWM (the peak RSS so far) of this process, in bytes; Linux only.
    try:
        with open("/proc/self/status") as status:
            rows = dict(row.split(":", 1) for row in status if row.startswith("Vm"))
        return int(rows["VmRSS"].split()[0]) * 1024, int(rows["VmHWM"].split()[0]) * 1024
    except (OSError, KeyError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return peak, peak

rss_before, _ = memory()
started = time.perf_counter()
if mode == "ours":
    loaded = load_session(path)
    records = len(loaded.events)
else:
    with open(path, "rb") as file:
        data = file.read()
    if path.endswith(".zstd"):
        decompressor = zstandard.ZstdDecompressor()
        data = decompressor.stream_reader(io.BytesIO(data), read_across_frames=True).read()
    parsed = [json.loads(line) for line in data.split(b"\n") if line]
    records = len(parsed)
seconds = time.perf_counter() - started
rss_after, peak = memory()
report = {
    "seconds": seconds,
    "rssBeforeBytes": rss_before,
    "rssAfterBytes": rss_after,
    "peakRssBytes": peak,
    "records": records,
}
print(json.dumps(report))
"""


def write_big_log(path: Path, *, decoded_bytes: int = 0, turns: int = 0) -> dict[str, Any]:
    """Write a chunk-heavy log with the real writer: until its plaintext reaches
    ``decoded_bytes`` (a raw log), or exactly ``turns`` turns."""
    header = SessionHeader(id="bench-big", created_at=0, cwd="/bench")
    number = events = 0
    clock = lambda: 1_767_225_600_000  # noqa: E731  (a fixed time: reproducible bytes)
    with SessionLogWriter.create(path, header, fsync=False, clock=clock) as writer:
        while (turns and number < turns) or (decoded_bytes and path_size(path) < decoded_bytes):
            number += 1
            for item in turn_events(number, chunks=120, padding=3000):
                writer.append(
                    item.type, item.data, surface_op=item.surface_op, ignorable=item.ignorable
                )
                events += 1
            writer.flush()
    return {"turns": number, "events": events}


def reframe_as_zstd(raw: Path, out: Path) -> None:
    """Write ``raw``'s lines as a zstd log: the header frame, then one frame per turn (each
    batch ends after a ``turn/end`` line), byte for byte what the writer makes of the same
    events flushed once per turn."""
    header, _, body = raw.read_bytes().partition(b"\n")
    with out.open("wb") as file:
        file.write(compress_frame(header + b"\n"))
        batch: list[bytes] = []
        for line in body.split(b"\n")[:-1]:
            batch.append(line)
            if line.startswith(b'{"type":"turn/end"'):
                file.write(compress_frame(b"\n".join(batch) + b"\n"))
                batch = []
        if batch:
            file.write(compress_frame(b"\n".join(batch) + b"\n"))


def path_size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _decoded_size(path: Path) -> int:
    if path.suffix != ".zstd":
        return path.stat().st_size
    import zstandard

    with path.open("rb") as file:
        reader = zstandard.ZstdDecompressor().stream_reader(file, read_across_frames=True)
        total = 0
        while chunk := reader.read(1 << 20):
            total += len(chunk)
    return total


def _load_child(mode: str, path: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", LOAD_CHILD, mode, str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{mode} load of {path} failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def bench_load(settings: Settings, work: Path) -> list[dict[str, Any]]:
    results = []
    target = int(settings.log_mb * (1 << 20))
    turns = 0
    for suffix in (".jsonl", ".jsonl.zstd"):
        path = work / f"big{suffix}"
        progress(f"cold load: writing a {settings.log_mb:g} MiB log ({suffix})")
        if not turns:
            shape = write_big_log(path, decoded_bytes=target)
            turns = shape["turns"]
        else:
            # The same plaintext, framed as the writer frames it (write_big_log flushes once
            # per turn); re-framing is much faster than validating every event again.
            reframe_as_zstd(work / "big.jsonl", path)
        decoded = _decoded_size(path)
        runs: dict[str, list[dict[str, Any]]] = {"ours": [], "plain": []}
        for run in range(settings.load_runs):
            progress(f"cold load ({suffix}): run {run + 1} of {settings.load_runs}")
            for mode in ("ours", "plain") if run % 2 == 0 else ("plain", "ours"):
                runs[mode].append(_load_child(mode, path))
        summary: dict[str, Any] = {
            "encoding": "zstd" if suffix.endswith("zstd") else "none",
            "fileBytes": path.stat().st_size,
            "decodedBytes": decoded,
            "frames": len(scan_frames(path.read_bytes()).frames)
            if suffix.endswith("zstd")
            else None,
            **shape,
        }
        for mode, samples in runs.items():
            peak = max(s["peakRssBytes"] for s in samples)
            growth = max(s["peakRssBytes"] - s["rssBeforeBytes"] for s in samples)
            summary[mode] = {
                "seconds": round(statistics.median(s["seconds"] for s in samples), 4),
                "samples": [round(s["seconds"], 4) for s in samples],
                "rssBeforeBytes": max(s["rssBeforeBytes"] for s in samples),
                "peakRssBytes": peak,
                "peakRssPerDecodedByte": round(peak / decoded, 3),
                "rssGrowthBytes": growth,
                "rssGrowthPerDecodedByte": round(growth / decoded, 3),
                "retainedRssBytes": max(s["rssAfterBytes"] - s["rssBeforeBytes"] for s in samples),
                "records": samples[0]["records"],
            }
        summary["timeRatio"] = round(summary["ours"]["seconds"] / summary["plain"]["seconds"], 3)
        results.append(summary)
    return results


# --- index build ---


def write_sessions(root: Path, count: int) -> int:
    """``count`` small zstd sessions (two turns, a title) in DSH layout, fast: the event frames
    of a few templates are reused under per-session header frames."""
    templates = []
    for variant in range(8):
        scratch = root.parent / f"template-{variant}.jsonl.zstd"
        header = SessionHeader(id=f"template-{variant}", created_at=0)
        with SessionLogWriter.create(scratch, header, fsync=False) as writer:
            for number in (1, 2):
                for item in turn_events(number, chunks=10, padding=200):
                    writer.append(item.type, item.data, surface_op=item.surface_op)
                writer.flush()
            writer.set_title(f"session variant {variant}")
        data = scratch.read_bytes()
        first_end = scan_frames(data).frames[0][1]
        templates.append(data[first_end:])
        scratch.unlink()
    total = 0
    for n in range(count):
        session_id = f"s{n:06d}"
        cwd = f"/projects/p{n % 50}"
        header = SessionHeader(id=session_id, created_at=1_700_000_000_000 + n * 1000, cwd=cwd)
        path = log_path(root, cwd, session_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        content = (
            compress_frame(dumps_line(header.to_record()) + b"\n") + templates[n % len(templates)]
        )
        path.write_bytes(content)
        total += len(content)
    return total


def bench_index(settings: Settings, work: Path) -> dict[str, Any]:
    root = work / "dsh-root"
    progress(f"index: writing {settings.sessions} sessions")
    written = write_sessions(root, settings.sessions)
    cache = ProjectionCache.open(work / "index.sqlite3")
    try:
        progress("index: building from an empty cache")
        started = time.perf_counter()
        first = index_sessions(root, cache)
        build = time.perf_counter() - started
        progress("index: refreshing (nothing changed)")
        started = time.perf_counter()
        again = index_sessions(root, cache)
        refresh = time.perf_counter() - started
    finally:
        cache.close()
    return {
        "sessions": settings.sessions,
        "bytes": written,
        "indexed": first.indexed,
        "rejected": len(first.rejected),
        "buildSeconds": round(build, 3),
        "buildSessionsPerSecond": round(settings.sessions / build, 1),
        "refreshUnchanged": again.unchanged,
        "refreshSeconds": round(refresh, 3),
        "refreshSessionsPerSecond": round(settings.sessions / refresh, 1),
    }


# --- listing ---


def bench_listing(settings: Settings, work: Path) -> dict[str, Any]:
    progress(f"listing: filling a cache with {settings.listed} sessions")
    cache = ProjectionCache.open(work / "listing.sqlite3")
    rng = random.Random(7)
    try:
        root_id = cache.root_id(work / "nowhere", "zstd")
        rows = [
            CachedSession(
                session_id=f"{rng.getrandbits(64):016x}",
                root_id=root_id,
                path=f"/nowhere/{n}/session.jsonl.zstd",
                cwd=f"/projects/p{n % 200}",
                created_at=1_700_000_000_000 + rng.randrange(10**9),
                title=f"session title {n}",
                last_seq=rng.randrange(5000),
                file_size=rng.randrange(10**6),
                file_mtime_ns=n,
            )
            for n in range(settings.listed)
        ]
        cache.upsert(rows)
        ordered = sorted(rows, key=lambda r: (-r.created_at, r.session_id))
        first: list[int] = []
        deep: list[int] = []
        # CPU time of this thread per call, beside the wall clock: on a busy machine the wall
        # clock's tail is mostly time spent preempted, which the CPU time leaves out.
        first_cpu: list[int] = []
        deep_cpu: list[int] = []
        for _ in range(settings.list_samples):
            cpu, started = time.thread_time_ns(), time.perf_counter_ns()
            page = cache.list_page([root_id], limit=100)
            first.append(time.perf_counter_ns() - started)
            first_cpu.append(time.thread_time_ns() - cpu)
            assert len(page) == 100
            assert page[0].session_id == ordered[0].session_id
            anchor = ordered[rng.randrange(len(ordered) - 200)]
            cursor = ListCursor(anchor.created_at, anchor.session_id)
            cpu, started = time.thread_time_ns(), time.perf_counter_ns()
            page = cache.list_page([root_id], limit=100, after=cursor)
            deep.append(time.perf_counter_ns() - started)
            deep_cpu.append(time.thread_time_ns() - cpu)
            assert len(page) == 100
        clock = time.perf_counter()
        everything = cache.summaries([root_id])
        full = time.perf_counter() - clock
        assert len(everything) == settings.listed
    finally:
        cache.close()
    return {
        "rows": settings.listed,
        "pageSize": 100,
        "firstPage": latency_summary(first),
        "afterCursor": latency_summary(deep),
        "firstPageCpu": latency_summary(first_cpu, cdf=False),
        "afterCursorCpu": latency_summary(deep_cpu, cdf=False),
        "allSummariesSeconds": round(full, 4),
    }


# --- report ---


def run_benchmark(settings: Settings) -> dict[str, Any]:
    started = time.monotonic()
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        work = Path(tmp)
        append = bench_append(settings, work)
        load = bench_load(settings, work)
        index = bench_index(settings, work)
        listing = bench_listing(settings, work)
    raw = next(entry for entry in load if entry["encoding"] == "none")
    peak = max(entry["ours"]["peakRssPerDecodedByte"] for entry in load)
    targets = [
        Target(
            name="cold load time (raw) vs json.loads",
            value=raw["timeRatio"],
            limit=1.5,
            comparison="<=",
            unit="x",
        ),
        Target(
            name="load peak RSS (whole process) vs decoded size",
            value=peak,
            limit=3.0,
            comparison="<=",
            unit="x",
        ),
        Target(
            name="listing p99 (page of 100)",
            value=max(listing["firstPage"]["p99Us"], listing["afterCursor"]["p99Us"]) / 1000,
            limit=5.0,
            comparison="<=",
            unit=" ms",
        ),
    ]
    return {
        "benchmark": "store",
        "startedAt": stamp,
        "elapsedSeconds": round(time.monotonic() - started, 2),
        "config": attrs.asdict(settings),
        "machine": machine_info(),
        "append": append,
        "load": load,
        "index": index,
        "listing": listing,
        "targets": [t.as_json() for t in targets],
        "allPassed": all(t.passed for t in targets),
    }


def render_table(report: dict[str, Any]) -> str:
    rows = [["append", "events/s", "call p50 (us)", "call p99 (us)"]]
    for entry in report["append"]:
        latency = entry["callLatency"]
        rows.append(
            [
                f"{entry['durability']}, batches of {entry['batch']}"
                + (f", {entry['sessions']} sessions" if entry["sessions"] > 1 else ""),
                format_count(entry["eventsPerSecond"]),
                format_count(latency["p50Us"]),
                format_count(latency["p99Us"]),
            ]
        )
    loads = [
        [
            "cold load",
            "decoded MiB",
            "ours s",
            "json.loads s",
            "ratio",
            "ours peak/decoded",
            "growth/decoded",
            "json.loads peak/decoded",
        ]
    ]
    for entry in report["load"]:
        loads.append(
            [
                entry["encoding"],
                f"{entry['decodedBytes'] / (1 << 20):.1f}",
                f"{entry['ours']['seconds']:.3f}",
                f"{entry['plain']['seconds']:.3f}",
                f"{entry['timeRatio']:.2f}x",
                f"{entry['ours']['peakRssPerDecodedByte']:.2f}x",
                f"{entry['ours']['rssGrowthPerDecodedByte']:.2f}x",
                f"{entry['plain']['peakRssPerDecodedByte']:.2f}x",
            ]
        )
    index, listing = report["index"], report["listing"]
    other = [
        ["index / listing", "value"],
        [f"index build, {index['sessions']} sessions", f"{index['buildSessionsPerSecond']:,.0f}/s"],
        ["index refresh, unchanged", f"{index['refreshSessionsPerSecond']:,.0f}/s"],
        [f"list first page of {listing['rows']:,}, p99", f"{listing['firstPage']['p99Us']:.0f} us"],
        ["list after a cursor, p99", f"{listing['afterCursor']['p99Us']:.0f} us"],
        [
            "listing CPU time p99 (first, cursor)",
            f"{listing['firstPageCpu']['p99Us']:.0f} / {listing['afterCursorCpu']['p99Us']:.0f} us",
        ],
        ["all summaries", f"{listing['allSummariesSeconds']:.3f} s"],
    ]
    machine = report["machine"]
    header = (
        f"store benchmark; {machine['cpuCount']} CPUs ({machine['cpuModel']}), "
        f"Python {machine['python']}"
    )
    parts = [header, format_table(rows), format_table(loads), format_table(other)]
    parts.append(format_table(target_rows(report["targets"])))
    return "\n\n".join(parts)


def plot_report(path: Path, report: dict[str, Any]) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, 9), layout="constrained")
    FigureCanvasAgg(figure)
    (append, load), (index, listing) = figure.subplots(2, 2)
    labels = [
        f"{e['durability']}\nbatch {e['batch']}"
        + (f" ×{e['sessions']}" if e["sessions"] > 1 else "")
        for e in report["append"]
    ]
    append.bar(labels, [e["eventsPerSecond"] for e in report["append"]], color="tab:blue")
    append.set_yscale("log")
    append.set_ylabel("events/s")
    append.set_title("append throughput")
    entries = report["load"]
    positions = range(len(entries))
    width = 0.38
    load.bar(
        [p - width / 2 for p in positions],
        [e["ours"]["seconds"] for e in entries],
        width,
        label="load_session",
    )
    load.bar(
        [p + width / 2 for p in positions],
        [e["plain"]["seconds"] for e in entries],
        width,
        label="json.loads per line",
    )
    load.set_xticks(
        list(positions),
        [
            f"{e['encoding']}, {e['decodedBytes'] / (1 << 20):.0f} MiB\n"
            f"peak RSS {e['ours']['peakRssPerDecodedByte']:.2f}x "
            f"vs {e['plain']['peakRssPerDecodedByte']:.2f}x"
            for e in entries
        ],
    )
    load.set_ylabel("seconds (median)")
    load.set_title("cold load")
    load.legend()
    data = report["index"]
    index.bar(
        ["build", "refresh (unchanged)"],
        [data["buildSessionsPerSecond"], data["refreshSessionsPerSecond"]],
        color="tab:green",
    )
    index.set_ylabel("sessions/s")
    index.set_title(f"index of {data['sessions']:,} sessions")
    for label, key in (("first page", "firstPage"), ("after a cursor", "afterCursor")):
        pairs = [(us, p / 100) for p, us in report["listing"][key]["cdf"] if us is not None]
        listing.step([us for us, _ in pairs], [f for _, f in pairs], where="post", label=label)
    listing.axvline(5000, linestyle="--", color="grey", label="5 ms target")
    listing.set_xscale("log")
    listing.set_xlabel("latency (µs)")
    listing.set_ylabel("fraction of calls")
    listing.set_title(f"listing 100 of {report['listing']['rows']:,} sessions")
    listing.legend(loc="lower right")
    figure.suptitle("session store")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.store", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of seconds")
    parser.add_argument(
        "--log-mb", type=float, help="decoded size of the cold-load log (default 50)"
    )
    parser.add_argument("--sessions", type=int, help="sessions for the index build (default 10000)")
    parser.add_argument("--listed", type=int, help="cache rows for listing (default 100000)")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="JSON report; the PNG goes beside it"
    )
    args = parser.parse_args(argv)
    settings = Settings.quick_run() if args.quick else Settings()
    changes = {
        key: value
        for key, value in (
            ("log_mb", args.log_mb),
            ("sessions", args.sessions),
            ("listed", args.listed),
        )
        if value is not None
    }
    if any(value <= 0 for value in changes.values()):
        parser.error("--log-mb, --sessions and --listed must be positive")
    if changes.get("listed", settings.listed) < 300:
        parser.error("--listed must be at least 300")
    settings = attrs.evolve(settings, **changes)
    expected = (RuntimeError, OSError)
    report = run_guarded("bench.store", lambda: run_benchmark(settings), expected)
    if isinstance(report, Stopped):
        return report.status
    return publish_with_plot(args.out, report, plot=plot_report, render=render_table)


if __name__ == "__main__":
    sys.exit(main())
