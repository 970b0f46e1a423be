"""Durable byte-level access to one transcript file.

`session-log-format.md` §2.1: "First materialization writes `<final-file>.<12 hex>.tmp`,
fsyncs it, publishes it with a hard link (POSIX), then unlinks the temp." Later batches
are appended; a failed append restores the previous size, since partial bytes would
duplicate seqs when the batch is retried.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from actors.session_log._errors import LogWriteError

__all__ = ["LogFile"]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LogFile:
    """A transcript file: published once, then appended to.

    Args:
        path: the transcript path.
        fsync: sync file data and directory entries after every change.
    """

    def __init__(self, path: Path, *, fsync: bool) -> None:
        self.path = path
        self.fsync = fsync
        self._fd: int | None = None

    @property
    def is_open(self) -> bool:
        """Whether the file exists and is open for appending."""
        return self._fd is not None

    def open(self) -> None:
        """Open the existing file for appending.

        Raises:
            LogWriteError: the file cannot be opened for writing.
        """
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError as error:
            raise LogWriteError(f"{self.path}: cannot open for append: {error}") from error

    def publish(self, content: bytes) -> None:
        """Create the file with `content` atomically, then open it for appending.

        Raises:
            LogWriteError: the file already exists or cannot be created; nothing is left
                behind (no partial file, no temp file).
        """
        directory = self.path.parent
        tmp = self.path.with_name(f"{self.path.name}.{secrets.token_hex(6)}.tmp")
        try:
            self._make_dirs(directory)
            if self.path.exists():
                raise LogWriteError(f"{self.path}: refusing to materialize: a log already exists")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                _write_all(fd, content)
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            try:
                # link(), not rename(): link fails if the final path exists, so two
                # writers materialising one id cannot clobber each other.
                os.link(tmp, self.path)
            except FileExistsError:
                raise LogWriteError(
                    f"{self.path}: refusing to materialize: a log already exists"
                ) from None
            if self.fsync:
                _fsync_dir(directory)
        except OSError as error:
            raise LogWriteError(f"{self.path}: cannot create session log: {error}") from error
        finally:
            # The log is published (or was never); the temp link is now redundant.
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        self.open()

    def _make_dirs(self, directory: Path) -> None:
        missing: list[Path] = []
        current = directory
        while not current.exists():
            missing.append(current)
            current = current.parent
        for created in reversed(missing):
            created.mkdir(mode=0o700, exist_ok=True)
            if self.fsync:
                _fsync_dir(created.parent)

    def append(self, payload: bytes) -> None:
        """Append `payload` (one batch), durably when `fsync` is on.

        Raises:
            LogWriteError: the write or sync failed; the file was cut back to its size
                before the call.
        """
        fd = self._require_fd()
        size = os.fstat(fd).st_size
        try:
            _write_all(fd, payload)
            if self.fsync:
                os.fsync(fd)
        except OSError as error:
            with contextlib.suppress(OSError):  # the original error is the one to report
                os.ftruncate(fd, size)
            raise LogWriteError(f"{self.path}: append failed: {error}") from error

    def truncate(self, size: int) -> None:
        """Cut the file to `size` bytes (drop a torn tail).

        Raises:
            LogWriteError: the truncation failed.
        """
        fd = self._require_fd()
        try:
            os.ftruncate(fd, size)
            if self.fsync:
                os.fsync(fd)
        except OSError as error:
            raise LogWriteError(f"{self.path}: repair failed: {error}") from error

    def close(self) -> None:
        """Release the file descriptor (idempotent)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def _require_fd(self) -> int:
        if self._fd is None:
            raise LogWriteError(f"{self.path}: the log file is not open")
        return self._fd
