"""A log write the file system refuses writes nothing, then or later (issue 19, item 3).

Real faults on real files: a 4 MiB tmpfs filled up (ENOSPC), and a tmpfs remounted read-only
(EROFS); each test skips with a message where it cannot mount.
"""

from __future__ import annotations

import base64
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.session_log._epochs import EPOCH_OPEN_TYPE
from actors.session_log._errors import LogStorageError, storage_reason
from actors.session_log._header import SessionHeader
from actors.session_log._layout import Compression
from actors.session_log._reader import load_session
from actors.session_log._writer import SessionLogWriter
from tests._disks import fill, free, tmpfs

HEADER = SessionHeader(id="full", created_at=1767225600000, cwd="/projects/demo")
SUFFIX = {"zstd": "session.jsonl.zstd", "none": "session.jsonl"}


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs, unmounted afterwards."""
    with tmpfs(tmp_path / "disk") as directory:
        yield directory


def _bulky(seed: int) -> str:
    """16 KiB of incompressible text: a batch holding it needs fresh blocks on any disk."""
    return base64.b64encode(os.urandom(12 * 1024)).decode() + f"/{seed}"


def _message(writer: SessionLogWriter, text: str, replace: tuple[int, int] | None = None) -> None:
    data = {
        "id": text[-8:],
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    if replace is None:
        writer.append("user/message", data, surface_op="append")
        return
    start, end = replace
    writer.append(
        "user/message",
        data,
        surface_op={"op": "replace", "start": start, "end": end},
        source_event_seqs=list(range(start, end + 1)),
    )


def _texts(path: Path) -> list[str]:
    loaded = load_session(path)
    assert loaded.torn is None
    events: list[Any] = list(loaded.events)[: loaded.stored_count]
    return [e["data"]["content"][0]["text"] for e in events if e["type"] == "user/message"]


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_full_disk_discards_the_batch_and_the_next_append_takes_its_seq(
    disk: Path, compression: Compression
) -> None:
    """On a full disk a flush raises no-space/ENOSPC, the file keeps its size, the writer's seq,
    surface and title go back to the last durable batch, and once space is freed the next
    append is written with the failed one's seq while the failed event never appears."""
    writer = SessionLogWriter.create(disk / "s" / SUFFIX[compression], HEADER)
    _message(writer, "first")
    writer.set_title("durable title")
    writer.flush()
    size, seq, surface = writer.path.stat().st_size, writer.next_seq, writer.surface
    fill(disk)
    failed = _bulky(1)
    _message(writer, failed)
    writer.set_title("never written")
    with pytest.raises(LogStorageError) as refused:
        writer.flush()
    assert (refused.value.reason, refused.value.errno_name) == ("no-space", "ENOSPC")
    assert str(writer.path) in str(refused.value)
    assert writer.path.stat().st_size == size
    assert (writer.next_seq, writer.surface, writer.pending_count) == (seq, surface, 0)
    assert writer.title is not None and writer.title.title == "durable title"
    assert writer.durable_count == seq
    free(disk)
    _message(writer, "after")
    assert writer.flush() == 1
    writer.close()
    assert _texts(writer.path) == ["first", "after"]
    loaded = load_session(writer.path)
    assert loaded.events[seq]["data"]["content"][0]["text"] == "after"
    assert failed not in writer.path.read_bytes().decode("latin-1")


def test_a_discarded_replacement_restores_the_surface(disk: Path) -> None:
    """A refused batch that appended to and then rewrote the surface leaves the writer's
    surface as the log holds it, and the next batch folds against that."""
    writer = SessionLogWriter.create(disk / "s" / SUFFIX["zstd"], HEADER)
    for k in range(3):
        _message(writer, f"durable-{k}")
    writer.flush()
    surface = writer.surface
    fill(disk)
    _message(writer, _bulky(5))
    _message(writer, "summary", replace=(0, 3))
    assert writer.surface == (4,)
    with pytest.raises(LogStorageError):
        writer.flush()
    assert (writer.surface, writer.next_seq) == (surface, 3)
    free(disk)
    _message(writer, "rewrite", replace=(1, 2))
    writer.close()
    loaded = load_session(writer.path)
    assert loaded.surface == (0, 3)
    assert _texts(writer.path) == ["durable-0", "durable-1", "durable-2", "rewrite"]


