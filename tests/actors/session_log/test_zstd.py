"""Zstandard frames from many threads at once (the store writes sessions in worker threads)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# In a child process, so that a crash (python-zstandard instances shared across threads
# segfault) fails this test instead of the test run.
CHILD = """
import os, threading
from actors.session_log._zstd import compress_frame, decode_frame, decode_torn_prefix
failures = []
def work(seed):
    data = (str(seed).encode() + os.urandom(500)) * 60
    for _ in range(150):
        frame = compress_frame(data)
        if decode_frame(frame) != data or not data.startswith(decode_torn_prefix(frame[:-9])):
            failures.append(seed)
threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(len(failures))
"""


def test_frames_round_trip_under_concurrent_threads() -> None:
    """Eight threads compressing and decoding at once all get exact round trips, no crash."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"child died ({done.returncode}): {done.stderr[-2000:]}"
    assert done.stdout.split() == ["0"]
