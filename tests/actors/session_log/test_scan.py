"""Scanning raw transcripts in chunks: same result as one buffer, bounded memory (issue 3)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.session_log import _scan
from actors.session_log._errors import LogCorruptError
from actors.session_log._reader import load_session
from actors.session_log._scan import ScanResult, scan_raw
from actors.session_log._sequence import PackedRun
from tests.actors.session_log.test_reader import HEADER, ev, line, turn, write_raw

ROOT = Path(__file__).resolve().parents[3]


def pieces(buffer: bytes, size: int) -> Iterator[bytes]:
    """Yield `buffer` in chunks of `size` bytes."""
    for start in range(0, len(buffer), size):
        yield buffer[start : start + size]


def shape(scan: ScanResult) -> tuple[object, ...]:
    """What a scan found, comparable across chunkings."""
    items = [(i.seq0, i.count, i.line) if isinstance(i, PackedRun) else i for i in scan.items]
    return scan.header, items, scan.count, scan.torn


def sample_log() -> bytes:
    """A log with a packed row, a long line, invalid UTF-8 and a torn tail."""
    long_text = "x" * 5000
    row = {
        "type": "text-chunks",
        "seq0": 6,
        "time0": 0,
        "data": {"turn": 2, "step": 1, "index": 0, "dt": [0, 0], "texts": ["a", "b", "c"]},
    }
    records = [
        line(HEADER),
        *(line(event) for event in turn(0)),
        line(row),
        line(ev(9, "session/title", {"title": long_text, "messageSeqs": [], "source": {}})),
        line(ev(10, "session/title", {"title": "bad \ufffd", "messageSeqs": []})).replace(
            "\ufffd".encode(), b"\xff"
        ),
    ]
    return b"\n".join(records) + b"\n" + line(ev(11, "session/end-seed"))[:-4]


@pytest.mark.parametrize("size", [1, 2, 7, 64, 1000, 4096, 1 << 20])
def test_any_chunking_scans_like_one_buffer(size: int) -> None:
    """Lines and the header split anywhere across chunks scan exactly as the whole buffer."""
    buffer = sample_log()
    whole = scan_raw(buffer)
    assert whole.count == 11 and whole.torn is not None
    assert whole.torn.truncate_to == buffer.rfind(b"\n") + 1
    assert shape(scan_raw(pieces(buffer, size))) == shape(whole)


def test_chunked_scan_keeps_the_header_rules() -> None:
    """Without a complete header line, chunked input is rejected as header-less."""
    header = line(HEADER)
    with pytest.raises(LogCorruptError, match="header-less"):
        scan_raw(pieces(header, 3))
    with pytest.raises(LogCorruptError, match="header-less"):
        scan_raw(iter(()))


def test_load_reads_a_file_larger_than_a_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A raw file is read in chunks (small ones here), with lines crossing chunk edges."""
    monkeypatch.setattr("actors.session_log._reader.SCAN_CHUNK", 37)
    events = [event for number in range(20) for event in turn(6 * number, number + 1)]
    path = write_raw(tmp_path / "session.jsonl", *events, tail=b'{"type":"tu')
    loaded = load_session(path)
    assert [dict(e) for e in loaded.events] == events
    assert loaded.torn is not None
    assert loaded.torn.truncate_to == path.stat().st_size - len(b'{"type":"tu')


def test_loaded_events_share_their_keys(tmp_path: Path) -> None:
    """Envelope and payload keys of loaded events are one object each, not one per line."""
    loaded = load_session(write_raw(tmp_path / "session.jsonl", *turn(0), *turn(6, 2)))
    first, second = loaded.events[2], loaded.events[8]
    assert first == turn(0)[2] and second == turn(6, 2)[2]
    for key in ("type", "seq", "data"):
        assert next(k for k in first if k == key) is next(k for k in second if k == key)
    for key in ("id", "content", "source"):
        assert next(k for k in first["data"] if k == key) is next(
            k for k in second["data"] if k == key
        )
    block_keys = [next(iter(e["data"]["content"][0])) for e in (first, second)]
    assert block_keys[0] is block_keys[1]


def test_deep_payloads_are_kept_intact() -> None:
    """Key sharing stops at a fixed depth and leaves deeper values as parsed."""
    deep: object = {"leaf": [1, {"k": "v"}]}
    for _ in range(10):
        deep = {"nest": deep, "list": [deep]}
    assert _scan._share_keys(deep, 4) == deep


LOAD_PEAK = r"""
import sys
from actors.session_log._reader import load_session
def status(name):
    for row in open("/proc/self/status"):
        if row.startswith(name):
            return int(row.split()[1]) * 1024
base = status("VmRSS:")
loaded = load_session(sys.argv[1])
print(base, status("VmHWM:"), len(loaded.events))
"""


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc (Linux)")
def test_cold_load_peak_memory_stays_below_three_times_the_log(tmp_path: Path) -> None:
    """Loading a 24 MB raw log in a fresh process grows its peak RSS by under 3 × the log."""
    text = "lorem ipsum dolor sit amet " * 100
    path = tmp_path / "session.jsonl"
    with path.open("wb") as file:
        file.write(line(HEADER) + b"\n")
        seq = 0
        while file.tell() < 24 << 20:
            events = turn(seq, seq // 6 + 1)
            events[3]["data"]["message"]["content"][0]["text"] = text
            for event in events:
                file.write(line(event) + b"\n")
            seq += 6
    done = subprocess.run(
        [sys.executable, "-c", LOAD_PEAK, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    base, peak, count = map(int, done.stdout.split())
    assert count == seq
    assert (peak - base) / path.stat().st_size <= 3.0
