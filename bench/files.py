"""File reference benchmark: first query (index build) and per-keystroke latency of
``fileReferences/list`` on a generated 100,000-file tree, against a plain ``os.walk``.

``python -m bench.files [--quick] [--files N] [--runs N] [--rounds N] [--pace-ms MS] [--tmp DIR]
[--out PATH]``

- **tree**: deep and wide, generated afresh under a temp dir: nested packages (the bulk), one
  wide directory, ``node_modules`` and ``.git`` (excluded by default), a ``.cache`` dot
  directory (indexed, hidden unless the query starts with ``.``), and ``build``/``dist`` that
  the root ``.gitignore`` names (pruned only with ``respectIgnoreFiles``).
- **first query**: the time of a fresh agent's first global query (the index build plus the
  ranking), through `FileReferenceService` directly and through the wire (``python -m actors
  serve``, ``fileReferences/list``), interleaved with the baseline: a plain ``os.walk`` of the
  same tree (every directory, nothing pruned), in the same run; medians of ``--runs``. Each
  run is followed by a ``SETTLE_SECONDS`` pause, so the background preparation that follows a
  build does not overlap the next baseline walk.
- **keystrokes**: 10 realistic queries typed character by character after ``@`` (the empty
  query first), each keystroke one call with ``supersede="typing"``, the next sent when the
  answer is in; ``--rounds`` rounds on a warm index. A paced run sends a keystroke every
  ``--pace-ms`` without waiting, so slow answers are superseded; it reports how many were.
  The index keeps recent results, so later rounds are warm: the first round (every keystroke
  answered for the first time) is also summarised on its own.

Targets (issue 5, item 6), printed PASS/MISS: first query with the whole tree indexed
(``unlimitedEntries``) at most 1.5 x ``os.walk``, directly and over the wire; per-keystroke p99
at most 10 ms over the wire, with the whole tree indexed and with upstream's default cap. The
exit status is 0 whenever the run completed, whatever the targets say.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from actors._serve import READY_LINE
from actors.file_references import FileReferencesConfig, FileReferenceService
from bench._common import (
    BenchError,
    Stopped,
    Target,
    format_table,
    latency_summary,
    machine_info,
    progress,
    publish_with_plot,
    run_guarded,
    server_env,
    server_process,
    target_rows,
)
from wire import CallCancelledError, CancelReason, open_client

__all__ = ["QUERIES", "Settings", "TreeStats", "generate_tree", "keystrokes", "main"]

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "files.json"
ENDPOINT = "tcp://127.0.0.1:0"
WORDS = (
    "mailbox", "session", "reference", "index", "config", "handler", "client", "server",
    "router", "button", "dialog", "utils", "parser", "codec", "store", "cache", "actor", "agent",
    "proxy", "schema", "widget", "layout", "theme", "token", "query", "render", "stream",
    "buffer", "worker", "pool", "retry", "deadline", "cancel", "loader", "test",
)  # fmt: skip
DIRECTORIES = (
    "src", "lib", "components", "internal", "api", "services", "models", "views", "handlers",
    "tests", "fixtures", "common", "shared", "runtime", "protocol", "storage", "hooks", "ui",
)  # fmt: skip
PACKAGES = ("core", "wire", "actors", "web", "cli", "store", "ui", "protocol", "sdk", "docs-site")
EXTENSIONS = (".py", ".ts", ".tsx", ".md", ".json", ".rs", ".go", ".css", ".yaml")
#: What users type after ``@``: names, fuzzy subsequences, a dot query, a path.
QUERIES = (
    "mailbox", "readme", "session_ref", "index.ts", "handler.py", "confjson", "test_cancel",
    ".github", "packages/core/src/", "button_dialog",
)  # fmt: skip
EXCLUDED = frozenset(FileReferencesConfig().excluded_directories)
KEYSTROKE_P99_MS = 10.0
#: Pause after each first query: the service prepares a new index's ranking structures in the
#: background right after the build (about a second of CPU or less), and that must not overlap the
#: next run's os.walk baseline nor the first typed keystrokes.
SETTLE_SECONDS = 2.0
SLOWEST = 5  # keystrokes listed per typed series
FIRST_QUERY_RATIO = 1.5
#: Share of the files per part of the tree (the packages take the rest).
SHARES = {"wide": 0.04, "docs": 0.03, "node_modules": 0.12, ".git": 0.06, ".cache": 0.03}
IGNORED_SHARE = 0.10  # build/ and dist/, named by the root .gitignore
WIDE_LIMIT = 4000  # files in the one wide directory
INVENTED_WORDS = 3000
KNOWN_WORD_SHARE = 0.2  # of the words in generated names


@attrs.frozen(kw_only=True)
class Settings:
    #: Files in the generated tree.
    files: int = 100_000
    #: Measured first queries per stack (medians are reported).
    runs: int = 5
    #: Rounds of typing the 10 queries on a warm index.
    rounds: int = 5
    #: Interval between keystrokes of the paced run, ms.
    pace_ms: float = 5.0
    #: Run (and time) the respectIgnoreFiles variant directly through the service.
    ignore_variant: bool = True
    #: Where the tree is generated (the system's temporary directory when ``None``).
    tmp: str | None = None
    quick: bool = False

    @classmethod
    def quick_run(cls) -> Settings:
        return cls(files=3000, runs=1, rounds=1, ignore_variant=False, quick=True)


# --- the tree ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TreeStats:
    files: int
    directories: int
    #: Files under ``.git`` and ``node_modules`` (never indexed by default).
    excluded_files: int
    #: Files under ``build``/``dist`` (pruned only with respectIgnoreFiles).
    ignored_files: int
    #: Files under ``.cache`` and ``.github`` (indexed, hidden from non-dot queries).
    hidden_files: int
    max_depth: int
    widest_directory: int
    seconds: float


class _Writer:
    """Creates empty files and directories, counting them."""

    def __init__(self, root: Path, rng: random.Random) -> None:
        self.root = str(root)
        self.rng = rng
        self.files = self.directories = self.max_depth = self.widest = 0
        # Real trees name things with thousands of identifiers: most names come from invented
        # words, so a query matches a realistic share of the paths, not a third of them.
        invented = {_invented_word(rng) for _ in range(INVENTED_WORDS)}
        self.words = sorted(invented - set(WORDS))

    def word(self) -> str:
        rng = self.rng
        return rng.choice(WORDS) if rng.random() < KNOWN_WORD_SHARE else rng.choice(self.words)

    def directory(self, relative: str) -> str:
        os.makedirs(os.path.join(self.root, relative), exist_ok=True)
        self.directories += 1
        self.max_depth = max(self.max_depth, relative.count("/") + 1)
        return relative

    def touch(self, relative: str, names: Sequence[str]) -> None:
        base = os.path.join(self.root, relative)
        for name in names:
            os.close(os.open(os.path.join(base, name), os.O_CREAT | os.O_WRONLY, 0o644))
        self.files += len(names)
        self.widest = max(self.widest, len(names))

    def file_names(self, count: int) -> list[str]:
        names: set[str] = set()
        rng = self.rng
        while len(names) < count:
            first, second = self.word(), self.word()
            stem = rng.choice((first, f"{first}_{second}", f"{first}-{second}", f"test_{first}"))
            name = stem + rng.choice(EXTENSIONS)
            names.add(name if name not in names else f"{stem}{len(names)}{rng.choice(EXTENSIONS)}")
        return sorted(names)

    def fill(self, relative: str, budget: int, depth: int = 0) -> None:
        """``budget`` files under ``relative``: a few here, the rest split among 2-5 subdirs."""
        self.directory(relative)
        rng = self.rng
        here = budget if depth >= 10 or budget <= 24 else rng.randint(6, 24)
        self.touch(relative, self.file_names(here))
        rest = budget - here
        if rest <= 0:
            return
        count = min(rng.randint(2, 5), rest)
        names: set[str] = set()
        parent = relative.rsplit("/", 1)[-1]
        while len(names) < count:  # conventional names near the top, any word below
            name = rng.choice(DIRECTORIES) if depth < 2 else self.word()
            if name != parent:
                names.add(name)
        cuts = sorted(rng.sample(range(1, rest), count - 1)) if count > 1 else []
        shares = [b - a for a, b in zip([0, *cuts], [*cuts, rest], strict=True)]
        for name, share in zip(sorted(names), shares, strict=True):
            self.fill(f"{relative}/{name}", share, depth + 1)


def _invented_word(rng: random.Random) -> str:
    return "".join(
        rng.choice("bcdfgklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4))
    )


def generate_tree(root: Path, files: int, *, seed: int = 5) -> TreeStats:
    """Write a deterministic tree of exactly ``files`` empty files under ``root``."""
    if files < 200:
        raise ValueError(f"a tree needs at least 200 files, got {files}")
    started = time.perf_counter()
    writer = _Writer(root, random.Random(seed))
    writer.directory("")
    top = [".gitignore", ".env", "README.md", "package.json", "server.log"]
    writer.touch("", top)
    (root / ".gitignore").write_text("build/\ndist/\n*.log\n", encoding="utf-8")
    writer.directory(".github/workflows")
    writer.touch(".github/workflows", ["ci.yaml", "release.yaml"])
    part = {name: int(files * share) for name, share in SHARES.items()}
    part["wide"] = min(part["wide"], WIDE_LIMIT)
    writer.directory("assets/icons")
    writer.touch("assets/icons", [f"icon-{i:05d}.svg" for i in range(part["wide"])])
    writer.fill("docs", part["docs"])
    for name in ("node_modules", ".git", ".cache"):
        writer.fill(name, part[name])
    ignored = int(files * IGNORED_SHARE)
    writer.fill("build", ignored // 2)
    writer.fill("dist", ignored - ignored // 2)
    rest = files - writer.files
    for index, package in enumerate(PACKAGES):
        share = rest // len(PACKAGES) + (1 if index < rest % len(PACKAGES) else 0)
        writer.directory(f"packages/{package}")
        writer.touch(f"packages/{package}", ["README.md", "package.json"])
        writer.fill(f"packages/{package}/src", share - 2)
    assert writer.files == files, (writer.files, files)
    return TreeStats(
        files=writer.files,
        directories=writer.directories,
        excluded_files=part["node_modules"] + part[".git"],
        ignored_files=ignored + 1,  # server.log
        hidden_files=part[".cache"] + 4,  # and .github/workflows/*, .gitignore, .env
        max_depth=writer.max_depth,
        widest_directory=writer.widest,
        seconds=round(time.perf_counter() - started, 3),
    )


def keystrokes(query: str) -> list[str]:
    """What the provider sees while ``query`` is typed after ``@``: ``""``, then each prefix."""
    return [query[:n] for n in range(len(query) + 1)]


def walk_seconds(root: Path, prune: frozenset[str] = frozenset()) -> float:
    """The baseline: a plain ``os.walk`` of the whole tree; ``prune`` skips directories by name
    (the same work as the index, for context)."""
    started = time.perf_counter()
    for _, directories, _ in os.walk(root):
        if prune:
            directories[:] = [name for name in directories if name not in prune]
    return time.perf_counter() - started


def _walk(root: Path, walks: dict[str, list[float]] | None) -> None:
    if walks is not None:
        walks["osWalk"].append(walk_seconds(root))
        walks["osWalkPruned"].append(walk_seconds(root, EXCLUDED))


def _camel(fields: dict[str, Any]) -> dict[str, Any]:
    """Report keys are camelCase like the wire's."""
    return {re.sub(r"_(\w)", lambda m: m[1].upper(), key): value for key, value in fields.items()}


