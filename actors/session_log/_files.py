"""Durable byte-level access to one transcript file.

`session-log-format` §2.1: "First materialization writes `<final-file>.<12 hex>.tmp`,
fsyncs it, publishes it with a hard link (POSIX), then unlinks the temp." Later batches
are appended. A failed write leaves nothing behind: a failed publish removes what it created,
and a failed append cuts the file back to its last durable end, since bytes of a batch that was
never acknowledged must not become events (a whole line would read as one, and events can be
recovered from a torn zstd frame, §6.4). When even the cut is refused, it is retried before the
next append and at close. Every OS error is raised as `LogStorageError`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import time
from pathlib import Path

from actors.session_log._errors import LogStorageError, LogWriteError
from actors.session_log._write_statistics import WRITES

__all__ = ["LogFile", "fsync_dir"]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_data(fd: int) -> None:
    """fsync a batch's data, timed (``WRITES.fsync_seconds``)."""
    started = time.perf_counter()
    os.fsync(fd)
    WRITES.fsync_seconds.observe(time.perf_counter() - started)


def fsync_dir(path: Path) -> None:
    """Make ``path``'s entries (a file created, linked or renamed in it) durable."""
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
        #: The durable end to cut back to, while bytes of a failed append may lie past it.
        self._cut_to: int | None = None

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
            raise self._failed("cannot open for append", error) from error

    def publish(self, content: bytes) -> None:
        """Create the file with `content` atomically, then keep it open for appending.

        Raises:
            LogWriteError: the file already exists, or (`LogStorageError`) it cannot be
                created; nothing is left behind (no partial file, no temp file, no log).
        """
        directory = self.path.parent
        tmp = self.path.with_name(f"{self.path.name}.{secrets.token_hex(6)}.tmp")
        fd: int | None = None
        linked = False
        try:
            self._make_dirs(directory)
            if self.path.exists():
                raise LogWriteError(f"{self.path}: refusing to materialize: a log already exists")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            _write_all(fd, content)
            if self.fsync:
                _fsync_data(fd)
            try:
                # link(), not rename(): link fails if the final path exists, so two
                # writers materialising one id cannot clobber each other.
                os.link(tmp, self.path)
            except FileExistsError:
                raise LogWriteError(
                    f"{self.path}: refusing to materialize: a log already exists"
                ) from None
            linked = True
            if self.fsync:
                fsync_dir(directory)
            # The descriptor written through is the log's: keep it (a reopen could fail
            # after the log is published), appending from now on.
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
        except OSError as error:
            if fd is not None:
                os.close(fd)
            if linked:
                # Published but not durable: the caller is told it failed, so the log must
                # not stay (the link is ours alone: link() refuses an existing path).
                with contextlib.suppress(OSError):
                    self.path.unlink()
            raise self._failed("cannot create session log", error) from error
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
        finally:
            # The log is published (or was never); the temp link is now redundant.
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        self._fd = fd

    def _make_dirs(self, directory: Path) -> None:
        missing: list[Path] = []
        current = directory
        while not current.exists():
            missing.append(current)
            current = current.parent
        for created in reversed(missing):
            created.mkdir(mode=0o700, exist_ok=True)
            if self.fsync:
                fsync_dir(created.parent)

    def append(self, payload: bytes) -> None:
        """Append `payload` (one batch), durably when `fsync` is on.

        Raises:
            LogStorageError: the write or sync failed; the file was cut back to its size
                before the call (or, if the OS refused even that, is cut before any later
                append, which is refused until it is).
        """
        fd = self._require_fd()
        try:
            self._cut_back(fd)
            size = os.fstat(fd).st_size
        except OSError as error:
            raise self._failed(
                "append refused: a failed append's bytes cannot be cut back", error
            ) from error
        try:
            _write_all(fd, payload)
            if self.fsync:
                _fsync_data(fd)
        except OSError as error:
            self._cut_to = size
            with contextlib.suppress(OSError):  # the write's error is the one to report
                self._cut_back(fd)
            raise self._failed("append failed", error) from error

    def _cut_back(self, fd: int) -> None:
        """Cut the bytes of a failed append (if any) off the file, durably."""
        if self._cut_to is not None:
            os.ftruncate(fd, self._cut_to)
            if self.fsync:
                os.fsync(fd)
            self._cut_to = None

    def _failed(self, what: str, error: OSError) -> LogStorageError:
        return LogStorageError(f"{self.path}: {what}: {error}", path=self.path, os_error=error)

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
            raise self._failed("repair failed", error) from error

    def close(self) -> None:
        """Release the file descriptor (idempotent), cutting a failed append's bytes off first
        if that is still due (best effort: a cut the OS refuses even now leaves them)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                with contextlib.suppress(OSError):
                    self._cut_back(fd)
            finally:
                os.close(fd)

    def _require_fd(self) -> int:
        if self._fd is None:
            raise LogWriteError(f"{self.path}: the log file is not open")
        return self._fd
