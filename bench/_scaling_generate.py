"""One load generator's process: its command line and its entry point.

``bench.scaling`` starts each generator as ``python -m bench.scaling --generate …``; this module
builds those arguments and runs the generator they name (``bench._scaling_zmtp`` or one of
``bench._scaling_load``'s), printing its report as one line of JSON.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import trio

from bench._scaling_load import client_generate, raw_generate
from bench._scaling_zmtp import zmtp_generate

__all__ = ["generator_argv", "generator_main"]


def generator_argv(
    generator: str,
    address: str,
    mode: str,
    kind: str,
    agents_file: Path,
    duration: float,
    in_flight: int,
    start_at: float,
    spread: str = "workers",
) -> list[str]:
    """The arguments after ``python -m bench.scaling --generate``."""
    numbers = [str(duration), str(in_flight), str(start_at)]
    return [generator, address, mode, kind, str(agents_file), *numbers, spread]


def generator_main(argv: list[str]) -> int:
    """Run one generator (arguments from :func:`generator_argv`); print its report as JSON."""
    generator, address, mode, kind, agents_file, duration, in_flight, start_at, spread = argv
    agents = json.loads(Path(agents_file).read_text())
    numbers = float(duration), int(in_flight), float(start_at)
    if generator == "zmtp":
        report = zmtp_generate(address, mode, kind, agents, *numbers, spread)
    elif generator == "raw":
        report = raw_generate(address, mode, kind, agents, *numbers, spread)
    else:
        # Start together: every generator sleeps until the same wall-clock instant.
        time.sleep(max(0.0, float(start_at) - time.time()))
        report = trio.run(
            client_generate, address, mode, kind, agents, float(duration), int(in_flight)
        )
    print(json.dumps(report), flush=True)
    return 0