def _median(samples: Sequence[float]) -> dict[str, Any]:
    return {
        "samplesSeconds": [round(s, 5) for s in samples],
        "medianSeconds": round(statistics.median(samples), 5),
    }


# --- through the service -------------------------------------------------------------------

CONFIGS = {
    "fullTree": FileReferencesConfig(unlimited_entries=True),
    "defaultCap": FileReferencesConfig(),
    "fullTreeIgnoreFiles": FileReferencesConfig(unlimited_entries=True, respect_ignore_files=True),
}


async def _type_all(call: Any, rounds: int) -> dict[str, Any]:
    """Type every query ``rounds`` times, one awaited call per keystroke; the latency summary
    and the slowest keystrokes (which query text)."""
    samples: list[tuple[int, str]] = []
    first_round = 0
    for round_number in range(rounds):
        for query in QUERIES:
            for text in keystrokes(query):
                started = time.perf_counter_ns()
                await call(text)
                samples.append((time.perf_counter_ns() - started, text))
        if round_number == 0:
            first_round = len(samples)
    slowest = sorted(samples, reverse=True)[:SLOWEST]
    return latency_summary([ns for ns, _ in samples]) | {
        "slowest": [{"query": text, "ms": round(ns / 1e6, 3)} for ns, text in slowest],
        # The index keeps recent results and match sets, so later rounds repeat warm answers;
        # the first round is every keystroke's first time (cold caches).
        "firstRound": latency_summary([ns for ns, _ in samples[:first_round]], cdf=False),
    }


