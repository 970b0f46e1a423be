"""The parent side of the load generator: start the processes, say go, watch the server.

A phase is a list of :class:`~bench._load_jobs.Job` values, one per load-generator process
(``python -m bench._load_worker``, or the TypeScript client's driver for its stack: see
:mod:`bench._load_typescript`). :func:`run_phase` starts them all, waits until every one has
connected and warmed up, gives them one common start time, samples the server's CPU time at the
start and the end of the window and its peak RSS over it, then collects and merges what the
processes measured. Every wait is bounded, and every process is killed in a ``finally`` if it
has not exited by then.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from bench import _load_typescript as typescript
from bench._common import BenchError, machine_busy_seconds
from bench._load_jobs import READY, RESULT_PREFIX, Job
from bench._load_stats import decode_sum, summarize

__all__ = ["ServerMonitor", "find_child", "run_phase", "split_concurrency", "time_limit"]

ROOT = Path(__file__).resolve().parents[1]
#: Seconds a load-generator process may take to import, connect and warm up.
READY_WITHIN = 60.0
#: Seconds a process may take after the window to drain and report.
REPORT_WITHIN = 45.0
#: Between "go" and the start of the window, so every process is waiting when it opens.
_LEAD_NS = 100_000_000


class ServerMonitor:
    """CPU time and peak resident memory of one server process (Linux ``/proc``, or psutil)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._process = psutil.Process(pid)

    def cpu_seconds(self) -> float:
        """User plus system CPU seconds the server (all its threads) has used so far."""
        times = self._process.cpu_times()
        return float(times.user + times.system)

    def reset_peak(self) -> bool:
        """Reset the kernel's peak-RSS mark (``VmHWM``) so the next reading covers one phase.

        Returns whether it could (Linux, same user); otherwise peaks cover the server's life.
        """
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        except OSError:
            return False
        return True

    def peak_rss_bytes(self) -> int:
        """The peak resident set size (``VmHWM``); the current RSS where that is unknown."""
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        return int(self._process.memory_info().rss)


def find_child(argv: Sequence[str]) -> int:
    """The pid of our child process started with exactly ``argv``.

    Raises:
        BenchError: there is no such child.
    """
    for child in psutil.Process().children():
        try:
            if child.cmdline() == list(argv):
                return int(child.pid)
        except psutil.Error:
            continue
    raise BenchError(f"no child process runs {' '.join(argv)}")


def split_concurrency(in_flight: int, processes: int) -> list[int]:
    """Calls in flight per process: ``in_flight`` over at most ``processes`` processes, as even
    as possible (``split_concurrency(10, 4) == [3, 3, 2, 2]``)."""
    if in_flight < 1 or processes < 1:
        raise ValueError("in_flight and processes must be positive")
    used = min(in_flight, processes)
    share, extra = divmod(in_flight, used)
    return [share + (1 if i < extra else 0) for i in range(used)]


def _worker_argv(job: Job) -> list[str]:
    """A load process for ``job``: the TypeScript client's driver for its stack, else Python."""
    if job.stack == typescript.STACK:
        return typescript.worker_argv(job)
    return [sys.executable, "-m", "bench._load_worker", job.to_json()]


def _result_of(job: Job, result: dict[str, Any]) -> dict[str, Any]:
    """A process's result in the one form :func:`merge` reads (the TypeScript driver sends
    raw samples, not histograms)."""
    if job.stack != typescript.STACK:
        return result
    try:
        return typescript.samples_json(result)
    except (KeyError, TypeError, ValueError) as exc:
        raise BenchError(f"a TypeScript load process sent a malformed result: {exc}") from None


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


#: ``time.monotonic()`` after which no phase starts (see :func:`time_limit`).
_deadline: float | None = None


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Inside the block, :func:`run_phase` refuses to start a phase whose window would end
    more than ``seconds`` from now (``None``: no limit), so a whole run stops by itself: it
    overruns the limit by at most one phase's bounded waits."""
    global _deadline
    previous = _deadline
    _deadline = None if seconds is None else time.monotonic() + seconds
    try:
        yield
    finally:
        _deadline = previous


