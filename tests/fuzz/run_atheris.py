"""Coverage-guided fuzzing of the frame decoder and the log-line reader with atheris.

Usage (from the project root): ``python tests/fuzz/run_atheris.py frame|logline
[libFuzzer options] [corpus directories]``, e.g. ``-max_total_time=60 tests/fuzz/corpus/frame``.
The marked test ``tests/fuzz/test_atheris.py`` runs each target for a bounded time; a crash
(any exception the target lets escape) makes the run exit non-zero and writes the input as
``crash-*`` in the working directory.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["wire", "actors", "tests.fuzz"]):
    from tests.fuzz import targets

TARGETS: dict[str, Callable[[bytes], None]] = {
    "frame": targets.fuzz_frame,
    "logline": targets.fuzz_log_line,
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: {sys.argv[0]} {{{'|'.join(TARGETS)}}} [libFuzzer options] [corpus]")
    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