async def measure_service(
    root: Path, settings: Settings, walks: dict[str, list[float]]
) -> dict[str, Any]:
    """First queries (fresh agent keys, interleaved with os.walk) and typing, per config."""
    names = [n for n in CONFIGS if settings.ignore_variant or n != "fullTreeIgnoreFiles"]
    services = {name: FileReferenceService(CONFIGS[name]) for name in names}
    first: dict[str, list[float]] = {name: [] for name in names}
    entries: dict[str, Any] = {}
    result: dict[str, Any] = {"firstQuery": {}, "keystrokes": {}}
    async with trio.open_nursery() as nursery:
        for service in services.values():
            await nursery.start(service.run)
        for run in range(settings.runs + 1):  # run 0 warms caches and is not counted
            _walk(root, walks if run else None)
            for name, service in services.items():
                key = f"run-{run}"
                await service.list(key, root, "")  # the "@" keystroke: directory mode
                started = time.perf_counter()
                await service.list(key, root, QUERIES[0][0])
                elapsed = time.perf_counter() - started
                if run:
                    first[name].append(elapsed)
                stats = service.index_statistics(key)
                entries[name] = _camel(attrs.asdict(stats)) if stats is not None else None
                if run < settings.runs:
                    service.dispose(key)
            await trio.sleep(SETTLE_SECONDS)
            progress(f"service: first-query run {run} done")
        for name in ("fullTree", "defaultCap"):
            call = functools.partial(services[name].list, f"run-{settings.runs}", root)
            result["keystrokes"][name] = await _type_all(call, settings.rounds)
            progress(f"service: typing with {name} done")
        nursery.cancel_scope.cancel()
    for name in names:
        result["firstQuery"][name] = _median(first[name]) | {"index": entries[name]}
    return result


