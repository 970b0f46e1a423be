"""What every benchmark shares: percentiles, targets, reports, plots and server processes.

Latencies are recorded in nanoseconds into an HdrHistogram (3 significant figures, so a
percentile is within 0.1 % of the true sample) and reported in microseconds. Reports are JSON
with camelCase keys like the wire; plots are PNGs drawn with matplotlib's Agg backend (no
display needed). The command-line tail every benchmark shares: :func:`bench_parser` (``--quick``,
``--out``), :func:`option_changes` (given options as settings changes), :func:`run_guarded`
(SIGTERM as Ctrl-C, expected failures explained) and :func:`publish` (JSON, table, paths).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import msgpack
import psutil
import trio
import zmq
from hdrh.histogram import HdrHistogram

__all__ = [
    "CDF_PERCENTILES",
    "HIGHEST_NS",
    "BenchError",
    "Stopped",
    "Target",
    "Throughput",
    "bench_parser",
    "explain_failure",
    "format_count",
    "format_ratio",
    "format_table",
    "histogram_summary",
    "in_flight_levels",
    "latency_summary",
    "machine_busy_seconds",
    "machine_info",
    "new_histogram",
    "option_changes",
    "plot_png",
    "progress",
    "publish",
    "publish_with_plot",
    "ratio",
    "record_steal",
    "run_guarded",
    "server_process",
    "sigterm_as_interrupt",
    "steal_seconds",
    "steal_warning",
    "target_rows",
    "write_json",
]

_T = TypeVar("_T")

#: Percentiles at which a latency CDF is sampled for the report and the plot.
CDF_PERCENTILES = (*(float(p) for p in range(100)), 99.5, 99.9, 99.99, 100.0)
#: Longest latency a histogram tracks: 60 s in nanoseconds (longer samples are clamped).
HIGHEST_NS = 60_000_000_000


class BenchError(RuntimeError):
    """A benchmark could not run: a server did not start, a reply was late or wrong."""


def progress(text: str) -> None:
    """One line of progress on stderr (stdout is for the result table)."""
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def new_histogram() -> HdrHistogram:
    """An empty histogram of nanoseconds, 1 ns to :data:`HIGHEST_NS`, 3 significant figures."""
    return HdrHistogram(1, HIGHEST_NS, 3)


def latency_summary(samples_ns: Sequence[int], *, cdf: bool = True) -> dict[str, Any]:
    """Percentiles (microseconds) of ``samples_ns`` through an HdrHistogram.

    Returns:
        ``count``, ``minUs``, ``meanUs``, ``p50Us``, ``p90Us``, ``p99Us``, ``p999Us``,
        ``maxUs`` and, if ``cdf``, ``cdf``: ``[percentile, microseconds]`` pairs at
        :data:`CDF_PERCENTILES`. Every value is ``None`` when there are no samples.

    Raises:
        ValueError: a sample is negative.
    """
    histogram = new_histogram()
    for sample in samples_ns:
        if sample < 0:
            raise ValueError(f"negative latency sample: {sample} ns")
        histogram.record_value(min(max(sample, 1), HIGHEST_NS))
    return histogram_summary(histogram, cdf=cdf)


def histogram_summary(histogram: HdrHistogram, *, cdf: bool = True) -> dict[str, Any]:
    """The summary :func:`latency_summary` returns, of a histogram of nanoseconds."""
    count = histogram.get_total_count()
    # One pass over the buckets for every percentile (one pass per percentile is ~100 x slower;
    # the values are the same as ``get_value_at_percentile``'s).
    wanted = [50.0, 90.0, 99.0, 99.9, *(CDF_PERCENTILES if cdf else ())]
    values = histogram.get_percentile_to_value_dict(wanted) if count else {}

    def at(percentile: float) -> float | None:
        return _us(values[percentile]) if count else None

    summary: dict[str, Any] = {
        "count": count,
        "minUs": _us(histogram.get_min_value()) if count else None,
        "meanUs": _us(histogram.get_mean_value()) if count else None,
        "p50Us": at(50.0),
        "p90Us": at(90.0),
        "p99Us": at(99.0),
        "p999Us": at(99.9),
        "maxUs": _us(histogram.get_max_value()) if count else None,
    }
    if cdf:
        summary["cdf"] = [[p, at(p)] for p in CDF_PERCENTILES] if count else []
    return summary


def _us(nanoseconds: float) -> float:
    return round(nanoseconds / 1000, 3)


@attrs.frozen(kw_only=True)
class Target:
    """A goal a measured value must meet, e.g. ``throughput ratio >= 0.4``."""

    name: str
    #: The measured value (``None`` when it could not be measured: a miss).
    value: float | None
    limit: float
    #: ``">="`` or ``"<="``.
    comparison: str = attrs.field(validator=attrs.validators.in_((">=", "<=")))
    #: Printed after value and limit: ``"x"`` for ratios, ``" ms"``, ...
    unit: str

    @property
    def passed(self) -> bool:
        if self.value is None:
            return False
        return self.value >= self.limit if self.comparison == ">=" else self.value <= self.limit

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "limit": self.limit,
            "comparison": self.comparison,
            "unit": self.unit,
            "passed": self.passed,
        }


@attrs.frozen(kw_only=True)
class Throughput:
    """Calls completed while ``in_flight`` calls were kept outstanding on one connection."""

    in_flight: int
    calls: int
    #: From the first send to the last reply.
    seconds: float
    #: Each call's latency under that load.
    latencies_ns: list[int] = attrs.field(repr=False)

    @property
    def calls_per_second(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "inFlight": self.in_flight,
            "calls": self.calls,
            "seconds": round(self.seconds, 6),
            "callsPerSecond": round(self.calls_per_second, 1),
            "latency": latency_summary(self.latencies_ns, cdf=False),
        }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator`` rounded to 4 places; ``None`` if either is missing or 0."""
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 4)