def run_phase(
    jobs: Sequence[Job],
    monitor: ServerMonitor | None,
    *,
    at_start: Callable[[], object] | None = None,
) -> dict[str, Any]:
    """Run one phase and return its merged measurements (see :func:`merge`), with ``server``.

    ``at_start`` is called when the window opens (to start a profiler, say).

    Raises:
        BenchError: a process failed, or did not get ready or report in time, or the run's
            :func:`time_limit` does not leave room for this phase.
    """
    if not jobs:
        raise ValueError("a phase needs at least one job")
    duration = jobs[0].duration
    if _deadline is not None and time.monotonic() + duration > _deadline:
        raise BenchError("the run's time limit (--time-limit) leaves no room for this phase")
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        processes: list[tuple[subprocess.Popen[bytes], Path, Path]] = []
        try:
            for i, job in enumerate(jobs):
                out, err = Path(tmp) / f"{i}.out", Path(tmp) / f"{i}.err"
                with out.open("wb") as out_file, err.open("wb") as err_file:
                    process = subprocess.Popen(
                        _worker_argv(job),
                        stdin=subprocess.PIPE,
                        stdout=out_file,
                        stderr=err_file,
                        cwd=ROOT,
                        env=_env(),
                    )
                processes.append((process, out, err))
            _wait_ready(processes)
            start_ns = time.monotonic_ns() + _LEAD_NS
            peak_is_per_phase = monitor.reset_peak() if monitor else False
            for process, _, err in processes:
                assert process.stdin is not None
                try:
                    process.stdin.write(f"{start_ns}\n".encode())
                    process.stdin.close()
                except BrokenPipeError:
                    raise BenchError(f"a load process died before go: {_tail(err)}") from None
            _sleep_until(start_ns)
            if at_start is not None:
                at_start()
            cpu_start = monitor.cpu_seconds() if monitor else None
            busy_start = machine_busy_seconds()
            _sleep_until(start_ns + int(duration * 1e9))
            cpu_end = monitor.cpu_seconds() if monitor else None
            busy = machine_busy_seconds() - busy_start
            peak = monitor.peak_rss_bytes() if monitor else None
            results = [
                _result_of(job, _collect(p, out, err, duration))
                for job, (p, out, err) in zip(jobs, processes, strict=True)
            ]
        finally:
            for process, _, _ in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait(timeout=10)
    merged = merge(results, duration)
    server: dict[str, Any] = {"peakRssIsPerPhase": peak_is_per_phase}
    if cpu_start is not None and cpu_end is not None:
        cpu = cpu_end - cpu_start
        server["cpuSeconds"] = round(cpu, 4)
        calls = merged["calls"]
        server["cpuUsPerCall"] = round(cpu / calls * 1e6, 2) if calls else None
        server["cpuUtilisation"] = round(cpu / duration, 3)
    if peak is not None:
        server["peakRssMiB"] = round(peak / 2**20, 1)
    # The machine's busy CPU time that neither the server nor the load processes account for:
    # other programs competing for the same CPUs (approximate: client CPU includes the drain).
    other = busy - server.get("cpuSeconds", 0.0) - merged["clientCpuSeconds"]
    merged["otherCpuSeconds"] = round(max(0.0, other), 3)
    merged["server"] = server
    merged["processes"] = len(jobs)
    merged["perProcess"] = [job.concurrency for job in jobs]
    return merged


def merge(results: Sequence[Mapping[str, Any]], duration: float) -> dict[str, Any]:
    """Sum the processes' counts and histograms: ``calls``, ``seconds``, ``callsPerSecond``,
    ``latency`` (summary with CDF), ``counters``, ``series`` (summaries), ``clientCpuSeconds``.
    """
    calls = sum(int(r["calls"]) for r in results)
    counters: Counter[str] = Counter()
    for r in results:
        counters.update(r["counters"])
    names = {name for r in results for name in r["histograms"]}
    summaries = {
        name: summarize(
            decode_sum(r["histograms"][name] for r in results if name in r["histograms"])
        )
        for name in sorted(names)
    }
    return {
        "calls": calls,
        "seconds": duration,
        "callsPerSecond": round(calls / duration, 1),
        "latency": summaries.pop("latency"),
        "series": summaries,
        "counters": dict(sorted(counters.items())),
        "clientCpuSeconds": round(sum(float(r["cpuSeconds"]) for r in results), 4),
    }


def _sleep_until(deadline_ns: int) -> None:
    remaining = (deadline_ns - time.monotonic_ns()) / 1e9
    if remaining > 0:
        time.sleep(remaining)


def _tail(err: Path) -> str:
    text = err.read_text(encoding="utf-8", errors="replace").strip()
    return text[-1500:] or "(no stderr)"


def _wait_ready(processes: Sequence[tuple[subprocess.Popen[bytes], Path, Path]]) -> None:
    deadline = time.monotonic() + READY_WITHIN
    waiting = list(processes)
    while waiting:
        for entry in list(waiting):
            process, out, err = entry
            if READY in out.read_text(encoding="utf-8", errors="replace"):
                waiting.remove(entry)
            elif process.poll() is not None:
                raise BenchError(
                    f"a load process exited with status {process.returncode} before it was "
                    f"ready: {_tail(err)}"
                )
        if waiting and time.monotonic() > deadline:
            raise BenchError(f"{len(waiting)} load processes not ready within {READY_WITHIN:g} s")
        time.sleep(0.01)


def _collect(
    process: subprocess.Popen[bytes], out: Path, err: Path, duration: float
) -> dict[str, Any]:
    try:
        status = process.wait(timeout=REPORT_WITHIN)
    except subprocess.TimeoutExpired:
        raise BenchError(
            f"a load process did not report within {REPORT_WITHIN:g} s after its "
            f"{duration:g} s window: {_tail(err)}"
        ) from None
    if status != 0:
        raise BenchError(f"a load process failed with status {status}: {_tail(err)}")
    for line in reversed(out.read_text(encoding="utf-8").splitlines()):
        if line.startswith(RESULT_PREFIX):
            result: dict[str, Any] = json.loads(line.removeprefix(RESULT_PREFIX))
            return result
    raise BenchError(f"a load process printed no result: {_tail(err)}")