# --- through the wire ----------------------------------------------------------------------


async def _paced(client: Any, agent: str, settings: Settings) -> dict[str, Any]:
    """Keystrokes every ``pace_ms`` without waiting: a slow answer is superseded by the next."""
    answered: list[int] = []
    settle: list[int] = []
    superseded = 0

    async def keystroke(text: str, last: bool) -> None:
        nonlocal superseded
        started = time.perf_counter_ns()
        try:
            await client.call(
                "fileReferences/list", {"agentId": agent, "query": text}, supersede="typing"
            )
        except CallCancelledError as error:
            if error.reason is not CancelReason.SUPERSEDED:
                raise
            superseded += 1
            return
        answered.append(time.perf_counter_ns() - started)
        if last:
            settle.append(answered[-1])

    for _ in range(settings.rounds):
        for query in QUERIES:
            texts = keystrokes(query)
            async with trio.open_nursery() as nursery:
                for n, text in enumerate(texts):
                    nursery.start_soon(keystroke, text, n == len(texts) - 1)
                    await trio.sleep(settings.pace_ms / 1000)
    return {
        "paceMs": settings.pace_ms,
        "keystrokes": len(answered) + superseded,
        "superseded": superseded,
        "answered": latency_summary(answered, cdf=False),
        "lastKeystroke": latency_summary(settle, cdf=False),
    }