def format_count(value: float | None) -> str:
    """``12,345`` for large values, ``12.3`` for small ones, ``n/a`` for none."""
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def format_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def target_rows(targets: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Table rows for targets in their JSON form: name, measured, limit, PASS or MISS."""
    rows = [["target", "measured", "limit", ""]]
    for target in targets:
        unit = target["unit"]
        measured = "n/a" if target["value"] is None else f"{target['value']:.3g}{unit}"
        limit = f"{target['comparison']} {target['limit']:g}{unit}"
        rows.append([target["name"], measured, limit, "PASS" if target["passed"] else "MISS"])
    return rows


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Rows as aligned text: the first column left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def machine_info() -> dict[str, Any]:
    """What the numbers depend on: CPUs, load, Python and the ZeroMQ/msgpack/trio versions."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpuCount": os.cpu_count(),
        "cpusUsable": usable,
        "cpuModel": _cpu_model(),
        "loadAverage": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "pythonImplementation": platform.python_implementation(),
        "pyzmq": zmq.pyzmq_version(),
        "libzmq": zmq.zmq_version(),
        "msgpack": ".".join(str(part) for part in msgpack.version),
        "trio": trio.__version__,
    }


def machine_busy_seconds() -> float:
    """CPU seconds all CPUs of the machine have spent running processes since boot.

    Interrupt and softirq time are left out: loopback networking is processed there on behalf
    of our own processes without being counted in their CPU times. Linux counts guest time
    inside user time; steal time is the hypervisor's.
    """
    times = psutil.cpu_times()
    return float(times.user + times.system + getattr(times, "nice", 0.0))


def steal_seconds() -> float | None:
    """CPU seconds so far that the hypervisor gave to other guests while this VM's CPUs wanted
    to run (``steal`` in ``/proc/stat``, all CPUs); None where there is no such counter."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


def record_steal(machine: dict[str, Any], before: float | None, elapsed: float) -> None:
    """Add the run's steal (seconds, and its share of the CPU time the run spanned) to
    ``machine``: a busy host slows every process of a VM alike, which no per-process counter
    shows."""
    after = steal_seconds()
    if before is None or after is None or elapsed <= 0:
        return
    machine["hostStealSeconds"] = round(after - before, 3)
    machine["hostStealShare"] = round((after - before) / (elapsed * (os.cpu_count() or 1)), 4)


def steal_warning(machine: Mapping[str, Any], limit: float = 0.02) -> str | None:
    """A warning line when the host took more than ``limit`` of the VM's CPU time."""
    share = machine.get("hostStealShare")
    if share is None or share <= limit:
        return None
    return (
        f"warning: the host gave {share:.1%} of this VM's CPU time to other guests during the "
        "run (steal); every figure is skewed, ratios less than absolute numbers"
    )


def _cpu_model() -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "Hardware"):
            return value.strip()
    return platform.processor() or None


