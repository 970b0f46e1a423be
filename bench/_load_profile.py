"""Where the server's time goes: a py-spy recording of one phase, summarised.

``py-spy record --format raw`` writes collapsed stacks (``outer;...;leaf COUNT``). The summary
ranks functions by self time (the leaf of a sample) and by total time (anywhere on the stack),
each as a share of the samples in which the server was not idle.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["Recording", "py_spy", "summarize_collapsed"]

_FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def py_spy() -> str | None:
    """The py-spy executable (beside this Python first), or ``None`` when not installed."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Recording:
    """A running ``py-spy record`` of one process for a whole number of seconds."""

    def __init__(self, pid: int, seconds: float, output: Path) -> None:
        executable = py_spy()
        if executable is None:
            raise FileNotFoundError("py-spy is not installed (pip install -e '.[bench]')")
        self.output = output
        self._seconds = max(1, round(seconds))
        argv = [executable, "record", "--pid", str(pid), "--duration", str(self._seconds)]
        argv += ["--rate", "250", "--format", "raw", "--nonblocking", "--output", str(output)]
        self._process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    def finish(self) -> str | None:
        """Wait for the recording (bounded); return an error text, or ``None`` on success."""
        try:
            _, err = self._process.communicate(timeout=self._seconds + 20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
            return "py-spy did not finish in time"
        if self._process.returncode != 0 or not self.output.exists():
            return f"py-spy failed: {err.decode(errors='replace').strip()[-500:]}"
        return None

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)


#: Frames of this checkout's own files are shown relative to it.
_CHECKOUT = f"{Path(__file__).resolve().parents[1]}/"


def _short(frame: str) -> str:
    match = _FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    file = match["file"]
    for marker in ("site-packages/", _CHECKOUT, "lib/python3"):
        if marker in file:
            file = file.split(marker, 1)[1]
    return f"{match['function']} ({file})"


def summarize_collapsed(text: str, top: int = 12) -> dict[str, Any]:
    """Rank functions of collapsed stacks by self and total share of the samples."""
    self_counts: Counter[str] = Counter()
    total_counts: Counter[str] = Counter()
    samples = 0
    for line in text.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_short(f) for f in stack.split(";") if f.strip()]
        if not frames:
            continue
        samples += count
        self_counts[frames[-1]] += count
        for frame in set(frames):
            total_counts[frame] += count

    def ranked(counts: Counter[str]) -> list[list[Any]]:
        return [[name, round(100 * n / samples, 1)] for name, n in counts.most_common(top)]

    return {
        "samples": samples,
        "selfPercent": ranked(self_counts) if samples else [],
        "totalPercent": ranked(total_counts) if samples else [],
    }
