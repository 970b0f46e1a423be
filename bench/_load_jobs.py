"""What a load-generator process is asked to do, and what it reports back.

The parent starts each load-generator process as ``python -m bench._load_worker JOB`` with a
:class:`Job` as JSON. The process connects and warms up, then prints :data:`READY` and blocks on
stdin until the parent writes the common start time (``time.monotonic_ns()``, one clock for every
process of a host). From then on it keeps ``job.concurrency`` calls in flight for
``job.duration`` seconds, stops issuing, drains, and prints :data:`RESULT_PREFIX` followed by
its :class:`Samples` as JSON.

Only calls that *end* inside the window count: throughput is ``calls / duration`` summed over
processes, and the latency histogram holds exactly those calls.
"""

from __future__ import annotations

import ipaddress
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import attrs

from bench._common import BenchError
from bench._load_stats import encode_samples

__all__ = [
    "READY",
    "RESULT_PREFIX",
    "Go",
    "Job",
    "Samples",
    "payload_of",
    "require_loopback",
    "split_address",
    "wait_for_go",
]

READY = "bench-load: ready"
RESULT_PREFIX = "bench-load: result "

#: Blocks until the parent says go; returns the start of the window (``monotonic_ns``).
Go = Callable[[], int]


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _pair(value: Any) -> tuple[float, float]:
    low, high = (float(v) for v in value)
    if not 0 <= low <= high:
        raise ValueError(f"expected 0 <= low <= high, got {value!r}")
    return (low, high)


@attrs.frozen(kw_only=True)
class Job:
    """One load-generator process's share of a phase."""

    #: ``ours`` or a peer name (``raw``, ``zerorpc``, ``grpc``, ``rpyc``, ``pyro5``).
    stack: str
    #: ``closed`` (a closed loop of calls), ``keystroke``, ``cancel-probe`` or
    #: ``recovery-probe`` (``ours`` only for the last three).
    workload: str = "closed"
    #: Where the server listens: ``tcp://127.0.0.1:PORT`` or ``ipc:///path``.
    address: str
    #: This process's index within the phase (spreads agents and seeds).
    worker: int = 0
    #: Calls kept in flight by this process (typists, for ``keystroke``).
    concurrency: int = 1
    #: Seconds of the measured window.
    duration: float = 1.0
    payload_bytes: int = 64
    #: Agent ids to spread calls over (``ours``); call ``i`` of task ``t`` goes to one of them.
    agents: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    #: Session ids ``prepare`` references (real DSH logs the server serves; see
    #: :mod:`bench._load_sessions`); empty: other agents of the run.
    sources: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    #: Untimed calls per connection before the window.
    warmup_calls: int = 50
    seed: int = 0
    #: The calls made, by name in ``bench._load_workloads.CALLS``: ``closed`` repeats the
    #: first; ``keystroke`` sends each of them per keystroke.
    calls: tuple[str, ...] = attrs.field(default=("diagnostics/echo",), converter=_strings)
    #: ``keystroke``: seconds between two keystrokes of one typist (uniform in the range).
    key_interval: tuple[float, float] = attrs.field(default=(0.04, 0.2), converter=_pair)
    #: ``keystroke`` with the stand-in handler: seconds the handler sleeps (uniform).
    handler_seconds: tuple[float, float] = attrs.field(default=(0.0, 0.25), converter=_pair)
    #: ``cancel-probe``: seconds between starting the sleep and cancelling it.
    probe_settle: float = 0.005

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Job:
        return cls(**json.loads(text))


def payload_of(size: int) -> bytes:
    """The echo payload of ``size`` bytes (the same bytes for every stack)."""
    return bytes(i % 251 for i in range(size))


def split_address(address: str) -> tuple[str, int] | str:
    """``tcp://HOST:PORT`` -> ``(HOST, PORT)``; ``ipc:///path`` -> ``/path``.

    Raises:
        ValueError: another scheme, or a tcp address without a port.
    """
    parts = urlsplit(address)
    if parts.scheme == "tcp" and parts.hostname and parts.port is not None:
        return (parts.hostname, parts.port)
    if parts.scheme == "ipc":
        return address.removeprefix("ipc://")
    raise ValueError(f"expected tcp://HOST:PORT or ipc:///PATH, got {address!r}")


def require_loopback(address: str) -> str:
    """Return ``address`` if it stays on this host: ``ipc://`` or tcp on a loopback address.

    Raises:
        BenchError: any other address (the benchmark never listens beyond loopback).
    """
    try:
        where = split_address(address)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    if isinstance(where, tuple):
        try:
            loopback = ipaddress.ip_address(where[0]).is_loopback
        except ValueError:
            loopback = where[0] == "localhost"
        if not loopback:
            raise BenchError(f"{address} is not a loopback address")
    return address


def wait_for_go() -> int:
    """Tell the parent this process is ready; block until it sends the start time."""
    print(READY, flush=True)
    line = sys.stdin.readline()
    if not line.strip():
        raise SystemExit("bench-load: the parent closed stdin before saying go")
    return int(line)


class Samples:
    """What one process measured in its window: latencies, counters, other series."""

    def __init__(self, start_ns: int, duration: float) -> None:
        self.start_ns = start_ns
        self.end_ns = start_ns + int(duration * 1e9)
        self.latencies: list[int] = []
        self.counters: Counter[str] = Counter()
        #: Other latency-like series (nanoseconds), e.g. supersede-to-terminal.
        self.series: dict[str, list[int]] = {}
        self._cpu_start = time.process_time()
        self._cpu_seconds: float | None = None

    def open(self, now_ns: int | None = None) -> bool:
        """Whether the window is still open (new calls may start)."""
        return (time.monotonic_ns() if now_ns is None else now_ns) < self.end_ns

    def call_done(self, started_ns: int, ended_ns: int) -> None:
        """Count a call that ended at ``ended_ns`` if that is inside the window."""
        if self.start_ns <= ended_ns <= self.end_ns:
            self.latencies.append(ended_ns - started_ns)

    def add(self, series: str, value_ns: int) -> None:
        self.series.setdefault(series, []).append(value_ns)

    def stop_clock(self) -> None:
        """Mark the end of this process's work (its CPU time is measured up to here)."""
        if self._cpu_seconds is None:
            self._cpu_seconds = time.process_time() - self._cpu_start

    def to_json(self) -> dict[str, Any]:
        self.stop_clock()
        histograms = {"latency": encode_samples(self.latencies)}
        histograms |= {name: encode_samples(values) for name, values in self.series.items()}
        return {
            "calls": len(self.latencies),
            "counters": dict(self.counters),
            "histograms": histograms,
            "cpuSeconds": round(self._cpu_seconds or 0.0, 6),
        }