async def measure_wire(
    address: str,
    root: Path,
    settings: Settings,
    *,
    walks: dict[str, list[float]] | None,
    paced: bool,
) -> dict[str, Any]:
    """First queries of fresh agents (interleaved with os.walk), then typing on a warm one."""
    first: list[float] = []
    async with open_client(address, name="bench.files") as client:
        with trio.fail_after(600):
            for run in range(settings.runs + 1):
                # In a thread: a walk of seconds on a busy machine must not stop this client's
                # heartbeats (the server drops a peer it has not heard from for 2.5 s).
                await trio.to_thread.run_sync(_walk, root, walks if run else None)
                created = await client.call("agents/create", {"cwd": str(root), "title": "bench"})
                agent = created["agentId"]
                await client.call("fileReferences/list", {"agentId": agent, "query": ""})
                started = time.perf_counter()
                found = await client.call(
                    "fileReferences/list", {"agentId": agent, "query": QUERIES[0][0]}
                )
                elapsed = time.perf_counter() - started
                if not found:
                    raise BenchError(f"no candidates for {QUERIES[0][0]!r} in {root}")
                if run:
                    first.append(elapsed)
                await trio.sleep(SETTLE_SECONDS)

            async def call(text: str) -> None:
                await client.call(
                    "fileReferences/list", {"agentId": agent, "query": text}, supersede="typing"
                )

            typed = await _type_all(call, settings.rounds)
            result = {"firstQuery": _median(first), "keystrokes": typed}
            if paced:
                result["paced"] = await _paced(client, agent, settings)
    return result


def run_wire(
    root: Path, work: Path, settings: Settings, walks: dict[str, list[float]]
) -> dict[str, Any]:
    env = server_env(ROOT)
    results: dict[str, Any] = {}
    for name, table in (("fullTree", "unlimitedEntries = true\n"), ("defaultCap", "")):
        config = work / f"{name}.toml"
        config.write_text(f"[fileReferences]\n{table}", encoding="utf-8")
        data = work / f"data-{name}"
        argv = [sys.executable, "-m", "actors", "serve", "--endpoint", ENDPOINT]
        argv += ["--data", str(data), "--config", str(config)]
        progress(f"wire: starting `python -m actors serve` ({name})")
        with server_process(argv, ready_prefix=READY_LINE, cwd=ROOT, env=env) as addresses:
            measure = functools.partial(
                measure_wire, paced=name == "fullTree", walks=walks if name == "fullTree" else None
            )
            results[name] = trio.run(measure, addresses[0], root, settings)
    return results


# --- the report ----------------------------------------------------------------------------


def run_benchmark(settings: Settings) -> dict[str, Any]:
    started = time.monotonic()
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="bench-files-", dir=settings.tmp) as tmp:
        work = Path(tmp)
        root = work / "tree"
        progress(f"generating a tree of {settings.files:,} files")
        tree = generate_tree(root, settings.files)
        walks: dict[str, list[float]] = {"osWalk": [], "osWalkPruned": []}
        service = trio.run(measure_service, root, settings, walks)
        wire = run_wire(root, work, settings, walks)
    return build_report(settings, machine, tree, walks, service, wire, stamp, started)