def test_first_flush_on_a_full_disk_leaves_no_file(disk: Path) -> None:
    """Materialising a new log on a full disk fails with no-space and leaves neither the log
    nor its temp file; after space is freed the writer materialises it from seq 0."""
    writer = SessionLogWriter.create(disk / "p" / "s" / SUFFIX["zstd"], HEADER)
    fill(disk)
    _message(writer, _bulky(2))
    with pytest.raises(LogStorageError) as refused:
        writer.flush()
    assert refused.value.reason == "no-space"
    assert not writer.path.exists()
    assert [p.name for p in writer.path.parent.iterdir()] == []
    assert writer.next_seq == 0
    free(disk)
    _message(writer, "first")
    writer.close()
    assert _texts(writer.path) == ["first"]


def test_a_discarded_epoch_open_is_written_with_the_next_batch(disk: Path) -> None:
    """Under a fencing epoch, a first batch that fails takes its epoch-open record with it: the
    next batch opens the epoch again, so the log read back is fenced at that epoch."""
    path = disk / "s" / SUFFIX["zstd"]
    plain = SessionLogWriter.create(path, HEADER)
    _message(plain, "plain")
    plain.close()
    writer = SessionLogWriter.open(path, epoch=7)
    fill(disk)
    _message(writer, _bulky(3))
    with pytest.raises(LogStorageError):
        writer.flush()
    marker = writer.next_marker()
    assert marker is not None and marker["type"] == EPOCH_OPEN_TYPE
    free(disk)
    _message(writer, "fenced")
    writer.close()
    loaded = load_session(path)
    assert loaded.epoch == 7
    assert [e["type"] for e in loaded.events] == ["user/message", EPOCH_OPEN_TYPE, "user/message"]
    assert _texts(path) == ["plain", "fenced"]


def test_a_kept_batch_is_written_once_when_space_returns(disk: Path) -> None:
    """``flush(keep_on_failure=True)`` keeps a refused batch pending (nothing of it in the
    file), and the flush after space is freed writes it exactly once."""
    writer = SessionLogWriter.create(disk / "s" / SUFFIX["none"], HEADER)
    _message(writer, "first")
    writer.flush()
    fill(disk)
    kept = _bulky(4)
    _message(writer, kept)
    for _ in range(3):
        with pytest.raises(LogStorageError):
            writer.flush(keep_on_failure=True)
        assert writer.pending_count == 1
    free(disk)
    assert writer.flush() == 1
    writer.close()
    assert _texts(writer.path) == ["first", kept]


def test_read_only_file_system_refuses_open_and_create(tmp_path: Path) -> None:
    """On a file system remounted read-only, reopening a log for appending and materialising
    a new one fail with read-only/EROFS, and nothing changes on disk."""
    with tmpfs(tmp_path / "disk") as disk:
        path = disk / "s" / SUFFIX["zstd"]
        writer = SessionLogWriter.create(path, HEADER)
        _message(writer, "first")
        writer.close()
        before = path.read_bytes()
        remounted = os.system(f"mount -o remount,ro {disk}")  # nothing is open for writing
        if remounted != 0:
            pytest.skip("cannot remount the tmpfs read-only")
        with pytest.raises(LogStorageError) as refused:
            SessionLogWriter.open(path)
        assert (refused.value.reason, refused.value.errno_name) == ("read-only", "EROFS")
        fresh = SessionLogWriter.create(disk / "t" / SUFFIX["zstd"], HEADER)
        _message(fresh, "never")
        with pytest.raises(LogStorageError) as created:
            fresh.flush()
        assert created.value.reason == "read-only"
        assert (fresh.next_seq, fresh.pending_count) == (0, 0)
        assert path.read_bytes() == before
        assert not (disk / "t").exists()


@pytest.mark.parametrize(
    ("number", "reason"),
    [
        (errno.ENOSPC, "no-space"),
        (errno.EDQUOT, "no-space"),
        (errno.EFBIG, "no-space"),
        (errno.EROFS, "read-only"),
        (errno.EACCES, "read-only"),
        (errno.EPERM, "read-only"),
        (errno.EIO, "io-error"),
        (errno.ENOMEM, "io-error"),
        (None, "io-error"),
    ],
)
def test_storage_reasons(number: int | None, reason: str) -> None:
    """Every OS error sorts into one documented reason: anything not a lack of space or of
    permission is an I/O error."""
    assert storage_reason(number) == reason
