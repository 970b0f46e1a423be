"""What a caller is told when the disk refuses a write: `unavailable`, the reason and the errno.

A write the file system refuses (no space, a read-only file system, an I/O error) is expected on
a real disk, not a bug: every mutating endpoint answers it with ``unavailable`` and ``details``
``{sessionId, path, reason, errno}`` (``reason``: ``no-space``, ``read-only`` or ``io-error``;
``errno``: the symbolic name, e.g. ``ENOSPC``), and the server logs it as one warning line
naming the session, the path and the reason, never a traceback. Nothing of a refused write is
written, then or later: the log writer cuts its bytes back and discards its batch
(`actors.session_log`), and the projection cache's transaction rolls back.

SQLite does not say which OS error it met. A refused cache write is classified by its SQLite
result code (``SQLITE_FULL``, ``SQLITE_READONLY…``, given as ``details.sqliteError``) and, when
that is not telling (``SQLITE_IOERR…``), by the state of the file system holding the cache.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

from actors.session_log import (
    LogStorageError,
    LogWriteError,
    StorageReason,
    errno_name,
    storage_reason,
)
from actors.store._projection_cache import ProjectionCacheError
from wire import InternalError, UnavailableError, WireError

__all__ = ["batch_refused", "cache_write_refused", "log_write_refused", "write_refused"]

log = logging.getLogger("actors.store")


def write_refused(
    session_id: str,
    error: LogStorageError | OSError,
    *,
    path: Path,
    action: str,
    logged: bool = True,
) -> UnavailableError:
    """The caller's error for a write to ``path`` that the file system refused, logged as one
    warning line.

    Args:
        session_id: the session written.
        error: the refusal (a log writer's, or an OS error of the store's own).
        path: the file written.
        action: what was being done, for the message ("cannot append to the session log").
        logged: log it here (else the caller decides, e.g. once for repeated retries).
    """
    os_error = error.os_error if isinstance(error, LogStorageError) else error
    reason = error.reason if isinstance(error, LogStorageError) else storage_reason(error.errno)
    name = errno_name(os_error.errno)
    cause = os_error.strerror or str(os_error)
    message = (
        f'session "{session_id}": {action}: {path}: {cause} ({reason}'
        f"{', ' + name if name else ''}); nothing was written"
    )
    details: dict[str, object] = {"sessionId": session_id, "path": str(path), "reason": reason}
    if name is not None:
        details["errno"] = name
    if logged:
        log_write_refused(message)
    return UnavailableError(message, details=details)


def batch_refused(session_id: str, error: LogWriteError, *, pending: int, kept: bool) -> WireError:
    """The caller's error for a batch of ``pending`` events that failed to write.

    Args:
        session_id: the session.
        error: the log writer's error.
        pending: the batch's events.
        kept: the batch stays pending (write-behind: it was answered already, and the next
            flush retries it); otherwise it was discarded.

    Returns:
        `write_refused`'s error when the file system refused the write (not logged when
        ``kept``: the retries' caller logs), else ``internal`` (the writer refused its own
        batch: a bug).
    """
    if isinstance(error, LogStorageError):
        action = (
            f"cannot write {pending} pending event(s) (the next flush retries them)"
            if kept
            else f"cannot append {pending} event(s) to the session log"
        )
        return write_refused(session_id, error, path=error.path, action=action, logged=not kept)
    return InternalError(
        f'session "{session_id}": {pending} event(s) could not be written: {error}; '
        + ("they stay pending" if kept else "nothing was written"),
        details={"sessionId": session_id, "pending": pending},
    )


def cache_write_refused(
    session_id: str, error: ProjectionCacheError, path: Path, action: str
) -> UnavailableError:
    """The caller's error for a projection cache write that failed (the cache's transaction
    rolled back), logged as one warning line.

    Args:
        session_id: the session concerned.
        error: the cache's error.
        path: the cache's database file.
        action: what was being done ("cannot record the model route").
    """
    cause = error.__cause__
    code = getattr(cause, "sqlite_errorname", None) if isinstance(cause, sqlite3.Error) else None
    reason = _sqlite_reason(code, path)
    text = str(cause) if cause is not None else str(error)
    message = f'session "{session_id}": {action}: {path}: {text} ({reason}); nothing was written'
    details: dict[str, object] = {"sessionId": session_id, "path": str(path), "reason": reason}
    if code is not None:
        details["sqliteError"] = code
    log_write_refused(message)
    return UnavailableError(message, details=details)


def log_write_refused(message: str) -> None:
    """Log a refused write: one warning line (an expected failure of the disk, not a bug)."""
    log.warning("write refused: %s", message)


def _sqlite_reason(code: str | None, path: Path) -> StorageReason:
    if code == "SQLITE_FULL":
        return "no-space"
    if code is not None and code.startswith(("SQLITE_READONLY", "SQLITE_PERM")):
        return "read-only"
    try:
        state = os.statvfs(path.parent)
    except OSError:
        return "io-error"
    if state.f_flag & os.ST_RDONLY:
        return "read-only"
    if state.f_bavail == 0:
        return "no-space"
    return "io-error"
