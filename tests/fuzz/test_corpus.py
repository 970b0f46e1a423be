"""Replays every committed fuzz input through its target (fast; runs by default).

The corpus under ``tests/fuzz/corpus`` is what atheris found interesting (new coverage) plus
hand-written seeds; replaying it keeps every path it reached covered by a regular test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.session_log._errors import LogValidationError
from tests.fuzz.targets import LOG_HEADER, fuzz_frame, fuzz_log_line, read_log

CORPUS = Path(__file__).resolve().parent / "corpus"
TARGETS = {"frame": fuzz_frame, "logline": fuzz_log_line}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_corpus_replays_cleanly(target: str) -> None:
    """Every committed input is accepted or rejected with the target's typed error."""
    inputs = sorted((CORPUS / target).iterdir())
    assert inputs, f"no corpus for {target}"
    for path in inputs:
        try:
            TARGETS[target](path.read_bytes())
        except Exception as exc:  # pragma: no cover - the message names the input
            raise AssertionError(f"{path.name}: {type(exc).__name__}: {exc}") from exc


def test_turn_start_without_time_is_rejected_cleanly() -> None:
    """A turn/start line without ``time`` is a LogValidationError, not a KeyError (atheris
    found the KeyError in ``interrupted_turn_closers``; this input is its regression test)."""
    line = b'{"type":"turn/start","seq":0,"data":{"turn":1}}'
    fuzz_log_line(line)
    with pytest.raises(LogValidationError, match="time must be a safe integer"):
        read_log(LOG_HEADER + b"\n" + line + b"\n")
