"""Coverage-guided fuzzing with atheris, bounded in time (issue 9, item 4).

Marked ``fuzz`` (deselected by default; run with ``pytest -m fuzz``). Each target runs for
``AGENT_ACTORS_FUZZ_SECONDS`` seconds (default 30) from the committed corpus in
``tests/fuzz/corpus/<target>``; new inputs go to a temporary directory, so the run never
changes the repository. To grow the committed corpus, run ``tests/fuzz/run_atheris.py``
by hand with the corpus directory first (see its docstring). The unmarked
``test_corpus.py`` replays every committed input on every test run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "tests" / "fuzz" / "run_atheris.py"
SECONDS = int(os.environ.get("AGENT_ACTORS_FUZZ_SECONDS", "30"))

pytestmark = pytest.mark.fuzz


@pytest.mark.parametrize("target", ["frame", "logline"])
def test_atheris_finds_no_crash(target: str, tmp_path: Path) -> None:
    """atheris, guided by coverage of wire/ and actors/, finds no input that makes the
    target raise anything but its typed error within the time bound."""
    found = tmp_path / "new"
    found.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            str(RUNNER),
            target,
            f"-max_total_time={SECONDS}",
            "-max_len=2048",
            "-rss_limit_mb=2048",
            "-timeout=10",
            f"-artifact_prefix={tmp_path}/",
            str(found),
            str(ROOT / "tests" / "fuzz" / "corpus" / target),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SECONDS + 180,
        check=False,
    )
    crashes = sorted(p.name for p in tmp_path.glob("crash-*"))
    assert result.returncode == 0 and not crashes, (crashes, result.stderr[-4000:])
    assert "Done" in result.stderr
