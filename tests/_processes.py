"""Running the processes tests start: a script in a fresh interpreter, a benchmark's quick run,
and ending a server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

__all__ = ["reap", "run_bench", "run_script"]

ROOT = Path(__file__).resolve().parents[1]


async def reap(process: trio.Process) -> None:
    """Kill ``process`` unless it has exited, and wait for it (at most 10 s, even while the
    test is being cancelled): no server outlives its test."""
    if process.returncode is None:
        process.kill()
    with trio.move_on_after(10, shield=True):
        await process.wait()


def run_bench(module: str, *args: str, out: Path, timeout: float) -> tuple[dict[str, Any], str]:
    """Run ``python -m MODULE ARGS --out OUT`` from the repository root, which must exit 0
    (the tail of its stderr says why not); the JSON report it wrote, and its stdout."""
    stdout = _run_python(["-m", module, *args, "--out", str(out)], env=None, timeout=timeout)
    report: dict[str, Any] = json.loads(out.read_text())
    return report, stdout


def run_script(
    script: str, *args: str, env: Mapping[str, str] | None = None, timeout: float = 120
) -> dict[str, Any]:
    """Run ``python -c SCRIPT ARGS`` from the repository root (a fresh interpreter: settings
    of the whole process start from their defaults), which must exit 0 (the tail of its stderr
    says why not); the JSON object on the last line of its stdout."""
    stdout = _run_python(["-c", script, *args], env=env, timeout=timeout)
    report: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return report


def _run_python(args: list[str], *, env: Mapping[str, str] | None, timeout: float) -> str:
    """Run this interpreter with ``args`` from the repository root; it must exit 0 (the tail
    of its stderr says why not). Its stdout."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