def write_json(path: Path, report: Mapping[str, Any]) -> None:
    """Write ``report`` to ``path`` (parents created; replaced atomically)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    partial.replace(path)


def plot_png(
    path: Path,
    *,
    title: str,
    cdfs: Mapping[str, Sequence[Sequence[float | None]]],
    throughput: Mapping[str, Mapping[int, float]] | None = None,
    in_flight_label: str = "calls in flight (one connection)",
    cdf_title: str = "latency CDF",
    limits: Mapping[str, float] | None = None,
    left_axis: tuple[str, str] = ("throughput", "calls/s"),
    left_limits: Mapping[str, float] | None = None,
) -> None:
    """Latency CDFs (log microseconds), beside calls/s against calls in flight if given.

    Args:
        path: Where the PNG goes (parents created).
        title: Figure title.
        cdfs: Per series, ``[percentile, microseconds]`` pairs (see :func:`latency_summary`).
        throughput: Per stack, calls per second by calls in flight (a left panel if given).
        in_flight_label: The throughput panel's x-axis label.
        cdf_title: The CDF panel's title.
        limits: Vertical marker lines on the CDF panel, label to microseconds.
        left_axis: The left panel's title and y-axis label, for a measure other than calls/s.
        left_limits: Horizontal marker lines on the left panel, label to y value.
    """
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
        for label, y in (left_limits or {}).items():
            left.axhline(y, linestyle="--", color="grey", linewidth=1, label=label)
        left.set_ylim(bottom=0)
        left.set_xlabel(in_flight_label)
        left.set_title(left_axis[0])
        left.set_ylabel(left_axis[1])
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
    right.xaxis.set_major_formatter(FuncFormatter(lambda value, _: _microsecond_tick(value)))
    right.set_ylim(0, 1.0)
    right.set_xlabel("latency (µs)")
    right.set_ylabel("fraction of samples")
    right.set_title(cdf_title)
    right.grid(True, which="both", alpha=0.3)
    right.legend(loc="lower right", fontsize="small")
    figure.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)


def _microsecond_tick(microseconds: float) -> str:
    return f"{microseconds / 1000:g}k" if microseconds >= 1000 else f"{microseconds:g}"


def server_env(root: Path) -> dict[str, str]:
    """This process's environment for a server started from ``root``: its packages first on
    ``PYTHONPATH`` (a checkout runs what it holds, installed or not), output unbuffered."""
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


@contextlib.contextmanager
def server_process(
    argv: Sequence[str],
    *,
    ready_prefix: str,
    ready_within: float = 30.0,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[list[str]]:
    """Run a server process that prints ``ready_prefix ADDRESS...`` as its first stdout line.

    Yields the addresses from that line. Output goes to temporary files, never pipes, so a
    chatty server cannot block on a full pipe. Resource handling: the process is stopped (SIGTERM,
    then SIGKILL after 10 s) when the block exits, however it exits.

    Raises:
        BenchError: the process exited or printed no ready line within ``ready_within`` s.
    """
    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp:
        out_path, err_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=cwd,
                env=dict(env) if env is not None else None,
            )
            try:
                yield _wait_ready(process, out_path, err_path, ready_prefix, ready_within)
            finally:
                _stop(process)


def _wait_ready(
    process: subprocess.Popen[bytes],
    out_path: Path,
    err_path: Path,
    ready_prefix: str,
    ready_within: float,
) -> list[str]:
    deadline = time.monotonic() + ready_within
    name = " ".join(str(a) for a in process.args) if isinstance(process.args, list) else "server"
    while True:
        text = out_path.read_text(encoding="utf-8", errors="replace")
        if "\n" in text:
            line = text.split("\n", 1)[0]
            if not line.startswith(ready_prefix):
                raise BenchError(f"{name}: unexpected first line {line!r}")
            return line.removeprefix(ready_prefix).split()
        status = process.poll()
        if status is not None or time.monotonic() > deadline:
            tail = err_path.read_text(encoding="utf-8", errors="replace")[-2000:]
            what = (
                f"exited with status {status}"
                if status is not None
                else f"printed no ready line within {ready_within:g} s"
            )
            raise BenchError(f"{name} {what}; stderr:\n{tail}")
        time.sleep(0.01)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Inside the block SIGTERM stops the run the way Ctrl-C does, so ``finally`` blocks (which
    stop the server processes) run.

    SIGTERM is re-raised as SIGINT where a SIGINT handler is installed: inside ``trio.run`` that
    is trio's, which delivers ``KeyboardInterrupt`` at a safe point. Where SIGINT is ignored (a
    background job of a non-interactive shell) ``KeyboardInterrupt`` is raised directly.
    """

    def interrupt(signum: int, frame: object) -> None:
        if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
            raise KeyboardInterrupt
        signal.raise_signal(signal.SIGINT)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def explain_failure(
    prog: str, exc: BaseException, expected: tuple[type[BaseException], ...]
) -> int | None:
    """Print why a run stopped and return its exit status: 130 when interrupted, 1 when every
    failure is ``expected``; ``None`` otherwise (a bug: let it raise with its traceback).

    Exception groups (trio wraps what a nursery body raises) are looked into.
    """
    leaves = list(_leaves(exc))
    if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
        print(f"{prog}: interrupted; servers stopped", file=sys.stderr)
        return 130
    if not all(isinstance(leaf, expected) for leaf in leaves):
        return None
    for leaf in leaves:
        print(f"{prog}: {type(leaf).__name__}: {leaf}", file=sys.stderr)
    return 1


