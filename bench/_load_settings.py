"""The settings of a load benchmark run: the full run's defaults and the quick smoke run."""

from __future__ import annotations

from pathlib import Path

import attrs

from bench._load_profile import py_spy
from bench._load_sessions import FIXTURES
from bench._load_workloads import DEFAULT_COMPLETION
from bench.peers import PEERS

__all__ = ["DEFAULT_OUT", "ROOT", "LoadSettings"]

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "load.json"


@attrs.frozen(kw_only=True)
class LoadSettings:
    """Everything a run depends on; the defaults are the full benchmark."""

    #: ``tcp`` (127.0.0.1, a free port) or ``ipc`` (a socket file in a temporary directory).
    transport: str = attrs.field(default="tcp", validator=attrs.validators.in_(("tcp", "ipc")))
    #: Load-generator processes (N); a level of L calls in flight gives each about L / N.
    processes: int = 2
    #: Total calls in flight per phase, echo 64 B.
    in_flight: tuple[int, ...] = (1, 8, 32, 128, 256)
    #: Total calls in flight per phase, echo 64 KiB.
    in_flight_large: tuple[int, ...] = (16, 128)
    #: Seconds per measured phase.
    duration: float = 3.0
    #: Agents (K) the calls are spread over.
    agents: int = 8
    #: The agents' working directory: what ``fileReferences/list`` completes paths in.
    cwd: Path = ROOT
    peers: tuple[str, ...] = tuple(PEERS)
    #: Whether the TypeScript client (``clients/typescript``) runs as a stack of its own: echo
    #: and cancel probes against a server of its own, skipped with the reason when Node.js or
    #: the client's build is missing.
    typescript: bool = True
    #: Simulated typists for the keystroke workload, spread over the processes: one phase of
    #: the reference completion per level (``keystrokeLevels``); the stand-in runs at the first.
    typists: tuple[int, ...] = (64,)
    #: Seconds per keystroke phase (the overload levels of issue 23 use 60).
    keystroke_duration: float = 6.0
    #: ``"keystroke"``: only agent-actors' keystroke levels (no echo, cancel probes, stand-in
    #: keystroke or prepare; no peers, no TypeScript client); ``None``: every workload.
    only: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.in_(("keystroke",)))
    )
    key_interval: tuple[float, float] = (0.04, 0.2)
    handler_seconds: tuple[float, float] = (0.0, 0.25)
    #: What each keystroke sends (names in ``bench._load_workloads.CALLS``).
    completion: tuple[str, ...] = DEFAULT_COMPLETION
    prepare_in_flight: int = 8
    #: Raw DSH logs (``*.jsonl``, searched recursively) the server serves and ``prepare``
    #: references, copied into the run's temporary directory; ``None``: no prepare workload.
    sessions_from: Path | None = FIXTURES
    #: Seconds of cancel probes, idle and again under echo load. Under load a probe takes about
    #: 70 ms (it waits for its sleep to run past the echo queue): 20 s give some 290 samples,
    #: so the p99 is a percentile; 5 s gave 76, whose p99 was their maximum.
    cancel_duration: float = 20.0
    warmup_calls: int = 100
    #: Where the issue's targets are read (calls in flight, echo 64 B).
    target_in_flight: int = 128
    seed: int = 1
    quick: bool = False
    #: Stacks whose server py-spy records during echo 64 B at the target level (issue 6: where
    #: a target is missed, say where the time goes); by default ours, when py-spy is installed.
    profile: tuple[str, ...] = attrs.field(
        factory=lambda: ("ours", "oursAsync") if py_spy() else ()
    )
    #: An echo phase during which other programs used more than this many CPUs (on average) is
    #: run again, at most ``retries`` times; the quietest attempt is kept.
    disturbed_cpus: float = 0.2
    retries: int = 2
    #: Seconds after which no further phase starts; the stacks left are reported as failed.
    time_limit: float = 1800.0

    @classmethod
    def quick_run(cls) -> LoadSettings:
        """A smoke run of under 30 s: one echo level, two tiny keystroke levels, short phases,
        every stack, no 64 KiB echo."""
        return cls(
            in_flight=(8,),
            in_flight_large=(),
            duration=0.4,
            typists=(4, 8),
            keystroke_duration=0.5,
            cancel_duration=0.5,
            warmup_calls=10,
            target_in_flight=8,
            retries=0,
            quick=True,
            profile=(),
            time_limit=300.0,
        )
