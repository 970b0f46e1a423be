"""Typed errors for reading and writing DSH session logs.

The tree mirrors the three failure families of upstream's loader
(`session-log-format` §6.5):

- line-level damage found while *reading* the file (a plain `Error` upstream):
  `LogCorruptError`;
- restore validation after a successful read (`SessionPersistenceCorruptionError`
  upstream, "stored session "<id>" failed validation: Error: <detail>"):
  `LogValidationError`;
- refusals of an intact log this build cannot interpret
  (`SessionFormatUnsupportedError` upstream): `LogUnsupportedError`, with the
  header-version refusal `LogVersionError`.

Every read error names the file and the reason; its message is
``<reason> (raw log: <path>)``, which is upstream's exact wording for refusals.

A write fails with `LogWriteError`, or with its subclass `LogStorageError` when the file system
refused it; `storage_reason` sorts the OS error into ``no-space``, ``read-only`` or
``io-error``.
"""

from __future__ import annotations

import errno as _errno
from pathlib import Path
from typing import Literal, Self

__all__ = [
    "LogCorruptError",
    "LogLayoutError",
    "LogNotFoundError",
    "LogReadError",
    "LogStorageError",
    "LogUnsupportedError",
    "LogValidationError",
    "LogVersionError",
    "LogWriteError",
    "StorageReason",
    "errno_name",
    "storage_reason",
]

# The session-query error codes upstream's query layer wraps inspection failures in
# (§6.5): validation failures become CORRUPT_SESSION, everything else from
# inspection (refusals, read-time line damage) PERSISTENCE_FAILED.
_QUERY_CORRUPT = "SESSION_QUERY_CORRUPT_SESSION"
_QUERY_FAILED = "SESSION_QUERY_PERSISTENCE_FAILED"


class LogReadError(Exception):
    """A session log cannot be loaded.

    Attributes:
        path: the transcript that was read, when known.
        reason: what is wrong, without the path (upstream's wording where it has one).
        query_code: the session-query code upstream would wrap this failure in.
    """

    query_code: str = _QUERY_FAILED

    def __init__(self, reason: str, *, path: str | Path | None = None) -> None:
        self.reason = reason
        self.path: Path | None = Path(path) if path is not None else None
        super().__init__(self._message())

    def _message(self) -> str:
        if self.path is None:
            return self.reason
        return f"{self.reason} (raw log: {self.path})"

    def attach_path(self, path: str | Path) -> Self:
        """Name `path` (the file the error came from) in this error; returns the error."""
        self.path = Path(path)
        self.args = (self._message(),)
        return self


class LogCorruptError(LogReadError):
    """Line- or frame-level damage found while reading the file (§6.1, §9, §11).

    Attributes:
        line: the 1-based event line (after the header) the damage was found at, if any.
    """

    def __init__(
        self, reason: str, *, path: str | Path | None = None, line: int | None = None
    ) -> None:
        self.line = line
        super().__init__(reason, path=path)


class LogValidationError(LogReadError):
    """The file reads, but its header or events fail restore validation (§6.5).

    `reason` is upstream's text: ``stored session "<id>" failed validation: Error: <detail>``;
    `detail` holds only the `<detail>` part.
    """

    query_code = _QUERY_CORRUPT

    def __init__(self, session_id: str, detail: str, *, path: str | Path | None = None) -> None:
        self.session_id = session_id
        self.detail = detail
        super().__init__(
            f'stored session "{session_id}" failed validation: Error: {detail}', path=path
        )


class LogUnsupportedError(LogReadError):
    """The log is intact but uses something this build cannot interpret (§6.2)."""


class LogVersionError(LogUnsupportedError):
    """The header carries a format version other than 0 (§4.3).

    Attributes:
        session_id: the header's id (as text).
        version: the refused version number.
    """

    def __init__(
        self, session_id: str, version: int | float, *, path: str | Path | None = None
    ) -> None:
        self.session_id = session_id
        self.version = version
        super().__init__(version_refusal(session_id, version), path=path)


class LogNotFoundError(LogReadError):
    """No transcript exists for the requested session (or at the requested path)."""

    query_code = "SESSION_QUERY_SESSION_NOT_FOUND"


class LogLayoutError(LogReadError):
    """The sessions directory violates the layout rules (§2.1, §2.3)."""


class LogWriteError(Exception):
    """A write was refused or failed; nothing already durable was changed."""


StorageReason = Literal["no-space", "read-only", "io-error"]
"""Why the file system refused a write (`storage_reason`)."""

# EFBIG (a file size limit, RLIMIT_FSIZE) refuses growth exactly as a full disk does.
_NO_SPACE = frozenset({_errno.ENOSPC, _errno.EDQUOT, _errno.EFBIG})
_READ_ONLY = frozenset({_errno.EROFS, _errno.EACCES, _errno.EPERM})


def storage_reason(number: int | None) -> StorageReason:
    """Classify an OS error number: ``no-space`` (ENOSPC, EDQUOT, EFBIG), ``read-only`` (EROFS,
    EACCES, EPERM), else ``io-error`` (EIO and anything else the OS says)."""
    if number in _NO_SPACE:
        return "no-space"
    if number in _READ_ONLY:
        return "read-only"
    return "io-error"


class LogStorageError(LogWriteError):
    """The file system refused a write (no space, read-only, an I/O error); none of the
    write's bytes remain in the log (`LogFile` cuts a failed append back).

    Attributes:
        path: the file written.
        os_error: what the OS raised.
        reason: `storage_reason` of its errno.
        errno_name: its symbolic errno (``ENOSPC``), None when the OS gave no number.
    """

    def __init__(self, message: str, *, path: Path, os_error: OSError) -> None:
        super().__init__(message)
        self.path = path
        self.os_error = os_error
        self.reason: StorageReason = storage_reason(os_error.errno)
        self.errno_name = errno_name(os_error.errno)


def errno_name(number: int | None) -> str | None:
    """The symbolic name of an OS error number (``ENOSPC``), None for None."""
    if number is None:
        return None
    return _errno.errorcode.get(number, f"E{number}")


def version_refusal(session_id: str, version: int | float) -> str:
    """Return upstream's direction-aware refusal text for a non-zero `version` (§4.3)."""
    shown = _js_number(version)
    if version > 0:
        return (
            f'session "{session_id}" uses log format v{shown}, but this harness reads only v0: '
            "the log was written by a newer harness — upgrade the harness to open it"
        )
    return (
        f'session "{session_id}" uses log format v{shown}, older than the supported v0, '
        "and this build ships no upgrade path for it"
    )


def _js_number(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