@attrs.frozen
class Stopped:
    """A run that did not complete: the exit status :func:`explain_failure` chose."""

    status: int


def run_guarded(
    prog: str, run: Callable[[], _T], expected: tuple[type[BaseException], ...]
) -> _T | Stopped:
    """Call ``run()`` with SIGTERM acting as Ctrl-C (:func:`sigterm_as_interrupt`).

    Returns its result, or :class:`Stopped` once an interrupt or an ``expected`` failure has
    been explained on stderr (see :func:`explain_failure`).

    Raises:
        BaseException: whatever ``run`` raised that is not expected (a bug: with its traceback).
    """
    try:
        with sigterm_as_interrupt():
            return run()
    except BaseException as exc:
        status = explain_failure(prog, exc, expected)
        if status is None:
            raise
        return Stopped(status)


def bench_parser(
    prog: str,
    doc: str | None,
    *,
    out: Path,
    quick_help: str = "a smoke run of seconds",
    out_help: str = "JSON report; the PNG goes beside it",
) -> argparse.ArgumentParser:
    """The parser every benchmark starts from: ``--quick`` and ``--out`` (default ``out``);
    the description is the first line of ``doc`` (the module docstring)."""
    parser = argparse.ArgumentParser(prog=prog, description=(doc or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--out", type=Path, default=out, help=out_help)
    return parser


def in_flight_levels(text: str) -> tuple[int, ...]:
    """An ``--in-flight`` option's levels (``1,8,128``): positive, sorted, each once."""
    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,8,128, got {text!r}") from None
    if not levels or any(n < 1 for n in levels):
        raise argparse.ArgumentTypeError("every level must be positive")
    return tuple(sorted(set(levels)))


def option_changes(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    names: Sequence[str],
    *,
    positive: Sequence[str] = (),
) -> dict[str, Any]:
    """The options among ``names`` given on the command line (not ``None``), keyed by name, for
    ``attrs.evolve(settings, **changes)``; ``parser.error`` (exit status 2) when one of
    ``positive`` is not above zero."""
    changes = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    bad = [name for name in positive if name in changes and not changes[name] > 0]
    if bad:
        parser.error(", ".join(f"--{n.replace('_', '-')}" for n in bad) + " must be positive")
    return changes


def publish(out: Path, report: Mapping[str, Any], *, table: str, plots: Sequence[Path] = ()) -> int:
    """Write ``report`` to ``out``, print ``table`` and where the report and plots are;
    return 0 (the exit status of a completed run)."""
    write_json(out, report)
    print(table)
    print(f"\nreport: {out}")
    for path in plots:
        print(f"plot:   {path}")
    return 0


def publish_with_plot(
    out: Path,
    report: dict[str, Any],
    *,
    plot: Callable[[Path, dict[str, Any]], None],
    render: Callable[[dict[str, Any]], str],
) -> int:
    """Draw ``report``'s PNG beside ``out`` (its path under ``report["png"]``), then
    :func:`publish` the report with the table ``render`` makes of it."""
    png = out.with_suffix(".png")
    report["png"] = str(png)
    plot(png, report)
    return publish(out, report, table=render(report), plots=[png])


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