def build_report(
    settings: Settings,
    machine: dict[str, Any],
    tree: TreeStats,
    walks: dict[str, list[float]],
    service: dict[str, Any],
    wire: dict[str, Any],
    stamp: str,
    started: float,
) -> dict[str, Any]:
    baseline = {name: _median(samples) for name, samples in walks.items()}
    walk = baseline["osWalk"]["medianSeconds"]
    first_service = service["firstQuery"]["fullTree"]["medianSeconds"]
    first_wire = wire["fullTree"]["firstQuery"]["medianSeconds"]
    targets = [
        Target(
            name="first query, full tree, service <= 1.5 x os.walk",
            value=round(first_service / walk, 4),
            limit=FIRST_QUERY_RATIO,
            comparison="<=",
            unit="x",
        ),
        Target(
            name="first query, full tree, wire <= 1.5 x os.walk",
            value=round(first_wire / walk, 4),
            limit=FIRST_QUERY_RATIO,
            comparison="<=",
            unit="x",
        ),
    ]
    for name, label in (("fullTree", "full tree"), ("defaultCap", "default cap")):
        p99 = wire[name]["keystrokes"]["p99Us"]
        targets.append(
            Target(
                name=f"keystroke p99, {label}, wire <= 10 ms",
                value=None if p99 is None else round(p99 / 1000, 4),
                limit=KEYSTROKE_P99_MS,
                comparison="<=",
                unit=" ms",
            )
        )
    return {
        "benchmark": "files",
        "startedAt": stamp,
        "elapsedSeconds": round(time.monotonic() - started, 2),
        "config": _camel(attrs.asdict(settings)) | {"queries": list(QUERIES)},
        "machine": machine | {"loadAverageAtEnd": list(os.getloadavg())},
        "tree": _camel(attrs.asdict(tree)),
        "baseline": baseline,
        "service": service,
        "wire": wire,
        "targets": [t.as_json() for t in targets],
        "allPassed": all(t.passed for t in targets),
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def render_table(report: dict[str, Any]) -> str:
    walk = report["baseline"]["osWalk"]["medianSeconds"]
    first = [["first query (median)", "ms", "x os.walk", "entries", "truncated"]]
    first.append(["os.walk (baseline, nothing pruned)", _ms(walk), "1.00x", "", ""])
    pruned = report["baseline"]["osWalkPruned"]["medianSeconds"]
    first.append(
        ["os.walk pruning .git, node_modules", _ms(pruned), f"{pruned / walk:.2f}x", "", ""]
    )
    firsts = [(f"service, {n}", e) for n, e in report["service"]["firstQuery"].items()]
    firsts += [(f"wire, {n}", r["firstQuery"]) for n, r in report["wire"].items()]
    for label, entry in firsts:
        index = entry.get("index") or {}
        first.append(
            [
                label,
                _ms(entry["medianSeconds"]),
                f"{entry['medianSeconds'] / walk:.2f}x",
                f"{index['entries']:,}" if index else "",
                str(index["truncated"]).lower() if index else "",
            ]
        )
    typing = [["per keystroke", "calls", "p50 ms", "p99 ms", "max ms", "1st round p99 ms"]]
    summaries = [(f"service, {n}", s) for n, s in report["service"]["keystrokes"].items()]
    summaries += [(f"wire, {n}", r["keystrokes"]) for n, r in report["wire"].items()]
    for label, summary in summaries:
        typing.append(
            [label, str(summary["count"])]
            + [f"{summary[key] / 1000:.2f}" for key in ("p50Us", "p99Us", "maxUs")]
            + [f"{summary['firstRound']['p99Us'] / 1000:.2f}"]
        )
    parts = [_header(report), format_table(first), format_table(typing)]
    paced = report["wire"]["fullTree"].get("paced")
    if paced:
        parts.append(
            f"paced typing over the wire (full tree), a keystroke every {paced['paceMs']:g} ms: "
            f"{paced['superseded']} of {paced['keystrokes']} superseded; answered p99 "
            f"{paced['answered']['p99Us'] / 1000:.2f} ms; last keystroke of a query p99 "
            f"{paced['lastKeystroke']['p99Us'] / 1000:.2f} ms"
        )
    rows = target_rows(report["targets"])
    rows[0].append("margin")
    for row, target in zip(rows[1:], report["targets"], strict=True):
        value, limit = target["value"], target["limit"]
        # Positive: how far under the limit (every target here is "<=").
        row.append("n/a" if value is None else f"{(limit - value) / limit:+.0%}")
    parts.append(format_table(rows))
    return "\n\n".join(parts)


def _header(report: dict[str, Any]) -> str:
    tree, machine = report["tree"], report["machine"]
    return (
        f"file references benchmark; {machine['cpuCount']} CPUs ({machine['cpuModel']}), "
        f"Python {machine['python']}\ntree: {tree['files']:,} files in {tree['directories']:,} "
        f"directories (depth {tree['maxDepth']}, widest {tree['widestDirectory']:,}); "
        f"{tree['excludedFiles']:,} in .git/node_modules, {tree['ignoredFiles']:,} gitignored, "
        f"{tree['hiddenFiles']:,} hidden; generated in {tree['seconds']:.1f} s"
    )


def plot_report(path: Path, report: dict[str, Any]) -> None:
    """Two panels: first-query medians against os.walk, and per-keystroke latency CDFs."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, NullFormatter

    figure = Figure(figsize=(13, 5), layout="constrained")
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2)
    walk = report["baseline"]["osWalk"]["medianSeconds"]
    pruned = report["baseline"]["osWalkPruned"]["medianSeconds"]
    bars = [("os.walk", walk), ("os.walk\npruned", pruned)]
    short = {"fullTree": "full", "defaultCap": "cap 10k", "fullTreeIgnoreFiles": "full+ignore"}
    firsts = [(f"service\n{short[n]}", e) for n, e in report["service"]["firstQuery"].items()]
    firsts += [(f"wire\n{short[n]}", r["firstQuery"]) for n, r in report["wire"].items()]
    bars += [(label, entry["medianSeconds"]) for label, entry in firsts]
    colors = ["tab:grey", "tab:grey"] + ["tab:blue"] * (len(bars) - 2)
    left.bar([b[0] for b in bars], [b[1] * 1000 for b in bars], color=colors)
    left.axhline(
        walk * FIRST_QUERY_RATIO * 1000, linestyle="--", color="grey", label="1.5 x os.walk"
    )
    left.set_ylabel("ms (median)")
    left.set_title(f"first query (index build), {report['tree']['files']:,} files")
    left.tick_params(axis="x", labelsize=8)
    left.legend()
    series = [(f"service, {n}", s) for n, s in report["service"]["keystrokes"].items()]
    series += [(f"wire, {n}", r["keystrokes"]) for n, r in report["wire"].items()]
    for label, summary in series:
        pairs = [(us, p / 100) for p, us in summary["cdf"] if us is not None]
        right.step([us for us, _ in pairs], [f for _, f in pairs], where="post", label=label)
    right.axvline(KEYSTROKE_P99_MS * 1000, linestyle="--", color="grey", label="10 ms target")
    right.set_xscale("log")
    right.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    right.xaxis.set_minor_formatter(NullFormatter())
    right.set_ylim(0, 1.0)
    right.set_xlabel("latency (µs)")
    right.set_ylabel("fraction of keystrokes")
    right.set_title(f"per keystroke, {len(QUERIES)} queries typed")
    right.grid(True, which="both", alpha=0.3)
    right.legend(loc="lower right")
    figure.suptitle("fileReferences/list")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.files", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="a small tree: a smoke run of seconds")
    parser.add_argument("--files", type=int, help="files in the generated tree (default 100000)")
    parser.add_argument("--runs", type=int, help="measured first queries per stack (default 5)")
    parser.add_argument("--rounds", type=int, help="rounds of typing the queries (default 5)")
    parser.add_argument(
        "--pace-ms", type=float, help="keystroke interval of the paced run (default 5)"
    )
    parser.add_argument("--tmp", help="where to generate the tree (default: the system temp dir)")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="JSON report; the PNG goes beside it"
    )
    args = parser.parse_args(argv)
    settings = Settings.quick_run() if args.quick else Settings()
    changes = {
        key: value
        for key, value in (
            ("files", args.files),
            ("runs", args.runs),
            ("rounds", args.rounds),
            ("pace_ms", args.pace_ms),
        )
        if value is not None
    }
    if any(value <= 0 for value in changes.values()):
        parser.error("--files, --runs, --rounds and --pace-ms must be positive")
    if changes.get("files", settings.files) < 200:
        parser.error("--files must be at least 200")
    settings = attrs.evolve(settings, tmp=args.tmp, **changes)
    expected = (RuntimeError, OSError)
    report = run_guarded("bench.files", lambda: run_benchmark(settings), expected)
    if isinstance(report, Stopped):
        return report.status
    return publish_with_plot(args.out, report, plot=plot_report, render=render_table)


if __name__ == "__main__":
    sys.exit(main())
